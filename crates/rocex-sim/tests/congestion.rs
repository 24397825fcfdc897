//! DCQCN on virtual time: CE marks to CNPs at most one per interval per QP, the reaction
//! point's rate against the paper's equations worked by hand, two WRITE flows and two
//! READ flows (paced at their responders) through one marking bottleneck, and nothing
//! changed where nothing is marked.

mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rocex_proto::verbs::{Mtu, QpCap, Remote, SendOp, SendWr, Sge, WcStatus};
use rocex_proto::{
    Access, Config, Congestion, DcqcnParams, Ecn, Engine, IcrcStatus, Instant, Keys, QpInit,
    RateState, VecRegion,
};
use rocex_sim::{Bottleneck, Fabric, Link};
use rocex_wire::{Opcode, PacketRepr};

use common::{Params, connect_qp};

const BUF: usize = 1 << 20;
const BASE: u64 = 0x7f00_0000_0000;
const LINE: f64 = 10e9;

/// One engine with a PD, a CQ and a buffer.
struct Node {
    idx: usize,
    addr: IpAddr,
    cq: u32,
    pd: rocex_proto::PdId,
    keys: Keys,
}

fn congestion(ecn: bool) -> Congestion {
    Congestion {
        ecn,
        dcqcn: DcqcnParams {
            line_rate: LINE,
            ..DcqcnParams::default()
        },
        ..Congestion::default()
    }
}

fn node(fabric: &mut Fabric, i: u8, c: Congestion) -> Node {
    let addr: IpAddr = [198, 18, 0, i].into();
    let mut config = Config::new(addr, [i; 32]);
    config.port_mtu = Mtu::M4096;
    config.congestion = c;
    let mut e = Engine::new(config);
    let pd = e.alloc_pd();
    let cq = e.create_cq(1 << 15).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let buf = Arc::new(VecRegion::new(BUF));
    let keys = e.reg_mr(pd, BASE, BUF as u64, access, buf).unwrap();
    let idx = fabric.add(e);
    Node {
        idx,
        addr,
        cq,
        pd,
        keys,
    }
}

/// Nodes 1 and 2 on a perfect link, both with `c`.
fn two_nodes(c: Congestion) -> (Fabric, Node, Node) {
    let mut f = Fabric::new(1, Link::default());
    let a = node(&mut f, 1, c);
    let b = node(&mut f, 2, c);
    (f, a, b)
}

fn qp(fabric: &mut Fabric, n: &Node) -> u32 {
    let cap = QpCap {
        max_send_wr: 256,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let init = QpInit::rc(n.pd, n.cq, cap);
    fabric.node(n.idx).create_qp(init).unwrap()
}

/// Brings `qpn` of `me` to RTS towards `peer`'s `peer_qpn`: path MTU 4096, WRITE and READ
/// access, PSNs from 0, the sim tests' timers and retries.
fn connect(fabric: &mut Fabric, me: &Node, qpn: u32, peer: &Node, peer_qpn: u32) {
    let p = Params {
        mtu: Mtu::M4096,
        qp_access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        psn_a: 0,
        psn_b: 0,
        ..Params::default()
    };
    connect_qp(fabric.node(me.idx), qpn, (peer.addr, peer_qpn, 0), 0, &p);
}

/// A connected QP pair: `(sender's QPN, receiver's QPN)`.
fn pair(fabric: &mut Fabric, a: &Node, b: &Node) -> (u32, u32) {
    let (qa, qb) = (qp(fabric, a), qp(fabric, b));
    connect(fabric, a, qa, b, qb);
    connect(fabric, b, qb, a, qa);
    (qa, qb)
}

/// A WRITE or READ (`op`) of `len` bytes between the starts of `local`'s and `remote`'s
/// buffers.
fn request(id: u64, op: fn(Remote) -> SendOp, local: &Node, remote: &Node, len: u32) -> SendWr {
    let sge = Sge {
        addr: BASE,
        length: len,
        lkey: local.keys.lkey,
    };
    let remote = Remote {
        addr: BASE,
        rkey: remote.keys.rkey,
    };
    SendWr::new(id, op(remote), vec![sge])
}

/// Hands `e` a CNP for QP `qpn` from `from` to `to` at `at`, in a packet whose IP header
/// carried `ecn`; its ICRC is a placeholder, taken as valid.
fn deliver_cnp(e: &mut Engine, at: Instant, (from, to): (SocketAddr, IpAddr), qpn: u32, ecn: Ecn) {
    let mut b = vec![0; 32];
    let n = PacketRepr::cnp(qpn).emit(&mut b).unwrap();
    e.handle_packet_ecn(at, from, to, &b[..n], IcrcStatus::Valid, ecn);
}

fn src(n: &Node) -> SocketAddr {
    SocketAddr::new(n.addr, 4791)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn the_rate_follows_the_dcqcn_equations_for_a_scripted_cnp_sequence() {
    let (mut f, a, b) = two_nodes(congestion(true));
    let (qa, _) = pair(&mut f, &a, &b);
    let e = f.node(a.idx);
    let us = Instant::from_micros;
    let at = |e: &mut Engine, t: u64| {
        e.handle_timeout(us(t));
        e.qp_rate(qa).unwrap()
    };
    assert_eq!(e.qp_rate(qa).unwrap(), None, "line rate before any CNP");

    // Two CNPs 10 us apart: each halves the rate (alpha starts at 1 and stays 1).
    let g = 1.0 / 256.0;
    deliver_cnp(e, us(0), (src(&b), a.addr), qa, Ecn::NotEct);
    let s = e.qp_rate(qa).unwrap().unwrap();
    assert_eq!((s.current, s.target, s.alpha), (5e9, 10e9, 1.0));
    deliver_cnp(e, us(10), (src(&b), a.addr), qa, Ecn::NotEct);
    let s = e.qp_rate(qa).unwrap().unwrap();
    assert_eq!((s.current, s.target, s.alpha), (2.5e9, 5e9, 1.0));

    // From 10 us on, every 55 us: alpha decays by (1 - g) and the rate takes one step.
    // Steps 1-4 are fast recovery (Rc = (Rt + Rc) / 2); at step 5 the timer count reaches
    // F = 5 and additive increase raises Rt by 40 Mb/s first.
    let (mut rc, mut rt, mut alpha) = (2.5e9, 5e9, 1.0);
    for step in 1..=6u32 {
        let s: RateState = at(e, 10 + 55 * u64::from(step)).unwrap();
        alpha *= 1.0 - g;
        if step >= 5 {
            rt += 40e6;
        }
        rc = (rt + rc) / 2.0;
        assert_eq!(s.timer_stage, step);
        assert_eq!(s.byte_stage, 0);
        assert!(close(s.alpha, alpha), "step {step}: alpha {}", s.alpha);
        assert!(close(s.target, rt), "step {step}: Rt {} != {rt}", s.target);
        assert!(
            close(s.current, rc),
            "step {step}: Rc {} != {rc}",
            s.current
        );
    }

    // A CNP now: Rt = Rc, Rc = Rc (1 - alpha / 2), alpha = (1 - g) alpha + g.
    deliver_cnp(e, us(400), (src(&b), a.addr), qa, Ecn::NotEct);
    let s = e.qp_rate(qa).unwrap().unwrap();
    assert!(close(s.target, rc));
    assert!(close(s.current, rc * (1.0 - alpha / 2.0)));
    assert!(close(s.alpha, (1.0 - g) * alpha + g));
    assert_eq!((s.timer_stage, s.byte_stage), (0, 0));
    assert_eq!(e.counters().rp_cnp_handled, 3);

    // Left alone, the rate climbs back and the limiter goes: line rate again.
    let mut t = 400;
    while e.qp_rate(qa).unwrap().is_some() {
        t += 55;
        assert!(t < 1_000_000, "the rate never recovered");
        e.handle_timeout(us(t));
    }
    assert_eq!(e.poll_timeout(), None, "no timer left once recovered");
}

#[test]
fn hyper_increase_follows_once_both_counters_pass_f() {
    let c = Congestion {
        dcqcn: DcqcnParams {
            line_rate: LINE,
            byte_counter: 4096 * 4,
            // Long enough for the byte counter's steps to come first.
            increase_period: Duration::from_millis(1),
            ..DcqcnParams::default()
        },
        ..Congestion::default()
    };
    let (mut f, a, b) = two_nodes(c);
    let (qa, _) = pair(&mut f, &a, &b);
    let e = f.node(a.idx);
    deliver_cnp(e, Instant::ZERO, (src(&b), a.addr), qa, Ecn::NotEct);
    deliver_cnp(
        e,
        Instant::from_micros(1),
        (src(&b), a.addr),
        qa,
        Ecn::NotEct,
    );
    let s = e.qp_rate(qa).unwrap().unwrap();
    assert_eq!((s.current, s.target), (2.5e9, 5e9));
    // 6 byte-counter steps (24 packets of 4 KiB) then 6 timer steps: byte steps 1-4 fast
    // recovery, 5-6 additive; timer steps 1-4 additive (the byte count is past F), timer
    // step 5 additive (min = 5 is not past F), step 6 hyper with i = 1.
    let mut now = Instant::from_micros(2);
    let mut buf = vec![0; 8192];
    for i in 0..24 {
        e.post_send(now, qa, request(i, SendOp::Write, &a, &b, 4096))
            .unwrap();
        // Paced: the next packet waits for its time.
        while e.poll_transmit(now, &mut buf).is_none() {
            now = e.poll_timeout().unwrap();
            assert!(
                now < Instant::from_micros(1000),
                "paced past the increase timer"
            );
            e.handle_timeout(now);
        }
    }
    let (mut rc, mut rt) = (2.5e9, 5e9);
    for step in 1..=6 {
        if step >= 5 {
            rt += 40e6;
        }
        rc = (rt + rc) / 2.0;
    }
    let s = e.qp_rate(qa).unwrap().unwrap();
    assert_eq!(s.byte_stage, 6);
    assert!(close(s.current, rc) && close(s.target, rt), "{s:?}");
    for step in 1..=6u64 {
        e.handle_timeout(Instant::from_micros(1 + 1000 * step));
        if step == 6 {
            rt += 400e6;
        } else {
            rt += 40e6;
        }
        rc = (rt + rc) / 2.0;
        let s = e.qp_rate(qa).unwrap().unwrap();
        assert!(close(s.target, rt), "timer step {step}: {s:?} Rt {rt}");
        assert!(close(s.current, rc), "timer step {step}: {s:?} Rc {rc}");
    }
}

#[test]
fn ce_marks_become_cnps_at_most_one_per_50_us_per_qp() {
    let (mut f, a, b) = two_nodes(congestion(true));
    let (q1a, q1b) = pair(&mut f, &a, &b);
    let (q2a, q2b) = pair(&mut f, &a, &b);
    // 20 one-packet WRITEs on each QP, taken off A's wire by hand.
    let mut packets = Vec::new();
    let mut buf = vec![0; 8192];
    for i in 0..20 {
        for q in [q1a, q2a] {
            f.node(a.idx)
                .post_send(Instant::ZERO, q, request(i, SendOp::Write, &a, &b, 64))
                .unwrap();
        }
    }
    while let Some(t) = f.node(a.idx).poll_transmit(Instant::ZERO, &mut buf) {
        assert_eq!(t.tclass, 0b10, "ECT(0), DSCP 0");
        packets.push((SocketAddr::new(a.addr, t.src_port), buf[..t.len].to_vec()));
    }
    assert_eq!(packets.len(), 40);
    // Delivered every 5 us, both QPs' packets CE-marked: 0, 5, ..., 95 us per QP. CNPs at
    // 0 and 50 us on each QP: four in all, each to the sender's QP.
    let e = f.node(b.idx);
    let mut cnps = Vec::new();
    for (i, (from, p)) in packets.iter().enumerate() {
        let now = Instant::from_micros(5 * (i as u64 / 2));
        let status = Engine::check_icrc_from_rocex(*from, b.addr, p);
        assert_eq!(status, IcrcStatus::Valid);
        e.handle_packet_ecn(now, *from, b.addr, p, status, Ecn::Ce);
        while let Some(t) = e.poll_transmit(now, &mut buf) {
            let (pkt, _) = PacketRepr::parse(&buf[..t.len]).unwrap();
            if pkt.bth.opcode == Opcode::CNP {
                assert!(pkt.bth.becn && pkt.cnp == Some(Default::default()));
                assert_eq!(t.tclass, 0b10);
                cnps.push((now, pkt.bth.dest_qp));
            }
        }
    }
    let us = Instant::from_micros;
    assert_eq!(
        cnps,
        [(us(0), q1a), (us(0), q2a), (us(50), q1a), (us(50), q2a)]
    );
    let c = e.counters().clone();
    assert_eq!((c.np_ecn_marked_roce_packets, c.np_cnp_sent), (40, 4));
    // Every WRITE was taken in order.
    for q in [q1b, q2b] {
        assert_eq!(e.qp_status(q).unwrap().rq_psn, 20);
    }
}

#[test]
fn a_cnp_from_elsewhere_or_for_no_qp_is_dropped_and_counted() {
    let (mut f, a, b) = two_nodes(congestion(true));
    let (qa, _) = pair(&mut f, &a, &b);
    let e = f.node(a.idx);
    let stranger = SocketAddr::new([198, 18, 0, 9].into(), 4791);
    deliver_cnp(e, Instant::ZERO, (stranger, a.addr), qa, Ecn::Ce);
    deliver_cnp(e, Instant::ZERO, (src(&b), a.addr), 0xabc, Ecn::Ce);
    let c = e.counters();
    assert_eq!(
        (c.drop_wrong_source, c.drop_no_qp, c.rp_cnp_handled),
        (1, 1, 0)
    );
    assert_eq!(e.qp_rate(qa).unwrap(), None);
}

/// What a run of `flows` senders streaming 64 KiB WRITEs into one receiver did.
struct Run {
    /// Bytes each flow completed in the second half of the run.
    late_bytes: Vec<u64>,
    /// Every packet sent, in order.
    trace: Vec<Vec<u8>>,
    marked: u64,
    dropped: u64,
    /// The most bytes queued at the bottleneck in the second half.
    late_queue: usize,
    cnps: u64,
}

fn stream(flows: usize, ecn: bool, bottleneck: Option<Bottleneck>, run_for: Duration) -> Run {
    let link = Link {
        delay: Duration::from_micros(5),
        ..Link::default()
    };
    let mut f = Fabric::new(7, link);
    let rx = node(&mut f, 100, congestion(ecn));
    let senders: Vec<Node> = (0..flows)
        .map(|i| node(&mut f, 1 + i as u8, congestion(ecn)))
        .collect();
    let qps: Vec<u32> = senders.iter().map(|s| pair(&mut f, s, &rx).0).collect();
    if let Some(b) = bottleneck {
        f.set_bottleneck(rx.idx, b);
    }
    let trace = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let t2 = trace.clone();
    f.intercept(move |_, _, bytes| {
        t2.borrow_mut().push(bytes.clone());
        true
    });
    const LEN: u32 = 64 << 10;
    const DEPTH: u64 = 8;
    for (s, &q) in senders.iter().zip(&qps) {
        for i in 0..DEPTH {
            f.node(s.idx)
                .post_send(Instant::ZERO, q, request(i, SendOp::Write, s, &rx, LEN))
                .unwrap();
        }
    }
    let end = Instant::ZERO + run_for;
    let half = Instant::ZERO + run_for / 2;
    let mut late_bytes = vec![0u64; flows];
    let mut next_id = DEPTH;
    let mut late_queue = 0;
    while f.now() < end && f.step() {
        let now = f.now();
        if now >= half {
            let q = f.bottleneck_stats(rx.idx).map_or(0, |s| s.queued);
            late_queue = late_queue.max(q);
        }
        for (i, (s, &q)) in senders.iter().zip(&qps).enumerate() {
            while let Some(wc) = f.node(s.idx).poll_cq(s.cq) {
                assert_eq!(wc.status, WcStatus::Success);
                if now >= half {
                    late_bytes[i] += u64::from(LEN);
                }
                next_id += 1;
                f.node(s.idx)
                    .post_send(now, q, request(next_id, SendOp::Write, s, &rx, LEN))
                    .unwrap();
            }
        }
    }
    let stats = f.bottleneck_stats(rx.idx).unwrap_or_default();
    let cnps = f.node(rx.idx).counters().np_cnp_sent;
    let trace = trace.borrow().clone();
    Run {
        late_bytes,
        trace,
        marked: stats.marked,
        dropped: stats.dropped,
        late_queue,
        cnps,
    }
}

fn marking(rate: f64) -> Bottleneck {
    Bottleneck {
        rate,
        mark_above: 40 << 10,
        capacity: 8 << 20,
    }
}

#[test]
fn two_flows_through_a_marking_bottleneck_share_it_within_20_percent() {
    let r = stream(2, true, Some(marking(5e9)), Duration::from_millis(40));
    assert!(
        r.marked > 0 && r.cnps > 0,
        "marked {} cnps {}",
        r.marked,
        r.cnps
    );
    assert_eq!(r.dropped, 0);
    let (x, y) = (r.late_bytes[0] as f64, r.late_bytes[1] as f64);
    assert!(x > 0.0 && y > 0.0);
    assert!(
        (x - y).abs() / x.max(y) <= 0.2,
        "flows moved {x} and {y} bytes in the second half"
    );
    // Together they keep the bottleneck busy: at least 80% of 5 Gb/s over 20 ms.
    assert!(x + y >= 0.8 * 5e9 / 8.0 * 0.020, "{x} + {y}");
    // And its queue stays near the marking threshold, where without ECN it holds both
    // windows (2 x 128 packets of 4 KiB).
    let without = stream(2, false, Some(marking(5e9)), Duration::from_millis(40));
    assert_eq!((without.marked, without.cnps), (0, 0));
    eprintln!(
        "late queue {} with DCQCN, {} without",
        r.late_queue, without.late_queue
    );
    assert!(
        r.late_queue <= 256 << 10,
        "queue {} with DCQCN",
        r.late_queue
    );
    assert!(
        without.late_queue >= 900 << 10,
        "queue {} without",
        without.late_queue
    );
}

/// Two responders answer 64 KiB READs (16 in flight each) through a bottleneck in front
/// of the one requester node: returns each flow's bytes in the second half of `run_for`,
/// the most bytes queued then, and the CNPs the responders handled.
fn reads(ecn: bool, run_for: Duration) -> (Vec<u64>, usize, u64) {
    let mut f = Fabric::new(7, Link::with_delay(Duration::from_micros(5)));
    let rx = node(&mut f, 100, congestion(ecn));
    let senders: Vec<Node> = (1..=2).map(|i| node(&mut f, i, congestion(ecn))).collect();
    let qps: Vec<(u32, u32)> = senders.iter().map(|s| pair(&mut f, &rx, s)).collect();
    f.set_bottleneck(rx.idx, marking(5e9));
    const LEN: u32 = 64 << 10;
    let read = |id, s: &Node| request(id, SendOp::Read, &rx, s, LEN);
    for (s, &(q, _)) in senders.iter().zip(&qps) {
        for i in 0..16 {
            f.node(rx.idx)
                .post_send(Instant::ZERO, q, read(i, s))
                .unwrap();
        }
    }
    let half = Instant::ZERO + run_for / 2;
    let (mut late, mut queue) = (vec![0u64; 2], 0);
    while f.now() < Instant::ZERO + run_for && f.step() {
        let now = f.now();
        if now >= half {
            queue = queue.max(f.bottleneck_stats(rx.idx).map_or(0, |s| s.queued));
        }
        while let Some(wc) = f.node(rx.idx).poll_cq(rx.cq) {
            assert_eq!(wc.status, WcStatus::Success);
            let i = qps.iter().position(|&(q, _)| q == wc.qp_num).unwrap();
            if now >= half {
                late[i] += u64::from(LEN);
            }
            let (q, s) = (qps[i].0, &senders[i]);
            f.node(rx.idx).post_send(now, q, read(wc.wr_id, s)).unwrap();
        }
    }
    let cnps = senders
        .iter()
        .map(|s| f.node(s.idx).counters().rp_cnp_handled)
        .sum();
    (late, queue, cnps)
}

#[test]
fn read_responses_are_paced_by_the_responders_rate() {
    // The responder is the data's sender: CNPs for its CE-marked READ responses come to
    // its QP, and its limiter paces the responses as it would requests.
    let d = Duration::from_millis(40);
    let (late, queue, cnps) = reads(true, d);
    let (x, y) = (late[0] as f64, late[1] as f64);
    eprintln!("READ flows {x} {y}, queue {queue}, {cnps} CNPs handled");
    assert!(cnps > 0);
    assert!((x - y).abs() / x.max(y) <= 0.2, "flows moved {x} and {y}");
    assert!(x + y >= 0.8 * 5e9 / 8.0 * 0.020, "{x} + {y}");
    assert!(queue <= 256 << 10, "queue {queue} with DCQCN");
    // Without ECN the queue holds both flows' READs in flight (2 x 16 x 64 KiB).
    let (_, unpaced, none) = reads(false, d);
    eprintln!("without ECN: queue {unpaced}");
    assert_eq!(none, 0);
    assert!(unpaced >= 900 << 10, "queue {unpaced} without");
}

#[test]
fn without_marks_nothing_changes() {
    // ECN on but nothing marks: the same packets in the same order as with ECN off (the
    // sim carries the traffic class beside the bytes), no CNP, no limiter.
    let d = Duration::from_millis(5);
    let off = stream(2, false, None, d);
    let on = stream(2, true, None, d);
    let roomy = Bottleneck {
        rate: 1e12,
        mark_above: usize::MAX / 2,
        capacity: usize::MAX / 2,
    };
    let unmarked = stream(2, true, Some(roomy), d);
    assert!(off.trace.len() > 1000);
    assert_eq!(on.trace, off.trace);
    assert_eq!(on.late_bytes, off.late_bytes);
    assert_eq!((on.cnps, unmarked.cnps, unmarked.marked), (0, 0, 0));
}

#[test]
fn a_qps_traffic_class_gives_its_dscp_and_ecn() {
    // rdma-core's grh.traffic_class: DSCP in the upper six bits, ECN in the lower two.
    let tclass_of = |ecn_on: bool, tclass: Option<u8>| {
        let (mut f, a, b) = two_nodes(congestion(ecn_on));
        let (qa, _) = pair(&mut f, &a, &b);
        let e = f.node(a.idx);
        if let Some(t) = tclass {
            e.set_traffic_class(qa, t).unwrap();
        }
        e.post_send(Instant::ZERO, qa, request(1, SendOp::Write, &a, &b, 8))
            .unwrap();
        let mut buf = vec![0; 256];
        e.poll_transmit(Instant::ZERO, &mut buf).unwrap().tclass
    };
    assert_eq!(tclass_of(false, None), 0, "rxe's TOS 0 by default");
    assert_eq!(tclass_of(true, None), 0x02, "ECT(0)");
    assert_eq!(tclass_of(false, Some(26 << 2)), 0x68, "DSCP 26");
    assert_eq!(tclass_of(true, Some(26 << 2)), 0x6a, "DSCP 26, ECT(0)");
    assert_eq!(
        tclass_of(true, Some(26 << 2 | 1)),
        0x69,
        "the application's ECT(1)"
    );
    let mut f = Fabric::new(1, Link::default());
    let n = node(&mut f, 1, congestion(true));
    assert!(
        f.node(n.idx).set_traffic_class(0xdead, 0).is_err(),
        "no such QP"
    );
}
