//! Thousands of RC QPs active at once (performance goal 5's scale): every QP's WRITE is
//! sent in turn, lands where it was aimed and completes exactly once, with all QPs queued
//! to send at the same time.

use std::collections::HashSet;

use rocex_proto::verbs::{Mtu, QpCap, Remote, SendOp, SendWr, Sge, WcStatus};
use rocex_proto::{Config, Instant, Region};

mod common;
use common::{Node, Spec, rc_attr, rc_qp};

const QPS: usize = 4096;
/// Two packets per WRITE at MTU 4096, so that every QP needs more than one turn.
const SIZE: u32 = 8192;

/// A node with `QPS` RC QPs, each with a slot of `SIZE` bytes in the buffer; returns the
/// node and its QPNs.
fn node(i: u8) -> (Node, Vec<u32>) {
    let config = Config {
        port_mtu: Mtu::M4096,
        ..Config::new([198, 18, 208, i].into(), [i; 32])
    };
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let spec = Spec {
        cqes: QPS,
        cap,
        len: QPS * SIZE as usize,
        ..Spec::default()
    };
    let mut n = Node::new(config, spec);
    let more = (1..QPS).map(|_| rc_qp(&mut n.e, n.pd, n.cq, cap));
    let qpns = std::iter::once(n.qpn).chain(more).collect();
    (n, qpns)
}

#[test]
fn every_one_of_4096_qps_writes_once() {
    let ((mut a, qa), (mut b, qb)) = (node(1), node(2));
    for (&x, &y) in qa.iter().zip(&qb) {
        a.bring_up(x, &rc_attr(b.addr, y, Mtu::M4096));
        b.bring_up(y, &rc_attr(a.addr, x, Mtu::M4096));
    }
    // QP k writes SIZE bytes of value k (mod 251) from its slot to the same slot of B.
    for (k, &qpn) in qa.iter().enumerate() {
        let off = k as u64 * u64::from(SIZE);
        a.mem.write(off, &vec![(k % 251) as u8 + 1; SIZE as usize]);
        let sge = Sge {
            addr: off,
            length: SIZE,
            lkey: a.keys.lkey,
        };
        let remote = Remote {
            addr: off,
            rkey: b.keys.rkey,
        };
        let wr = SendWr::new(k as u64, SendOp::Write(remote), vec![sge]);
        a.e.post_send(Instant::ZERO, qpn, wr).unwrap();
    }
    let mut buf = vec![0u8; 4096 + 80];
    let mut requests = 0;
    loop {
        let sent = a.pump(&mut b, &mut buf);
        let acks = b.pump(&mut a, &mut buf);
        requests += sent;
        if sent + acks == 0 {
            break;
        }
    }
    assert_eq!(
        requests,
        QPS * 2,
        "two request packets per WRITE, none resent"
    );
    let mut done = HashSet::new();
    while let Some(wc) = a.e.poll_cq(a.cq) {
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.qp_num, qa[wc.wr_id as usize]);
        assert!(done.insert(wc.wr_id), "WRITE {} completed twice", wc.wr_id);
    }
    assert_eq!(done.len(), QPS);
    let mut got = vec![0u8; SIZE as usize];
    for k in 0..QPS {
        b.mem.read(k as u64 * u64::from(SIZE), &mut got);
        assert!(
            got.iter().all(|&x| x == (k % 251) as u8 + 1),
            "QP {k}'s data"
        );
    }
    assert_eq!(b.e.poll_cq(b.cq), None);
}

/// An engine that shares its address with others makes every QP number in its slot, so the
/// kernel's steering program delivers the QP's packets to it; the numbers stay distinct and
/// above the special QPs.
#[test]
fn qp_numbers_stay_in_the_engines_slot() {
    let slot = rocex_proto::QpnSlot { bits: 5, slot: 17 };
    let config = Config {
        qpn_slot: Some(slot),
        ..Config::new([198, 18, 208, 9].into(), [9; 32])
    };
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let mut n = Node::new(
        config,
        Spec {
            cap,
            ..Spec::default()
        },
    );
    let qpns: HashSet<u32> = (0..2000)
        .map(|_| rc_qp(&mut n.e, n.pd, n.cq, cap))
        .chain([n.qpn])
        .collect();
    assert_eq!(qpns.len(), 2001);
    assert!(
        qpns.iter()
            .all(|&q| q & 31 == 17 && (16..=0xff_ffff).contains(&q)),
        "{qpns:?}"
    );
}
