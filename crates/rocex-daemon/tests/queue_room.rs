//! A posted request stays in the client's ring until the engine has room for it: sends
//! posted before the QP may send wait there and go once it is ready, and a client that
//! posts faster than the engine's queue drains loses nothing and completes in order.

use std::net::IpAddr;
use std::time::{Duration, Instant};

mod common;

use common::{ACCESS, T, end_with, ok, pair, pattern, read_back, ring_daemon};
use rocex_verbs::verbs::{Mtu, QpAttr, QpCap, SendOp, SendWr, WcOpcode};

/// The attributes `common::connect` takes a QP through, towards `peer` (address, QPN, PSN).
fn towards(my_psn: u32, peer: (IpAddr, u32, u32)) -> QpAttr {
    common::rc_attrs(my_psn, peer, Mtu::M1024, ACCESS)
}

#[test]
fn sends_posted_before_rts_wait_in_the_ring() {
    let d = ring_daemon("127.0.5.31", &[]);
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        ..QpCap::default()
    };
    let mut x = end_with(&d.sock, 1 << 16, 64, cap, ACCESS);
    let y = end_with(&d.sock, 1 << 16, 64, cap, ACCESS);
    x.mr.write(0, &pattern(3, 3 * 1024)).unwrap();
    let (px, py) = (100, 200);
    let steps = towards(px, (y.ctx.gid_addr(), y.qp.qpn(), py)).rc_steps();
    x.qp.modify(&steps[0].0, steps[0].1).unwrap();
    let wrs: Vec<SendWr> = (0..3u64)
        .map(|i| {
            SendWr::new(
                i + 1,
                SendOp::Write(y.mr.remote(i * 1024)),
                vec![x.mr.sge(i * 1024, 1024)],
            )
        })
        .collect();
    x.qp.post_send(&wrs).unwrap();
    // In INIT the engine takes no send: neither posted nor refused, nothing completes.
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        assert!(x.cq.poll(4).unwrap().is_empty(), "a send completed in INIT");
        std::thread::sleep(Duration::from_millis(10));
    }
    for (a, mask) in towards(py, (x.ctx.gid_addr(), x.qp.qpn(), px)).rc_steps() {
        y.qp.modify(&a, mask).unwrap();
    }
    for (a, mask) in &steps[1..] {
        x.qp.modify(a, *mask).unwrap();
    }
    for id in 1..=3 {
        ok(&mut x.cq, id, WcOpcode::RdmaWrite);
    }
    assert_eq!(read_back(&y, 0, 3 * 1024), pattern(3, 3 * 1024));
}

#[test]
fn a_client_faster_than_the_engine_loses_nothing() {
    let d = ring_daemon("127.0.5.32", &[]);
    // Four slots in the ring and four requests in the engine: the ring refills while the
    // engine's queue is still full, so the daemon must leave descriptors in it.
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 4,
        ..QpCap::default()
    };
    let len = 32 * 1024u64;
    let n = 48u64;
    let mut x = end_with(&d.sock, (n * len) as usize, 64, cap, ACCESS);
    let y = end_with(&d.sock, (n * len) as usize, 64, cap, ACCESS);
    pair(&x, &y);
    for i in 0..n {
        x.mr.write((i * len) as usize, &pattern(i as u8, len as usize))
            .unwrap();
    }
    let (mut posted, mut done) = (0u64, 0u64);
    let deadline = Instant::now() + T * 3;
    while done < n {
        assert!(Instant::now() < deadline, "{done} of {n} WRITEs completed");
        if posted < n {
            let wr = SendWr::new(
                posted,
                SendOp::Write(y.mr.remote(posted * len)),
                vec![x.mr.sge(posted * len, len as u32)],
            );
            match x.qp.post_send(&[wr]) {
                Ok(()) => posted += 1,
                Err(rocex_verbs::Error::QueueFull) => {}
                Err(e) => panic!("post {posted}: {e}"),
            }
        }
        for wc in x.cq.poll(8).unwrap() {
            assert_eq!(
                (wc.wr_id, wc.status, wc.opcode),
                (
                    done,
                    rocex_verbs::verbs::WcStatus::Success,
                    WcOpcode::RdmaWrite
                ),
                "{wc:?}"
            );
            done += 1;
        }
    }
    for i in 0..n {
        assert_eq!(
            read_back(&y, (i * len) as usize, len as usize),
            pattern(i as u8, len as usize),
            "WRITE {i}"
        );
    }
}
