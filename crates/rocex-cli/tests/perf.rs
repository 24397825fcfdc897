//! `rocex perf` between two rocex processes on 127.0.0.1 (client) and 127.0.0.2 (server):
//! every bandwidth test with `--verify --json` must check its data and find no error.
//!
//! Each test binds RoCE's UDP port 4791 on both addresses, so they run one at a time.

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// A TCP port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(18600)
}

fn run_pair(args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let exe = env!("CARGO_BIN_EXE_rocex");
    let port = free_port().to_string();
    let common = |c: &mut Command| {
        c.arg("perf")
            .args(args)
            .args(["--verify", "--json", "-p", &port])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    };
    let mut server = Command::new(exe);
    common(&mut server);
    let server = server.spawn().expect("start the server");
    std::thread::sleep(Duration::from_millis(200));
    let mut client = Command::new(exe);
    common(&mut client);
    client.arg("127.0.0.2");
    let client = client.output().expect("run the client");
    let server = server.wait_with_output().expect("wait for the server");
    let parse = |o: &std::process::Output, who: &str| -> serde_json::Value {
        assert!(
            o.status.success(),
            "{who} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "{who} printed more than one JSON object: {text}"
        );
        serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("{who} printed bad JSON ({e}): {text}"))
    };
    (parse(&client, "client"), parse(&server, "server"))
}

fn check(args: &[&str], op: &str) {
    let (c, s) = run_pair(args);
    for (who, v) in [("client", &c), ("server", &s)] {
        assert_eq!(v["op"], op, "{who}: {v}");
        assert_eq!(v["test"], "bw", "{who}: {v}");
        assert_eq!(v["verified"], true, "{who}: {v}");
        assert_eq!(v["errors"], 0, "{who}: {v}");
    }
    assert!(c["gbps"].as_f64().is_some_and(|g| g > 0.0), "client: {c}");
    assert!(c["iters"].as_u64().is_some_and(|n| n > 0), "client: {c}");
}

#[test]
fn write_bw_verified() {
    check(&["write", "bw", "-s", "65536", "-n", "300"], "write");
}

#[test]
fn read_bw_verified() {
    check(&["read", "bw", "-s", "16384", "-n", "300"], "read");
}

#[test]
fn send_bw_verified() {
    check(
        &["send", "bw", "-s", "4096", "-n", "300", "-q", "2"],
        "send",
    );
}

#[test]
fn atomic_bw_verified() {
    check(&["atomic", "bw", "-A", "cas", "-n", "500"], "atomic");
    check(&["atomic", "bw", "-A", "faa", "-n", "500"], "atomic");
}
