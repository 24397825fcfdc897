//! A QP's own counters of retransmissions, RNR and sequence NAKs and duplicate requests
//! (`QpStatus::counters`): a scripted loss or a missing receive makes exactly the events
//! the protocol prescribes, each counted on the QP it happened to, and the device's counters
//! of the same names agree.

mod common;

use std::time::Duration;

use common::*;
use rocex_proto::QpCounters;
use rocex_proto::verbs::{SendOp, WcStatus};
use rocex_sim::Link;
use rocex_wire::PacketRepr;

/// One side's QP counters, after checking that its device counted the same.
fn counters(p: &mut Pair, s: &Side) -> QpCounters {
    let engine = p.fabric.node(s.node);
    let qp = engine.qp_status(s.qpn).unwrap().counters;
    let device = engine.counters().clone();
    for (name, value) in qp.iter() {
        let total = device.iter().find(|&(n, _)| n == name).unwrap().1;
        assert_eq!(total, value, "{name}: the device's, one QP");
    }
    qp
}

/// Drops the first packet node `from` sends for which `pick` holds; the others pass.
fn drop_once(p: &mut Pair, from: usize, pick: impl Fn(&PacketRepr<'_>) -> bool + 'static) {
    let mut dropped = false;
    p.fabric.intercept(move |node, _, bytes| {
        if dropped || node != from {
            return true;
        }
        let (pkt, _) = PacketRepr::parse(bytes).unwrap();
        dropped = pick(&pkt);
        !dropped
    });
}

#[test]
fn a_lost_first_packet_is_one_sequence_nak_and_three_packets_sent_again() {
    let params = Params::default();
    let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(10)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    // The SEND's first of three packets (MTU 1024) is lost: b NAKs the second as out of
    // sequence, drops the third silently (one NAK per gap), and a goes back to the first.
    drop_once(&mut p, a.node, move |pkt| {
        pkt.bth.psn.value() == params.psn_a
    });
    write_bytes(&a, 0, &pattern(3, 3000));
    p.post_recv(&b, 7, 0, 4096);
    p.post(&a, 1, SendOp::Send, 0, 3000);
    assert_ok(&p.completions(&a, 1, Duration::from_secs(1)));
    assert_ok(&p.completions(&b, 1, Duration::from_secs(1)));
    assert_eq!(read_bytes(&b, 0, 3000), pattern(3, 3000));
    p.settle(Duration::from_secs(1));

    let want_a = QpCounters {
        retransmitted_pkts: 3,
        rcvd_seq_err: 1,
        ..QpCounters::default()
    };
    let want_b = QpCounters {
        nak_psn_sequence: 1,
        ..QpCounters::default()
    };
    assert_eq!(counters(&mut p, &a), want_a);
    assert_eq!(counters(&mut p, &b), want_b);
}

#[test]
fn a_lost_ack_is_one_timeout_resend_and_one_duplicate_request() {
    // ACK timeout 4.096 us * 2^10 = 4.2 ms, against a 20 us round trip.
    let params = Params {
        timeout: 10,
        ..Params::default()
    };
    let mut p = Pair::new(2, Link::with_delay(Duration::from_micros(10)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    drop_once(&mut p, b.node, |pkt| pkt.aeth.is_some());
    p.post_recv(&b, 7, 0, 64);
    p.post(&a, 1, SendOp::Send, 0, 64);
    assert_ok(&p.completions(&a, 1, Duration::from_secs(1)));
    p.settle(Duration::from_secs(1));

    let want_a = QpCounters {
        retransmitted_pkts: 1,
        ..QpCounters::default()
    };
    let want_b = QpCounters {
        duplicate_request: 1,
        ..QpCounters::default()
    };
    assert_eq!(counters(&mut p, &a), want_a);
    assert_eq!(counters(&mut p, &b), want_b);
}

#[test]
fn no_receive_is_an_rnr_nak_per_try_until_the_rnr_retries_run_out() {
    // Two RNR retries: the first try and two more, each answered by an RNR NAK; the third
    // NAK finds no retry left and ends the request (as rxe's completer counts `rnr_retry`).
    let params = Params {
        rnr_retry: 2,
        ..Params::default()
    };
    let mut p = Pair::new(3, Link::with_delay(Duration::from_micros(10)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    p.post(&a, 1, SendOp::Send, 0, 64);
    let wcs = p.completions(&a, 1, Duration::from_secs(1));
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::RnrRetryExcErr, "{wcs:?}");
    p.settle(Duration::from_secs(1));

    let want_a = QpCounters {
        rcvd_rnr_err: 3,
        retransmitted_pkts: 2,
        ..QpCounters::default()
    };
    let want_b = QpCounters {
        send_rnr_err: 3,
        ..QpCounters::default()
    };
    assert_eq!(counters(&mut p, &a), want_a);
    assert_eq!(counters(&mut p, &b), want_b);
}
