//! `rocex perf` between two rocex processes on 127.0.0.1 (client) and 127.0.0.2 (server),
//! each with its own engine, and between two processes each on its own `rocexd` (127.0.7.1
//! and 127.0.7.2, `--socket` or `$ROCEX_SOCKET`): every test with `--verify --json` must
//! check its data and find no error.
//!
//! Each test binds RoCE's UDP port 4791 on both addresses, so they run one at a time. The
//! daemon is the `rocexd` next to the `rocex` under test (`cargo build` makes it), or
//! `$ROCEXD`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::daemon;
use rocex_testkit::listen::{self, Proto};

static SERIAL: Mutex<()> = Mutex::new(());

/// How each side of a pair reaches its device.
#[derive(Clone, Copy)]
enum Device<'a> {
    /// An engine in the perf process, on the exchange's address.
    InProcess,
    /// A daemon named by `--socket`.
    Flag(&'a Path),
    /// A daemon named by `$ROCEX_SOCKET`.
    Env(&'a Path),
}

impl Device<'_> {
    fn apply(self, c: &mut Command) {
        c.env_remove("ROCEX_SOCKET");
        match self {
            Device::InProcess => {}
            Device::Flag(p) => {
                c.arg("--socket").arg(p);
            }
            Device::Env(p) => {
                c.env("ROCEX_SOCKET", p);
            }
        }
    }
}

fn run_pair(args: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    run_on(args, Device::InProcess, Device::InProcess, "127.0.0.2")
}

/// Server and client with the exchange on `server_addr`.
fn run_on(
    args: &[&str],
    server_dev: Device,
    client_dev: Device,
    server_addr: &str,
) -> (serde_json::Value, serde_json::Value) {
    let exe = env!("CARGO_BIN_EXE_rocex");
    let common = |c: &mut Command| {
        c.arg("perf")
            .args(args)
            .args(["--verify", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    };
    let mut server = Command::new(exe);
    common(&mut server);
    server_dev.apply(&mut server);
    let mut server = server.args(["-p", "0"]).spawn().expect("start the server");
    let port = listen::wait_bound(
        &mut server,
        Proto::Tcp,
        Duration::from_secs(30),
        "the server",
    )
    .port()
    .to_string();
    let mut client = Command::new(exe);
    common(&mut client);
    client_dev.apply(&mut client);
    client.args(["-p", &port, server_addr]);
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
    check_results(run_pair(args), op, "bw");
}

fn check_results((c, s): (serde_json::Value, serde_json::Value), op: &str, test: &str) {
    for (who, v) in [("client", &c), ("server", &s)] {
        assert_eq!(v["op"], op, "{who}: {v}");
        assert_eq!(v["test"], test, "{who}: {v}");
        assert_eq!(v["verified"], true, "{who}: {v}");
        assert_eq!(v["errors"], 0, "{who}: {v}");
        let cpu = |k: &str| v[k].as_f64().expect(k);
        assert!(cpu("cpu_user_s") + cpu("cpu_sys_s") > 0.0, "{who}: {v}");
    }
    assert!(c["gbps"].as_f64().is_some_and(|g| g > 0.0), "client: {c}");
    assert!(c["iters"].as_u64().is_some_and(|n| n > 0), "client: {c}");
}

#[test]
fn write_bw_verified() {
    check(&["write", "bw", "-s", "65536", "-n", "300"], "write");
}

/// Many QPs, as perftest allows: the depths per QP are cut to fit and the QPs share CQs
/// in groups; every QP's WRITE target is checked.
#[test]
fn write_bw_many_qps_verified() {
    let (c, s) = run_pair(&["write", "bw", "-s", "4096", "-n", "4", "-q", "512"]);
    assert_eq!(c["iters"], 4, "client: {c}");
    check_results((c, s), "write", "bw");
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

/// Completions for one request in a few (`--cq-mod`, perftest's CQ moderation): a count
/// that is not a multiple of it, and a timed run, which signals each QP's last request when
/// it stops. Every READ is still checked, and every CAS, which finds the value only if all
/// before it ran in order.
#[test]
fn moderated_completions_verified() {
    let (c, s) = run_pair(&["read", "bw", "-s", "4096", "-n", "250", "-Q", "7"]);
    assert_eq!(c["iters"], 250, "client: {c}");
    check_results((c, s), "read", "bw");
    check(
        &["atomic", "bw", "-A", "cas", "-D", "0.5", "-Q", "16"],
        "atomic",
    );
}

/// Both sides on their own daemon; the exchange runs over 127.0.0.1, apart from the RoCE
/// addresses, which come from the daemons.
fn over_daemons(args: &[&str], op: &str, test: &str, env: bool) {
    let _guard = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (server, client) = (daemon("127.0.7.2", &[]), daemon("127.0.7.1", &[]));
    let (s, c) = if env {
        (Device::Env(&server.sock), Device::Env(&client.sock))
    } else {
        (Device::Flag(&server.sock), Device::Flag(&client.sock))
    };
    check_results(run_on(args, s, c, "127.0.0.1"), op, test);
}

#[test]
fn daemon_write_bw_verified() {
    over_daemons(
        &["write", "bw", "-s", "65536", "-n", "200", "-q", "2"],
        "write",
        "bw",
        false,
    );
}

#[test]
fn daemon_write_bw_many_qps_verified() {
    over_daemons(
        &["write", "bw", "-s", "4096", "-n", "4", "-q", "256"],
        "write",
        "bw",
        false,
    );
}

#[test]
fn daemon_read_bw_verified() {
    over_daemons(
        &["read", "bw", "-s", "8192", "-n", "200"],
        "read",
        "bw",
        true,
    );
}

#[test]
fn daemon_send_bw_inline_verified() {
    over_daemons(
        &["send", "bw", "-s", "256", "-n", "300", "-I", "256"],
        "send",
        "bw",
        false,
    );
}

#[test]
fn daemon_atomic_bw_verified() {
    over_daemons(
        &["atomic", "bw", "-A", "cas", "-n", "300"],
        "atomic",
        "bw",
        true,
    );
}

#[test]
fn daemon_write_lat_verified() {
    over_daemons(
        &["write", "lat", "-s", "64", "-n", "200"],
        "write",
        "lat",
        false,
    );
}

/// The per-frame path (`--no-gso`: one datagram per packet each way) moves and verifies the
/// same data as the batched one.
#[test]
fn write_bw_per_frame_verified() {
    check(
        &["write", "bw", "-s", "65536", "-n", "300", "--no-gso"],
        "write",
    );
}
