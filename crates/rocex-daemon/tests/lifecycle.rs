//! The daemon dies (SIGKILL) under clients blocked in every kind of wait, and a new daemon
//! takes over the same socket path: each blocked call ends with `Error::DaemonGone`, never
//! a hang, and a new `Context::open` works against the new daemon. Daemons on 127.0.6.1
//! and 127.0.6.2.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use common::{T, daemon_at, send_recv_len, small_loopback, socket_in};
use rocex_verbs::{Context, Error};

/// Runs `f` on its own thread (clients are single-threaded objects, so each is made
/// there), reports "blocked" just before `f` blocks, and sends back what `f` returned.
fn blocked<F>(f: F) -> (mpsc::Receiver<()>, mpsc::Receiver<Result<String, Error>>)
where
    F: FnOnce(&mpsc::Sender<()>) -> Result<String, Error> + Send + 'static,
{
    let (ready_tx, ready) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    thread::spawn(move || {
        let r = f(&ready_tx);
        let _ = done_tx.send(r);
    });
    (ready, done)
}

#[test]
fn killed_daemon_wakes_every_blocked_client_with_daemon_gone() {
    let sock = socket_in("life-kill");
    let mut d = daemon_at("127.0.6.1", &sock, &[]);

    // A client in Cq::poll_wait with a long timeout: nothing will complete.
    let s = sock.clone();
    let (r1, poll_wait) = blocked(move |ready| {
        let (mut x, _y) = small_loopback(&s);
        ready.send(()).unwrap();
        x.cq.poll_wait(Duration::from_secs(3600))
            .map(|wc| format!("{wc:?}"))
    });
    // A client in CompChannel::wait with no timeout at all.
    let s = sock.clone();
    let (r2, channel_wait) = blocked(move |ready| {
        let ctx = Context::open(&s)?;
        let ch = ctx.create_comp_channel()?;
        let _cq = ctx.create_cq(16, Some(&ch))?;
        ready.send(()).unwrap();
        ch.wait(None).map(|b| format!("woke: {b}"))
    });
    // A client that keeps making control calls.
    let s = sock.clone();
    let (r3, control) = blocked(move |ready| {
        let ctx = Context::open(&s)?;
        ready.send(()).unwrap();
        loop {
            ctx.query_device()?;
        }
    });
    for r in [&r1, &r2, &r3] {
        r.recv_timeout(T).expect("client set up");
    }
    thread::sleep(Duration::from_millis(200));
    d.kill();

    for (what, rx) in [
        ("poll_wait", poll_wait),
        ("CompChannel::wait", channel_wait),
        ("control call", control),
    ] {
        let r = rx
            .recv_timeout(T)
            .unwrap_or_else(|_| panic!("{what} still blocked after the daemon died"));
        assert!(matches!(r, Err(Error::DaemonGone)), "{what} returned {r:?}");
    }
}

#[test]
fn restarted_daemon_on_the_same_socket_serves_new_contexts() {
    let sock = socket_in("life-restart");
    let mut d = daemon_at("127.0.6.2", &sock, &[]);
    let (mut x, mut y) = small_loopback(&sock);
    send_recv_len(&mut x, &mut y, 1, 2000);
    d.kill();
    assert!(sock.exists(), "SIGKILL leaves the socket file behind");

    // The old context fails cleanly, at once and on every later call.
    assert!(matches!(x.ctx.query_device(), Err(Error::DaemonGone)));
    assert!(matches!(x.ctx.alloc_pd(), Err(Error::DaemonGone)));
    assert!(matches!(
        x.cq.poll_wait(Duration::from_secs(3600)),
        Err(Error::DaemonGone)
    ));
    assert!(matches!(Context::open(&sock), Err(Error::Connect { .. })));
    drop((x, y));

    // A new daemon replaces the stale socket file; new contexts work end to end.
    let _d = daemon_at("127.0.6.2", &sock, &[]);
    let (mut x, mut y) = small_loopback(&sock);
    for id in 1..=3 {
        send_recv_len(&mut x, &mut y, id, 3000);
    }
}

#[test]
fn a_second_daemon_does_not_steal_a_live_socket() {
    let sock = socket_in("life-steal");
    let _d = daemon_at("127.0.6.3", &sock, &[]);
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_rocexd"))
        .args(["--addr", "127.0.6.4", "--socket"])
        .arg(&sock)
        .env("RUST_LOG", "off")
        .status()
        .unwrap();
    assert!(!st.success(), "a second daemon took a live socket");
    let ctx = Context::open(&sock).expect("the first daemon still serves");
    ctx.query_device().unwrap();
}
