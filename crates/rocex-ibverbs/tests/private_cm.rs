//! The `ROCEX_PRIVATE_1` entry points rocex's librdmacm builds on (`private_cm.c`, linked
//! against the drop-in library itself): device A listens, device B connects an RC QP,
//! A accepts with its own QP and private data, both see the connection established
//! (rocexd's CM moved the QPs to RTS; B's event carries the REP's 196 bytes), a SEND crosses, and a disconnect reaches both.

mod common;

use std::process::Command;

use common::{Daemon, build_dropin, finish, ready, text};

#[test]
fn rocexd_cm_through_the_private_entry_points() {
    if !ready(&[]) {
        return;
    }
    let libdir = common::libdir();
    let Some(prog) = build_dropin(
        "private_cm",
        include_str!("private_cm.c"),
        &["libibverbs.so.1"],
    ) else {
        return;
    };
    let (a, b) = (Daemon::start("127.0.42.1"), Daemon::start("127.0.42.2"));
    let o = finish(
        Command::new(&prog.exe)
            .arg(&a.sock)
            .arg(&b.sock)
            .env("LD_LIBRARY_PATH", &libdir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        "private_cm",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let want = "addr_family 1\nlisten 0\npost_recv 0\nconnect 0\nrequest 1 7471 1\naccept 0\n\
                established_b 2 196 1\nestablished_a 2\npost_send 0\nreceived 1 0 1\ndisconnect 0\n\
                disconnected_a 5 1\ndisconnected_b 5\n";
    assert_eq!(t, want);
}
