//! The `hello` example as its header runs it: with no daemon at `$ROCEX_SOCKET` it says
//! which socket it tried; between two daemons each end prints the RDMA peer's address,
//! which is not the out-of-band connection's.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rocex_testkit::listen::{self, Proto};

/// The example binary, built once per test process next to the daemon.
fn hello() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        rocex_testkit::bins::cargo_build(&["-p", "rocex", "--example", "hello"])
            .join("examples")
            .join("hello")
    })
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
        .args(["server", "127.0.0.1:0"])
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
    let mut server = Command::new(hello())
        .args(["server", "127.0.7.1:0"])
        .env("ROCEX_SOCKET", &p.a.sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let at = listen::wait_bound(
        &mut server,
        Proto::Tcp,
        Duration::from_secs(20),
        "hello server",
    );
    let client = Command::new(hello())
        .args(["client", &at.to_string()])
        .env("ROCEX_SOCKET", &p.b.sock)
        .output()
        .unwrap();
    let server = server.wait_with_output().unwrap();
    assert!(client.status.success(), "{}", text(&client));
    assert!(server.status.success(), "{}", text(&server));
    let c = String::from_utf8_lossy(&client.stdout);
    let s = String::from_utf8_lossy(&server.stdout);
    assert!(c.contains(", RDMA peer 127.0.7.1\n"), "{}", text(&client));
    assert!(s.contains(", RDMA peer 127.0.7.2\n"), "{}", text(&server));
}
