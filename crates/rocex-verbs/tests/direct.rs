//! Two direct contexts (each an engine in this process on its own 127.0.19.x address, as
//! a granted context runs) move data through the public verbs API, byte for byte, and
//! make progress when their applications call no verb: a passive responder acknowledges,
//! a WRITE lands in memory that is only watched (also after the application polled and
//! took the socket, or drove the engine itself), an armed CQ's channel fires, and a peer
//! that stops answering ends in RETRY_EXC_ERR. Posts behind requests in flight leave with
//! the next poll, or at the lease's end when none comes.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use rocex_testkit::pattern;
use rocex_verbs::verbs::{Mtu, QpAttr, QpCap, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use rocex_verbs::{Error, Mr, QpInitAttr};

#[test]
fn send_recv_and_write_and_read_byte_for_byte() {
    let (mut a, mut b) = pair("127.0.19.1", "127.0.19.2");
    // SEND with immediate into a posted receive.
    let msg = pattern(1, 3000);
    a.mr.write(0, &msg).unwrap();
    b.qp.post_recv(&[RecvWr::new(7, [b.mr.sge(0, 4096)])])
        .unwrap();
    a.qp.post_send(&[SendWr::new(
        1,
        SendOp::SendWithImm(0xabcd),
        [a.mr.sge(0, 3000)],
    )])
    .unwrap();
    let wc = one(&mut b.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (7, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!((wc.byte_len, wc.imm_data), (3000, Some(0xabcd)));
    assert_eq!(wc.qp_num, b.qp.qpn());
    let mut got = vec![0; 3000];
    b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);

    // A 1 MiB WRITE, 1024 packets at MTU 1024.
    let data = pattern(2, MIB);
    a.mr.write(0, &data).unwrap();
    let op = SendOp::Write(b.mr.remote(MIB as u64));
    a.qp.post_send(&[SendWr::new(2, op, [a.mr.sge(0, MIB as u32)])])
        .unwrap();
    let wc = one(&mut a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (2, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    let mut got = vec![0; MIB];
    b.mr.read(MIB, &mut got).unwrap();
    assert!(got == data, "the WRITE's bytes differ at the target");

    // READ it back into another part of A's region.
    let op = SendOp::Read(b.mr.remote(MIB as u64 + 5));
    a.qp.post_send(&[SendWr::new(3, op, [a.mr.sge(MIB as u64, 100_000)])])
        .unwrap();
    let wc = one(&mut a.cq);
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (3, WcStatus::Success, WcOpcode::RdmaRead)
    );
    let mut back = vec![0; 100_000];
    a.mr.read(MIB, &mut back).unwrap();
    assert!(back[..] == data[5..100_005], "the READ's bytes differ");

    // The engine counted what it did, under rxe's names.
    let stats = a.ctx.stats().unwrap();
    let engine = stats.groups.iter().find(|g| g.name == "engine").unwrap();
    assert!(
        engine
            .counters
            .iter()
            .any(|(n, v)| n == "sent_pkts" && *v > 1024)
    );
    assert_eq!(
        stats.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(),
        [a.qp.qpn()]
    );
}

#[test]
fn atomics_return_and_leave_the_right_values() {
    let (mut a, b) = pair("127.0.19.3", "127.0.19.4");
    b.mr.write_u64(64, 40).unwrap();
    let target = b.mr.remote(64);
    let ops = [
        SendOp::FetchAdd {
            remote: target,
            add: 2,
        },
        SendOp::CompareSwap {
            remote: target,
            compare: 42,
            swap: 1000,
        },
        SendOp::CompareSwap {
            remote: target,
            compare: 42,
            swap: 7,
        },
    ];
    let wrs: Vec<_> = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| SendWr::new(i as u64, op, [a.mr.sge(8 * i as u64, 8)]))
        .collect();
    a.qp.post_send(&wrs).unwrap();
    for i in 0..3 {
        let wc = one(&mut a.cq);
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
    }
    // Each original value, in order: 40 before the add, 42 before the swap, 1000 after.
    assert_eq!(a.mr.read_u64(0).unwrap(), 40);
    assert_eq!(a.mr.read_u64(8).unwrap(), 42);
    assert_eq!(a.mr.read_u64(16).unwrap(), 1000);
    assert_eq!(b.mr.read_u64(64).unwrap(), 1000);
}

#[test]
fn a_passive_responder_that_never_polls_still_acknowledges() {
    let (mut a, b) = pair("127.0.19.5", "127.0.19.6");
    // B's application calls nothing from here on: its progress thread must answer.
    let data = pattern(3, 256 * 1024);
    a.mr.write(0, &data).unwrap();
    for i in 0..8u64 {
        let op = SendOp::Write(b.mr.remote(i * 256 * 1024));
        a.qp.post_send(&[SendWr::new(i, op, [a.mr.sge(0, 256 * 1024)])])
            .unwrap();
    }
    for i in 0..8 {
        let wc = one(&mut a.cq);
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
    }
    let mut got = vec![0; 256 * 1024];
    b.mr.read(7 * 256 * 1024, &mut got).unwrap();
    assert!(got == data);
}

#[test]
fn a_write_lands_in_memory_the_receiver_only_watches() {
    let (a, b) = pair("127.0.19.7", "127.0.19.8");
    let data = pattern(4, 64 * 1024);
    a.mr.write(0, &data).unwrap();
    let mut qp = a.qp;
    let op = SendOp::Write(b.mr.remote(0));
    qp.post_send(&[SendWr::new(1, op, [a.mr.sge(0, 64 * 1024)])])
        .unwrap();
    // Neither application calls a verb now: B watches its last byte as ib_write_lat does.
    let end = Instant::now() + LIMIT;
    let mut got = vec![0; 64 * 1024];
    loop {
        b.mr.read(0, &mut got).unwrap();
        if got == data {
            break;
        }
        assert!(Instant::now() < end, "the WRITE never landed");
        std::thread::sleep(Duration::from_millis(1));
    }
    // And A's engine, driven by its own progress thread meanwhile, took the ACK.
    let mut cq = a.cq;
    assert_eq!(one(&mut cq).status, WcStatus::Success);
}

/// Watches `mr` until its first `data.len()` bytes are `data`, calling `between` each time.
fn watch(mr: &Mr, data: &[u8], mut between: impl FnMut()) {
    let end = Instant::now() + LIMIT;
    let mut got = vec![0; data.len()];
    loop {
        mr.read(0, &mut got).unwrap();
        if got == data {
            return;
        }
        assert!(Instant::now() < end, "the WRITE never landed");
        between();
    }
}

#[test]
fn the_progress_thread_gets_the_socket_back_when_the_poller_stops() {
    let (mut a, mut b) = pair("127.0.19.15", "127.0.19.16");
    let write = |a: &mut End, b: &End, seed: u64, id: u64| {
        let data = pattern(seed, 4096);
        a.mr.write(0, &data).unwrap();
        let op = SendOp::Write(b.mr.remote(0));
        a.qp.post_send(&[SendWr::new(id, op, [a.mr.sge(0, 4096)])])
            .unwrap();
        data
    };
    // B polls, finds nothing and takes the lease; then it only watches its memory, as
    // ib_write_lat does between its CQ polls: the lease runs out and the progress thread
    // takes the WRITE.
    assert!(b.cq.poll(1).unwrap().is_empty());
    let data = write(&mut a, &b, 5, 1);
    watch(&b.mr, &data, || {
        std::thread::sleep(Duration::from_millis(1))
    });
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);
    // B drives its engine while it watches (rocex perf's busy wait): its own turns take
    // the WRITE.
    let data = write(&mut a, &b, 6, 2);
    watch(&b.mr, &data, || b.ctx.progress().unwrap());
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);
    // And stops: the progress thread is back on the socket for the next one.
    let data = write(&mut a, &b, 7, 3);
    watch(&b.mr, &data, || {
        std::thread::sleep(Duration::from_millis(1))
    });
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);
}

#[test]
fn an_armed_cq_writes_its_channel() {
    let mut a = end(open("127.0.19.9", 1));
    let ctx = open("127.0.19.10", 2);
    let chan = ctx.create_comp_channel().unwrap();
    let mut b = end_on(ctx, Some(&chan));
    connect(&a, &b, |x| x);
    b.qp.post_recv(&[RecvWr::new(9, [b.mr.sge(0, 64)])])
        .unwrap();
    assert!(!b.cq.req_notify().unwrap(), "nothing is waiting yet");
    assert!(b.cq.armed().unwrap());
    a.mr.write(0, b"hello").unwrap();
    a.qp.post_send(&[SendWr::new(1, SendOp::Send, [a.mr.sge(0, 5)])])
        .unwrap();
    // B sleeps on the channel; its progress thread receives the SEND and writes it.
    assert!(chan.wait(Some(LIMIT)).unwrap(), "no event within the limit");
    assert!(!b.cq.armed().unwrap(), "the event took the arm");
    let wc = b.cq.poll(4).unwrap();
    assert_eq!(wc.len(), 1);
    assert_eq!((wc[0].wr_id, wc[0].byte_len), (9, 5));
    let mut got = [0u8; 5];
    b.mr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"hello");
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);
    // Armed again with a completion already waiting: no sleep, the caller polls.
    b.qp.post_recv(&[RecvWr::new(10, [b.mr.sge(0, 64)])])
        .unwrap();
    a.qp.post_send(&[SendWr::new(2, SendOp::Send, [a.mr.sge(0, 5)])])
        .unwrap();
    assert_eq!(one(&mut a.cq).status, WcStatus::Success);
    assert!(b.cq.req_notify().unwrap(), "a completion was waiting");
}

/// A QP the program moves to ERROR flushes its receives into an armed CQ: the channel fires
/// though no packet comes to turn the engine (rping's server waits so for its CQ thread
/// after a disconnect).
#[test]
fn requests_flushed_by_a_move_to_error_write_an_armed_cqs_channel() {
    let ctx = open("127.0.19.31", 1);
    let chan = ctx.create_comp_channel().unwrap();
    let mut b = end_on(ctx, Some(&chan));
    let a = end(open("127.0.19.32", 2));
    connect(&a, &b, |x| x);
    b.qp.post_recv(&[RecvWr::new(4, [b.mr.sge(0, 64)])])
        .unwrap();
    assert!(!b.cq.req_notify().unwrap());
    let err = QpAttr {
        qp_state: rocex_verbs::verbs::QpState::Err,
        ..QpAttr::default()
    };
    b.qp.modify(&err, rocex_verbs::verbs::AttrMask::STATE)
        .unwrap();
    assert!(chan.wait(Some(LIMIT)).unwrap(), "no event within the limit");
    let wc = b.cq.poll(4).unwrap();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(4, WcStatus::WrFlushErr)]
    );
}

#[test]
fn a_peer_that_stops_answering_gives_retry_exceeded() {
    let (mut a, b) = (end(open("127.0.19.11", 3)), end(open("127.0.19.12", 4)));
    // ACK timeout 4.096 us * 2^10 (about 4 ms), one retry.
    connect(&a, &b, |x| QpAttr {
        timeout: 10,
        retry_cnt: 1,
        ..x
    });
    drop(b);
    let op = SendOp::Write(rocex_verbs::verbs::Remote {
        addr: 1 << 40,
        rkey: 1,
    });
    a.qp.post_send(&[SendWr::new(5, op, [a.mr.sge(0, 8)])])
        .unwrap();
    let wc = one(&mut a.cq);
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::RetryExcErr));
    let qp = a.ctx.qp_stats(a.qp.qpn()).unwrap();
    assert_eq!(qp.qps[0].state, rocex_verbs::verbs::QpState::Err);
}

#[test]
fn what_a_direct_context_does_not_offer_is_refused_by_name() {
    let mut a = end(open("127.0.19.13", 5));
    let e = a.ctx.cm_listen(7471).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Unsupported {
                what: "rdma_listen",
                ..
            }
        ),
        "{e}"
    );
    let e = a.qp.post_raw_send_slot(&[0; 64]).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    // An engine refusal carries rocexd's errno: a QP deeper than the device's limit.
    let e = a
        ._pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &a.cq,
            recv_cq: &a.cq,
            cap: QpCap {
                max_send_wr: 1 << 20,
                ..QpCap::default()
            },
        })
        .unwrap_err();
    assert!(matches!(e, Error::Daemon { errno: 22, .. }), "{e}");
    let e = a.ctx.create_cq(0, None).unwrap_err();
    assert!(matches!(e, Error::Daemon { errno: 22, .. }), "{e}");
    // The device is the engine's: its address as GID, the port active at its MTU.
    let attr = a.ctx.query_device().unwrap();
    assert_eq!(a.ctx.gid_addr(), "127.0.19.13".parse::<IpAddr>().unwrap());
    assert_eq!((attr.mtu, attr.port_state), (Mtu::M1024 as u8, 4));
}

/// A window of SENDs posted while the program polls leaves with its next poll (one GSO
/// send, which the peer's socket takes as one coalesced run), in order and byte for byte;
/// a request alone in flight leaves at once.
#[test]
fn posts_behind_requests_in_flight_leave_with_the_next_poll() {
    let (mut a, mut b) = pair("127.0.19.27", "127.0.19.28");
    const N: u64 = 64;
    let wrs: Vec<_> = (0..N)
        .map(|i| RecvWr::new(i, [b.mr.sge(i * 64, 64)]))
        .collect();
    b.qp.post_recv(&wrs).unwrap();
    for i in 0..N {
        a.mr.write(i as usize * 64, &pattern(100 + i, 64)).unwrap();
    }
    // The poll finds nothing and takes the lease; every post but the first has requests
    // in flight before it (all of them wait unless the lease ran out meanwhile, which a
    // loaded machine may make happen).
    assert!(a.cq.poll(1).unwrap().is_empty());
    for i in 0..N {
        a.qp.post_send(&[SendWr::new(i, SendOp::Send, [a.mr.sge(i * 64, 64)])])
            .unwrap();
    }
    let corked = direct_counter(&a.ctx, "posts_corked");
    assert!((1..N).contains(&corked), "{corked} posts corked");
    for i in 0..N {
        let wc = one(&mut b.cq);
        assert_eq!(
            (wc.wr_id, wc.status, wc.byte_len),
            (i, WcStatus::Success, 64)
        );
        let mut got = [0; 64];
        b.mr.read(i as usize * 64, &mut got).unwrap();
        assert_eq!(got[..], pattern(100 + i, 64)[..], "SEND {i}");
    }
    let mut done = 0;
    while done < N {
        for wc in a.cq.poll(16).unwrap() {
            assert_eq!((wc.wr_id, wc.status), (done, WcStatus::Success));
            done += 1;
        }
    }
    // Nothing in flight: the next SEND leaves at once.
    b.qp.post_recv(&[RecvWr::new(N, [b.mr.sge(0, 64)])])
        .unwrap();
    assert!(a.cq.poll(1).unwrap().is_empty());
    a.qp.post_send(&[SendWr::new(N, SendOp::Send, [a.mr.sge(0, 64)])])
        .unwrap();
    assert_eq!(direct_counter(&a.ctx, "posts_corked"), corked);
    assert_eq!(one(&mut b.cq).wr_id, N);
}

/// A program that posts behind a request in flight and then stops polling: the progress
/// thread takes the engine back at the lease's end and sends what waits.
#[test]
fn posts_left_for_a_poll_that_never_comes_leave_when_the_lease_ends() {
    let (mut a, mut b) = pair("127.0.19.29", "127.0.19.30");
    let wrs: Vec<_> = (0..2).map(|i| RecvWr::new(i, [b.mr.sge(0, 64)])).collect();
    b.qp.post_recv(&wrs).unwrap();
    assert!(a.cq.poll(1).unwrap().is_empty());
    for i in 0..2 {
        a.qp.post_send(&[SendWr::new(i, SendOp::Send, [a.mr.sge(0, 64)])])
            .unwrap();
    }
    assert_eq!(direct_counter(&a.ctx, "posts_corked"), 1);
    // A does nothing more; B takes both.
    assert_eq!((one(&mut b.cq).wr_id, one(&mut b.cq).wr_id), (0, 1));
}
