//! Asynchronous events (`async_events.c`, built against the system's verbs.h with
//! `-libverbs` and run under `rocex run`): async_fd polled non-blocking as event loops
//! do, an SRQ's limit event raised once as rxe raises it (`get_srq_wqe`), for QPs a NAK
//! moved to error no QP_FATAL but `IBV_EVENT_QP_LAST_WQE_REACHED` for the SRQ's QP
//! (`flush_recv_queue`), and
//! `IBV_EVENT_DEVICE_FATAL` once when rocexd is killed.

mod common;

use std::io::{BufRead, BufReader, Read};

use common::{Daemon, finish, loopback_program, under_rocex};

#[test]
fn srq_limit_and_device_fatal_arrive_on_a_pollable_async_fd() {
    let Some(prog) = loopback_program("async_events", include_str!("async_events.c"), &[]) else {
        return;
    };
    let mut d = Daemon::start("127.0.43.1");
    let mut child = under_rocex(&d.sock, prog.exe.to_str().unwrap(), &[])
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    // The program prints "armed" before it waits for the daemon's death, or fails and
    // exits (EOF) first.
    while out.read_line(&mut seen).unwrap_or(0) > 0 && !seen.ends_with("armed\n") {}
    let armed = seen.ends_with("armed\n");
    if armed {
        d.kill();
    }
    let _ = out.read_to_string(&mut seen);
    let o = finish(child, "async_events");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(armed && o.status.success(), "{seen}{err}");
    assert_eq!(seen, "armed\nok\n", "{err}");
}
