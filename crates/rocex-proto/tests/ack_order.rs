//! The order of a QP's ACKs and requests: with `requests_before_acks`, a request waiting
//! with a bare ACK goes first (the peer acts on it), the ACK follows at once, never later
//! than one request packet; and ACKs queued back to back coalesce into the last, which
//! covers their PSNs.

use std::net::SocketAddr;

use rocex_proto::verbs::{Mtu, QpAttr, QpCap, Remote, SendOp, SendWr, Sge, WcStatus};
use rocex_proto::{Config, IcrcStatus, Instant, Region};
use rocex_wire::{Opcode, PacketRepr, Syndrome};

mod common;
use common::{Node, Spec, rc_attr};

const LEN: usize = 4096;

fn node(i: u8) -> Node {
    let cap = QpCap {
        max_send_wr: 16,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let spec = Spec {
        cap,
        len: LEN,
        ..Spec::default()
    };
    let mut n = Node::new(Config::new([198, 18, 209, i].into(), [i; 32]), spec);
    n.e.requests_before_acks(true);
    n.mem.write(0, &[i; 8]);
    n
}

/// `x`'s QP to RTS against `peer`'s, both starting at PSN 100.
fn connect(x: &mut Node, peer: &Node) {
    let to_rts = QpAttr {
        rq_psn: 100,
        sq_psn: 100,
        ..rc_attr(peer.addr, peer.qpn, Mtu::M1024)
    };
    x.bring_up(x.qpn, &to_rts);
}

fn pair() -> (Node, Node) {
    let (mut a, mut b) = (node(1), node(2));
    connect(&mut a, &b);
    connect(&mut b, &a);
    (a, b)
}

/// A pair in which A's WRITE 1 has reached B, which has sent nothing yet.
fn pair_with_a_write_at_b() -> (Node, Node) {
    let (mut a, mut b) = pair();
    write(&mut a, &b, 1);
    let req = drain(&mut a);
    deliver(&a, &mut b, &req);
    (a, b)
}

/// Posts an 8-byte WRITE from `x` to `peer`'s region.
fn write(x: &mut Node, peer: &Node, wr_id: u64) {
    let sge = Sge {
        addr: 0,
        length: 8,
        lkey: x.keys.lkey,
    };
    let remote = Remote {
        addr: 8,
        rkey: peer.keys.rkey,
    };
    let wr = SendWr::new(wr_id, SendOp::Write(remote), vec![sge]);
    x.e.post_send(Instant::ZERO, x.qpn, wr).unwrap();
}

/// Everything `from` has to send, in order.
fn drain(from: &mut Node) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 1024 + 80];
    let mut out = Vec::new();
    while let Some(t) = from.e.poll_transmit(Instant::ZERO, &mut buf) {
        out.push(buf[..t.len].to_vec());
    }
    out
}

fn deliver(from: &Node, to: &mut Node, packets: &[Vec<u8>]) {
    let src = SocketAddr::new(from.addr, 4791);
    for p in packets {
        to.e.handle_packet(Instant::ZERO, src, to.addr, p, IcrcStatus::Valid);
    }
}

/// Opcode and PSN of each packet, and whether it is a positive ACK.
fn describe(packets: &[Vec<u8>]) -> Vec<(Opcode, u32, bool)> {
    packets
        .iter()
        .map(|p| {
            let (pkt, _) = PacketRepr::parse(p).unwrap();
            let ack = pkt
                .aeth
                .is_some_and(|a| matches!(a.syndrome, Syndrome::Ack { .. }));
            (pkt.bth.opcode, pkt.bth.psn.value(), ack)
        })
        .collect()
}

#[test]
fn a_reply_write_goes_before_the_ack_it_waited_with() {
    let (mut a, mut b) = pair_with_a_write_at_b();
    // B answers before it transmits: its WRITE, then the ACK for A's.
    write(&mut b, &a, 2);
    let out = drain(&mut b);
    assert_eq!(
        describe(&out),
        [
            (Opcode::RC_RDMA_WRITE_ONLY, 100, false),
            (Opcode::RC_ACKNOWLEDGE, 100, true),
        ]
    );
    deliver(&b, &mut a, &out);
    let wc = a.e.poll_cq(a.cq).expect("A's WRITE completes on B's ACK");
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success));
}

#[test]
fn an_ack_waits_for_one_request_packet_at_most() {
    let (a, mut b) = pair_with_a_write_at_b();
    for id in 0..3 {
        write(&mut b, &a, 10 + id);
    }
    let order: Vec<_> = describe(&drain(&mut b))
        .into_iter()
        .map(|(op, psn, _)| (op, psn))
        .collect();
    assert_eq!(
        order,
        [
            (Opcode::RC_RDMA_WRITE_ONLY, 100),
            (Opcode::RC_ACKNOWLEDGE, 100),
            (Opcode::RC_RDMA_WRITE_ONLY, 101),
            (Opcode::RC_RDMA_WRITE_ONLY, 102),
        ]
    );
}

#[test]
fn by_default_the_ack_goes_before_the_reply() {
    let (mut a, mut b) = pair();
    b.e.requests_before_acks(false);
    write(&mut a, &b, 1);
    let req = drain(&mut a);
    deliver(&a, &mut b, &req);
    write(&mut b, &a, 2);
    let order: Vec<_> = describe(&drain(&mut b)).into_iter().map(|d| d.0).collect();
    assert_eq!(order, [Opcode::RC_ACKNOWLEDGE, Opcode::RC_RDMA_WRITE_ONLY]);
}

#[test]
fn an_ack_alone_goes_at_once() {
    let (_, mut b) = pair_with_a_write_at_b();
    assert_eq!(
        describe(&drain(&mut b)),
        [(Opcode::RC_ACKNOWLEDGE, 100, true)]
    );
}

#[test]
fn acks_queued_back_to_back_coalesce_into_one_that_covers_all() {
    let (mut a, mut b) = pair();
    for id in 1..=3 {
        write(&mut a, &b, id);
    }
    let req = drain(&mut a);
    assert_eq!(req.len(), 3);
    deliver(&a, &mut b, &req);
    let acks = drain(&mut b);
    assert_eq!(
        describe(&acks),
        [(Opcode::RC_ACKNOWLEDGE, 102, true)],
        "one ACK, for the last PSN"
    );
    deliver(&b, &mut a, &acks);
    let done: Vec<_> = std::iter::from_fn(|| a.e.poll_cq(a.cq))
        .map(|wc| (wc.wr_id, wc.status))
        .collect();
    assert_eq!(
        done,
        [
            (1, WcStatus::Success),
            (2, WcStatus::Success),
            (3, WcStatus::Success)
        ]
    );
    assert!(drain(&mut a).is_empty(), "nothing to resend");
}

#[test]
fn by_default_every_ack_goes_as_rxe_sends_them() {
    let (mut a, mut b) = pair();
    b.e.requests_before_acks(false);
    for id in 1..=3 {
        write(&mut a, &b, id);
    }
    let req = drain(&mut a);
    deliver(&a, &mut b, &req);
    assert_eq!(
        describe(&drain(&mut b)),
        [
            (Opcode::RC_ACKNOWLEDGE, 100, true),
            (Opcode::RC_ACKNOWLEDGE, 101, true),
            (Opcode::RC_ACKNOWLEDGE, 102, true)
        ]
    );
}
