//! The `hello` example as its header runs it: with no daemon at `$ROCEX_SOCKET` it says
//! which socket it tried; between two daemons each end prints the RDMA peer's address,
//! which is not the out-of-band connection's.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The example binary, built once per test process next to the daemon.
fn hello() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let daemon = common::rocexd();
        let profile_dir = daemon.parent().expect("target/<profile>");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "rocex", "--example", "hello"])
            .arg("--target-dir")
            .arg(profile_dir.parent().expect("target dir"))
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.ends_with("release") {
            cmd.arg("--release");
        }
        assert!(cmd.status().expect("run cargo").success(), "build hello");
        profile_dir.join("examples").join("hello")
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_missing_daemon_is_named() {
    let sock = std::env::temp_dir().join(format!("rocex-none-{}/d.sock", std::process::id()));
    let out = Command::new(hello())
        .args(["server", &format!("127.0.0.1:{}", free_port())])
        .env("ROCEX_SOCKET", &sock)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "hello: rocex device: no rocexd at {}",
            sock.display()
        )),
        "{}",
        text(&out)
    );
}

#[test]
fn both_ends_print_the_rdma_peer() {
    let p = common::pair();
    let at = format!("127.0.7.1:{}", free_port());
    let server = Command::new(hello())
        .args(["server", &at])
        .env("ROCEX_SOCKET", &p.a.sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The client retries nothing: give the server its moment to listen.
    let mut client = None;
    for _ in 0..100 {
        let out = Command::new(hello())
            .args(["client", &at])
            .env("ROCEX_SOCKET", &p.b.sock)
            .output()
            .unwrap();
        let refused = String::from_utf8_lossy(&out.stderr).contains("refused");
        client = Some(out);
        if !refused {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let client = client.unwrap();
    let server = server.wait_with_output().unwrap();
    assert!(client.status.success(), "{}", text(&client));
    assert!(server.status.success(), "{}", text(&server));
    let c = String::from_utf8_lossy(&client.stdout);
    let s = String::from_utf8_lossy(&server.stdout);
    assert!(c.contains(", RDMA peer 127.0.7.1\n"), "{}", text(&client));
    assert!(s.contains(", RDMA peer 127.0.7.2\n"), "{}", text(&server));
}
