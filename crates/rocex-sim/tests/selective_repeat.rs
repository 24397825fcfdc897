//! Selective repeat between two rocex engines (`docs/wire.md`, "Selective repeat"): mixed
//! SEND, SEND with immediate, WRITE, WRITE with immediate, READ and atomics over links that
//! lose, duplicate and reorder; every message arrives once, completions come in posting
//! order, the bytes check out, and far fewer packets are resent than go-back-N resends
//! over the same seeded link. Also: what each end does when only one speaks it, and what
//! a responder does with hostile selective-repeat packets.

mod common;
mod mixed;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use mixed::{Kind, Mix};
use std::net::SocketAddr;

use rocex_proto::verbs::{Mtu, QpState, SendOp, WcStatus};
use rocex_proto::{IcrcStatus, Instant};
use rocex_sim::Link;
use rocex_wire::{
    AethRepr, BthRepr, NakCode, Opcode, PacketRepr, Psn, RethRepr, SrEthRepr, Syndrome,
};

/// SEND, SEND with immediate, WRITE, WRITE with immediate, READ, FETCH_ADD and COMPARE_SWAP
/// of up to 12 KiB: one to twelve packets at 1 KiB.
const MIX: Mix = Mix {
    kinds: &[
        Kind::SendWithImm,
        Kind::Send,
        Kind::Write,
        Kind::WriteWithImm,
        Kind::Read,
        Kind::FetchAdd,
        Kind::CompareSwap,
    ],
    len_of: |i| {
        let r = pattern(i ^ 0x51, 2);
        (usize::from(r[0]) * 48 + usize::from(r[1])) % 12_288
    },
    slot: 16384,
    slots: 128,
    targets: 32,
    recvs: 256,
    window: 64,
};

/// What one run did.
#[derive(Debug, Default)]
struct Outcome {
    retransmitted: u64,
    lost: u64,
    sr_data: u64,
    sr_acks: u64,
    virtual_time: Duration,
}

/// Sends `messages` mixed requests from a to b ([`Mix::run`] checks everything that
/// arrives) and counts the selective-repeat packets on the wire.
fn run(seed: u64, link: Link, selective: bool, messages: u64) -> Outcome {
    let mut p = mix_pair(seed, link, selective);
    let (a, b) = (p.side('a'), p.side('b'));
    let seen = Rc::new(RefCell::new((0u64, 0u64)));
    let s = seen.clone();
    p.fabric.intercept(move |from, _, bytes| {
        let (pkt, _) = PacketRepr::parse(bytes).expect("every packet parses");
        if std::env::var_os("ROCEX_TRACE").is_some() {
            eprintln!("{from} {pkt}");
        }
        let mut s = s.borrow_mut();
        if pkt.opcode() == Opcode::SR_ACKNOWLEDGE {
            s.1 += 1;
        } else if pkt.opcode().is_selective() {
            s.0 += 1;
        }
        true
    });
    MIX.run(&mut p, messages);
    let ca = p.fabric.node(a.node).counters().clone();
    let cb = p.fabric.node(b.node).counters().clone();
    let (sr_data, sr_acks) = *seen.borrow();
    Outcome {
        retransmitted: ca.retransmitted_pkts + cb.retransmitted_pkts,
        lost: p.fabric.stats.lost,
        sr_data,
        sr_acks,
        virtual_time: p.now().since(Instant::ZERO),
    }
}

/// A pair for the mixes: MTU 1024, 8 MiB on each side, selective repeat on both ends or
/// neither.
fn mix_pair(seed: u64, link: Link, selective: bool) -> Pair {
    let params = Params {
        mtu: Mtu::M1024,
        buf_len: 8 << 20,
        timeout: 10,
        selective_repeat: (selective, selective),
        ..Params::default()
    };
    Pair::new(seed, link, params)
}

fn link(loss: f64, duplicate: f64, reorder: f64) -> Link {
    Link {
        delay: Duration::from_micros(10),
        jitter: Duration::ZERO,
        loss,
        duplicate,
        reorder,
        reorder_by: Duration::from_micros(30),
        corrupt: 0.0,
    }
}

/// Both ends on, over the same link with and without selective repeat: the same messages
/// arrive, and selective repeat resends a fraction of what go-back-N does.
fn compare(loss: f64, messages: u64) -> (Outcome, Outcome) {
    let l = link(loss, 0.02, 0.02);
    let gbn = run(0x5e1ec7, l, false, messages);
    let sr = run(0x5e1ec7, l, true, messages);
    eprintln!("loss {loss}: go-back-N {gbn:?}\nselective repeat {sr:?}");
    assert_eq!(gbn.sr_data + gbn.sr_acks, 0, "off: rxe's wire only");
    assert!(
        sr.sr_data > 0 && sr.sr_acks > 0,
        "on: selective repeat on the wire"
    );
    (gbn, sr)
}

/// Selective repeat finishes sooner than go-back-N over the same link, resends under a
/// quarter of what go-back-N resends, and at most three packets for each one lost.
fn resends_about_what_was_lost(loss: f64, messages: u64) {
    let (gbn, sr) = compare(loss, messages);
    assert!(sr.virtual_time < gbn.virtual_time, "{sr:?} against {gbn:?}");
    assert!(
        sr.retransmitted * 4 < gbn.retransmitted,
        "selective repeat resent {} packets, go-back-N {}",
        sr.retransmitted,
        gbn.retransmitted
    );
    assert!(
        sr.retransmitted <= sr.lost * 3,
        "resent {} for {} lost",
        sr.retransmitted,
        sr.lost
    );
}

#[test]
fn one_percent_loss_resends_about_what_was_lost() {
    resends_about_what_was_lost(0.01, 1500);
}

#[test]
fn ten_percent_loss_resends_about_what_was_lost() {
    resends_about_what_was_lost(0.10, 1000);
}

#[test]
fn clean_link_selective_repeat_resends_nothing() {
    let sr = run(7, link(0.0, 0.0, 0.0), true, 500);
    assert_eq!(sr.retransmitted, 0, "{sr:?}");
    assert!(sr.sr_data > 0);
}

/// Only one end speaks selective repeat: the first SEND fails at once with a remote
/// invalid request error on the sender and both QPs end in ERROR (`docs/wire.md`), never a
/// hang or data placed by rules one end did not agree to.
#[test]
fn one_end_without_selective_repeat_fails_clearly() {
    for ends in [(true, false), (false, true)] {
        let params = Params {
            selective_repeat: ends,
            ..Params::default()
        };
        let mut p = Pair::new(11, link(0.0, 0.0, 0.0), params);
        let (a, b) = (p.side('a'), p.side('b'));
        assert_eq!(p.fabric.node(a.node).selective_repeat(a.qpn), ends.0);
        p.post_recv(&b, 1, 0, 4096);
        write_bytes(&a, 0, &pattern(1, 3000));
        p.post_send(&a, wr(7, SendOp::Send, vec![sge(&a, 0, 3000)]));
        let wcs = p.completions(&a, 1, Duration::from_millis(50));
        assert_eq!(wcs.len(), 1, "{ends:?}: the SEND completes");
        assert_eq!(
            (wcs[0].wr_id, wcs[0].status),
            (7, WcStatus::RemInvReqErr),
            "{ends:?}"
        );
        assert_eq!(p.qp_state(&a), QpState::Err);
        assert_eq!(p.qp_state(&b), QpState::Err);
        let recv = p.completions(&b, 1, Duration::from_millis(1));
        assert_eq!(recv[0].status, WcStatus::WrFlushErr, "nothing received");
        assert_eq!(p.fabric.node(b.node).counters().nak_invalid_request, 1);
    }
}

/// Both ends on: a READ and a WRITE between them over a clean link use rocex's opcodes,
/// and complete; READ responses keep rxe's.
#[test]
fn both_ends_on_write_and_read() {
    let params = Params {
        selective_repeat: (true, true),
        ..Params::default()
    };
    let mut p = Pair::new(12, link(0.0, 0.0, 0.0), params);
    let (a, b) = (p.side('a'), p.side('b'));
    let ops = Rc::new(RefCell::new(Vec::new()));
    let o = ops.clone();
    p.fabric.intercept(move |_, _, bytes| {
        o.borrow_mut()
            .push(PacketRepr::parse(bytes).unwrap().0.opcode());
        true
    });
    write_bytes(&a, 0, &pattern(2, 5000));
    write_bytes(&b, 8192, &pattern(3, 3000));
    p.post_send(
        &a,
        wr(1, SendOp::Write(remote(&b, 0)), vec![sge(&a, 0, 5000)]),
    );
    p.post_send(
        &a,
        wr(2, SendOp::Read(remote(&b, 8192)), vec![sge(&a, 8192, 3000)]),
    );
    let wcs = p.completions(&a, 2, Duration::from_millis(10));
    assert_ok(&wcs);
    assert_eq!(read_bytes(&b, 0, 5000), pattern(2, 5000));
    assert_eq!(read_bytes(&a, 8192, 3000), pattern(3, 3000));
    let ops = ops.borrow();
    assert!(ops.contains(&Opcode::SR_RDMA_WRITE_FIRST));
    assert!(ops.contains(&Opcode::SR_RDMA_WRITE_LAST));
    assert!(ops.contains(&Opcode::SR_RDMA_READ_REQUEST));
    assert!(!ops.contains(&Opcode::RC_RDMA_WRITE_FIRST));
    assert!(!ops.contains(&Opcode::RC_RDMA_READ_REQUEST));
}

/// What b sent: opcode, PSN, AETH syndrome.
type Answer = (Opcode, Psn, Option<Syndrome>);

/// One of b's READ responses: its PSN and payload.
type ReadResponse = (Psn, Vec<u8>);

/// A pair with selective repeat on both ends, for packets made by hand to b's QP.
struct Hostile {
    p: Pair,
    a: Side,
    b: Side,
    answers: Rc<RefCell<Vec<Answer>>>,
    read_data: Rc<RefCell<Vec<ReadResponse>>>,
}

impl Hostile {
    fn new() -> Self {
        let params = Params {
            selective_repeat: (true, true),
            ..Params::default()
        };
        let mut p = Pair::new(13, link(0.0, 0.0, 0.0), params);
        let (a, b) = (p.side('a'), p.side('b'));
        let answers = Rc::new(RefCell::new(Vec::new()));
        let read_data = Rc::new(RefCell::new(Vec::new()));
        let (got, data) = (answers.clone(), read_data.clone());
        p.fabric.intercept(move |from, _, bytes| {
            let pkt = PacketRepr::parse(bytes).unwrap().0;
            if from == 1 {
                got.borrow_mut().push((
                    pkt.opcode(),
                    pkt.bth.psn,
                    pkt.aeth.map(|a: AethRepr| a.syndrome),
                ));
                if pkt.opcode() == Opcode::RC_RDMA_READ_RESPONSE_ONLY {
                    data.borrow_mut().push((pkt.bth.psn, pkt.payload.to_vec()));
                }
            }
            true
        });
        Self {
            p,
            a,
            b,
            answers,
            read_data,
        }
    }

    /// b's expected PSN plus `ahead`.
    fn psn(&mut self, ahead: u32) -> Psn {
        let st = self
            .p
            .fabric
            .node(self.b.node)
            .qp_status(self.b.qpn)
            .unwrap();
        Psn::new(st.rq_psn).add(ahead)
    }

    /// Delivers an SR WRITE packet to b as if from a.
    fn write(&mut self, op: Opcode, psn: Psn, reth: RethRepr, offset: u32, payload: &[u8]) {
        self.deliver(op, psn, reth, SrEthRepr { msg: 0, offset }, payload);
    }

    /// Delivers an SR READ request to b as if from a, saying its run of READs starts at
    /// `run`.
    fn read(&mut self, psn: Psn, run: Psn, reth: RethRepr) {
        self.read_from(psn, run, reth, 0);
    }

    /// [`read`](Self::read) for a range asked again, `offset` bytes into its READ.
    fn read_from(&mut self, psn: Psn, run: Psn, reth: RethRepr, offset: u32) {
        let sreth = SrEthRepr {
            msg: run.value(),
            offset,
        };
        self.deliver(Opcode::SR_RDMA_READ_REQUEST, psn, reth, sreth, &[]);
    }

    fn deliver(&mut self, op: Opcode, psn: Psn, reth: RethRepr, sreth: SrEthRepr, data: &[u8]) {
        let mut bth = BthRepr::new(op, self.b.qpn, psn);
        bth.ack_req = true;
        bth.pad = rocex_wire::packet::pad_for(data.len());
        let mut pkt = PacketRepr::new(bth);
        pkt.reth = Some(reth);
        pkt.sreth = Some(sreth);
        pkt.payload = data;
        let mut buf = vec![0; pkt.buffer_len()];
        pkt.emit(&mut buf).unwrap();
        let now = self.p.now();
        let src = SocketAddr::new(self.a.addr, 49152);
        self.p.fabric.node(self.b.node).handle_packet(
            now,
            src,
            self.b.addr,
            &buf,
            IcrcStatus::Valid,
        );
        self.p.settle(Duration::from_micros(100));
    }

    fn reth(&self, rkey_off: u32, len: u32) -> RethRepr {
        RethRepr {
            va: self.b.base,
            rkey: self.b.keys.rkey ^ rkey_off,
            dma_len: len,
        }
    }
}

/// Hostile selective-repeat packets: a bad rkey, an offset that is not where a packet of
/// the message can start, a PSN past the window. Each gets the NAK the in-order responder
/// gives, is counted, and nothing is placed; a refusal past a hole waits for the hole.
#[test]
fn hostile_packets_get_naks() {
    let page = vec![0xee; 1024];
    // Bad rkey at the expected PSN: remote access error, QP to ERROR.
    let mut h = Hostile::new();
    let psn = h.psn(0);
    let reth = h.reth(0x55, 4096);
    h.write(Opcode::SR_RDMA_WRITE_MIDDLE, psn, reth, 1024, &page);
    assert_eq!(
        h.answers.borrow().last().copied(),
        Some((
            Opcode::RC_ACKNOWLEDGE,
            psn,
            Some(Syndrome::Nak(NakCode::RemoteAccessError))
        ))
    );
    assert_eq!(h.p.fabric.node(h.b.node).counters().nak_remote_access, 1);
    assert_eq!(h.p.qp_state(&h.b), QpState::Err);
    assert_eq!(
        read_bytes(&h.b, 1024, 1024),
        vec![0; 1024],
        "nothing placed"
    );

    // An offset inside a packet, past a hole: held until the hole fills, then refused
    // (invalid request) with its own PSN, so that the NAK acknowledges what came before.
    let mut h = Hostile::new();
    let psn = h.psn(0);
    let reth = h.reth(0, 4096);
    h.write(Opcode::SR_RDMA_WRITE_MIDDLE, psn.add(1), reth, 1000, &page);
    assert!(
        !h.answers
            .borrow()
            .iter()
            .any(|a| matches!(a.2, Some(Syndrome::Nak(_)))),
        "no NAK before the hole fills: {:?}",
        h.answers.borrow()
    );
    assert_eq!(h.p.qp_state(&h.b), QpState::Rts);
    h.write(Opcode::SR_RDMA_WRITE_FIRST, psn, reth, 0, &page);
    assert_eq!(
        h.answers.borrow().last().copied(),
        Some((
            Opcode::RC_ACKNOWLEDGE,
            psn.add(1),
            Some(Syndrome::Nak(NakCode::InvalidRequest))
        ))
    );
    assert_eq!(h.p.fabric.node(h.b.node).counters().nak_invalid_request, 1);
    assert_eq!(h.p.qp_state(&h.b), QpState::Err);

    // Past the window: one PSN sequence NAK naming the expected PSN, the QP lives on.
    let mut h = Hostile::new();
    let psn = h.psn(0);
    let reth = h.reth(0, 1024);
    h.write(Opcode::SR_RDMA_WRITE_ONLY, psn.add(1000), reth, 0, &page);
    h.write(Opcode::SR_RDMA_WRITE_ONLY, psn.add(2000), reth, 0, &page);
    let naks: Vec<_> = h.answers.borrow().clone();
    assert_eq!(
        naks,
        [(
            Opcode::RC_ACKNOWLEDGE,
            psn,
            Some(Syndrome::Nak(NakCode::PsnSequenceError))
        )]
    );
    let c = h.p.fabric.node(h.b.node).counters().clone();
    assert_eq!((c.nak_psn_sequence, c.out_of_seq_request), (1, 2));
    assert_eq!(h.p.qp_state(&h.b), QpState::Rts);
    // The QP still works: a's WRITE goes through.
    write_bytes(&h.a, 0, &pattern(5, 2000));
    let (a, b) = (h.a.clone(), h.b.clone());
    h.p.post_send(
        &a,
        wr(1, SendOp::Write(remote(&b, 8192)), vec![sge(&a, 0, 2000)]),
    );
    assert_ok(&h.p.completions(&a, 1, Duration::from_millis(10)));
    assert_eq!(read_bytes(&b, 8192, 2000), pattern(5, 2000));
}

/// A READ past a hole that holds only READs (its run of READs starts at or before the
/// expected PSN) is answered at once, with the responder's bytes and a SACK that shows it
/// held; the READ that fills the hole is answered then, and the expected PSN passes both.
#[test]
fn a_read_past_a_hole_of_reads_is_answered_at_once() {
    let mut h = Hostile::new();
    let e = h.psn(0);
    write_bytes(&h.b, 0, &pattern(7, 1024));
    let reth = h.reth(0, 1024);
    h.read(e.add(1), e, reth);
    assert_eq!(*h.read_data.borrow(), [(e.add(1), pattern(7, 1024))]);
    assert!(
        h.answers
            .borrow()
            .contains(&(Opcode::SR_ACKNOWLEDGE, e.sub(1), Some(Syndrome::ACK))),
        "{:?}",
        h.answers.borrow()
    );
    assert_eq!(h.p.fabric.node(h.b.node).counters().sr_reads_early, 1);
    assert_eq!(h.psn(0), e, "the hole is still open");
    // Asked again while the hole is open: answered again from the saved READ.
    h.read(e.add(1), e, reth);
    assert_eq!(h.read_data.borrow().len(), 2);
    h.read(e, e, reth);
    assert_eq!(h.read_data.borrow().last(), Some(&(e, pattern(7, 1024))));
    assert_eq!(h.psn(0), e.add(2), "the expected PSN passed both READs");
    assert_eq!(h.p.fabric.node(h.b.node).counters().sr_reads_early, 1);
    assert_eq!(h.p.qp_state(&h.b), QpState::Rts);
}

/// A READ past a hole that may hold a WRITE (its run starts at itself) waits for the hole,
/// so that it reads what the WRITE in it wrote, as in order; so does a READ whose run is
/// said to start past the expected PSN.
#[test]
fn a_read_past_a_hole_that_may_hold_a_write_waits_for_it() {
    for run in [1, 0x7f_0000] {
        let mut h = Hostile::new();
        let e = h.psn(0);
        write_bytes(&h.b, 0, &[0x11; 1024]);
        let reth = h.reth(0, 1024);
        h.read(e.add(1), e.add(run), reth);
        assert!(h.read_data.borrow().is_empty(), "{:?}", h.answers.borrow());
        h.write(Opcode::SR_RDMA_WRITE_ONLY, e, reth, 0, &[0x22; 1024]);
        assert_eq!(*h.read_data.borrow(), [(e.add(1), vec![0x22; 1024])]);
        assert_eq!(h.p.fabric.node(h.b.node).counters().sr_reads_early, 0);
        assert_eq!(h.psn(0), e.add(2));
    }
}

/// A range asked again of a READ the responder has not seen (its first request lost: a
/// tail-loss probe asks for the last packet alone) waits for the hole though the hole
/// holds only READs: answered as a READ of its own, its one response would be an ONLY
/// where the requester's READ expects a LAST, and the READ would fail with a bad response.
/// When the READ comes, it is answered whole, in order.
#[test]
fn a_range_asked_again_of_a_read_not_seen_waits_for_the_hole() {
    let mut h = Hostile::new();
    let e = h.psn(0);
    write_bytes(&h.b, 0, &pattern(8, 2048));
    // The READ of 2 KiB at e + 1 (two packets) was lost; its last packet is asked for.
    let last = RethRepr {
        va: h.b.base + 1024,
        ..h.reth(0, 1024)
    };
    h.read_from(e.add(2), e, last, 1024);
    assert!(h.read_data.borrow().is_empty(), "{:?}", h.answers.borrow());
    assert_eq!(h.p.fabric.node(h.b.node).counters().sr_reads_early, 0);
    h.read(e, e, h.reth(0, 1024));
    h.read(e.add(1), e, h.reth(0, 2048));
    let opcodes: Vec<_> = h
        .answers
        .borrow()
        .iter()
        .filter(|a| a.1 == e.add(1) || a.1 == e.add(2))
        .map(|a| a.0)
        .collect();
    assert_eq!(
        opcodes,
        [
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            Opcode::RC_RDMA_READ_RESPONSE_LAST
        ]
    );
    assert_eq!(h.psn(0), e.add(3));
}

/// READ streams alone over links that lose, duplicate and reorder, many seeds: every READ
/// completes, in order, with the responder's bytes ([`Mix::run`] checks each). A READ
/// answered past its hole must be one the requester sent from its start; found here, by a
/// tail-loss probe's range answered as a READ of its own (a bad response error).
#[test]
fn read_streams_through_loss_duplication_and_reordering_complete() {
    const READS: Mix = Mix {
        kinds: &[Kind::Read],
        len_of: |i| if i % 7 == 3 { 5000 } else { 16384 },
        slot: 16384,
        slots: 128,
        targets: 32,
        recvs: 0,
        window: 128,
    };
    for seed in 0..16 {
        for (loss, dup, reorder) in [(0.01, 0.0, 0.0), (0.05, 0.02, 0.05), (0.1, 0.02, 0.05)] {
            let mut p = mix_pair(seed, link(loss, dup, reorder), true);
            READS.run(&mut p, 200);
        }
    }
}

/// A READ from an end with selective repeat to one without fails at once with a remote
/// invalid request error, as a SEND does: the end without it does not know the READ's
/// form. The other way the READ is rxe's, and works.
#[test]
fn a_read_to_an_end_without_selective_repeat_fails_clearly() {
    for (ends, status) in [
        ((true, false), WcStatus::RemInvReqErr),
        ((false, true), WcStatus::Success),
    ] {
        let params = Params {
            selective_repeat: ends,
            ..Params::default()
        };
        let mut p = Pair::new(14, link(0.0, 0.0, 0.0), params);
        let (a, b) = (p.side('a'), p.side('b'));
        write_bytes(&b, 0, &pattern(4, 3000));
        p.post_send(
            &a,
            wr(3, SendOp::Read(remote(&b, 0)), vec![sge(&a, 0, 3000)]),
        );
        let wcs = p.completions(&a, 1, Duration::from_millis(50));
        assert_eq!((wcs.len(), wcs[0].status), (1, status), "{ends:?}");
    }
}
