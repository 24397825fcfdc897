//! One owner per address: a second `rocexd` on an address another one serves exits at
//! once, with status 1, an error naming the address and the daemon that holds it (its pid
//! and command line), and no control socket of its own; on every pair of backends, since
//! each binds UDP port 4791 on its address without `SO_REUSEADDR` (`afpacket` binds it as
//! its guard against the kernel).
//!
//! The `udp` and `uring` pairs run on loopback (127.0.9.23 to .25); the pairs with
//! `afpacket` need an interface that holds the address, so they run in a network namespace
//! on a veth pair (198.18.223.1/24), which needs root.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::{Layout, Net};
use common::{Daemon, rocexd};

const LAYOUT: Layout = Layout {
    ns: ["own0", "own1"],
    veth: ["ownv0", "ownv1"],
    addr: ["198.18.223.1", "198.18.223.2"],
};

/// Starts a second daemon on `first`'s address, with `backend`, in `netns` if given, and
/// checks that it is refused as the module doc says.
fn second_is_refused(first: &Daemon, addr: &str, backend: &str, netns: Option<&str>) {
    let sock = first.sock.with_file_name("second.sock");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_rocexd")]);
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_rocexd")),
    };
    cmd.args(["--addr", addr, "--backend", backend, "--socket"])
        .arg(&sock)
        .env_remove("ROCEX_SOCKET")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("start the second rocexd");
    let out = rocex_testkit::finish(child, Duration::from_secs(10), "the second rocexd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{backend}: {err}");
    let holder = format!(
        "UDP {addr}:4791 is already in use by pid {} (",
        first.child.id()
    );
    let named = format!("--addr {addr} --socket {}", first.sock.display());
    for want in [holder.as_str(), &named, "one RoCE engine per address"] {
        assert!(err.contains(want), "{backend}: no {want:?} in {err:?}");
    }
    assert_eq!(err.lines().count(), 1, "{backend}: not one line: {err:?}");
    assert!(
        !Path::new(&sock).exists(),
        "{backend}: the second bound its socket"
    );
}

#[test]
fn a_second_daemon_on_a_loopback_address_is_refused() {
    for (i, (first, second)) in [("udp", "udp"), ("udp", "uring"), ("uring", "udp")]
        .into_iter()
        .enumerate()
    {
        let addr = format!("127.0.9.{}", 23 + i);
        let d = rocexd(&addr)
            .tag(&format!("owner-{i}"))
            .args(["--backend", first])
            .start();
        second_is_refused(&d, &addr, second, None);
    }
}

#[test]
fn a_second_daemon_is_refused_on_every_pair_of_backends() {
    let Some(net) = Net::up(
        "a_second_daemon_is_refused_on_every_pair_of_backends",
        &LAYOUT,
    ) else {
        return;
    };
    for first in ["udp", "afpacket", "uring"] {
        let mut d = net.daemon(0, first);
        for second in ["udp", "afpacket", "uring"] {
            second_is_refused(&d, LAYOUT.addr[0], second, Some(LAYOUT.ns[0]));
        }
        assert!(d.stop(), "{first}: the first daemon did not stop cleanly");
    }
}
