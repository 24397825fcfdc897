//! Go-back-N recovered sooner than rxe recovers, with the packets rxe would send: a READ
//! restarted at once from its first missing response, and a retransmit timer a measured
//! round trip long instead of the QP's whole ACK timeout (67 ms at timeout 14). Each case
//! runs both ways (`Config::rxe_recovery` on and off) over the same link with the same
//! packets dropped, and checks the data, the completions and the exact virtual times and
//! packet counts.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use rocex_proto::verbs::{SendOp, WcStatus};
use rocex_sim::Link;
use rocex_wire::{Opcode, PacketRepr};

/// 10 us each way, nothing lost but what a test drops.
fn link() -> Link {
    Link::with_delay(Duration::from_micros(10))
}

fn pair(rxe_recovery: bool) -> Pair {
    Pair::new(
        1,
        link(),
        Params {
            rxe_recovery,
            ..Params::default()
        },
    )
}

/// Drops the `nth` (from 1) packet from node `from` with opcode `op`, once.
fn drop_nth(p: &mut Pair, from: usize, op: Opcode, nth: u32) {
    let seen = Rc::new(Cell::new(0));
    p.fabric.intercept(move |f, _to, bytes| {
        let (pkt, _) = PacketRepr::parse(bytes).expect("engines send valid packets");
        if f == from && pkt.opcode() == op {
            seen.set(seen.get() + 1);
            return seen.get() != nth;
        }
        true
    });
}

/// What one recovery cost: virtual time from post to completion, packets sent, packets
/// resent and retries counted.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    micros: u64,
    sent: u64,
    resent: u64,
    retries: u64,
}

/// Posts `op` as WR `id` on a's first `len` bytes and checks that it alone completes,
/// successfully; returns what it cost, counted by a.
fn cost(p: &mut Pair, id: u64, op: SendOp, len: usize) -> Outcome {
    let a = p.side('a');
    let (sent0, t0) = (p.fabric.stats.sent, p.now());
    p.post(&a, id, op, 0, len as u32);
    let wcs = p.completions(&a, 1, Duration::from_secs(1));
    assert_eq!(
        (wcs.len(), wcs[0].wr_id, wcs[0].status),
        (1, id, WcStatus::Success)
    );
    let (micros, sent) = (
        (p.now() - t0).as_micros() as u64,
        p.fabric.stats.sent - sent0,
    );
    let c = p.fabric.node(a.node).counters();
    Outcome {
        micros,
        sent,
        resent: c.retransmitted_pkts,
        retries: c.completer_retry_err,
    }
}

/// Posts one WRITE of `len` bytes from a to b after a first WRITE has timed a round
/// trip; its LAST packet is dropped. Returns what the second cost.
fn write_with_last_lost(rxe_recovery: bool) -> Outcome {
    let mut p = pair(rxe_recovery);
    let (a, b) = (p.side('a'), p.side('b'));
    let len = 8 * 1024;
    drop_nth(&mut p, a.node, Opcode::RC_RDMA_WRITE_LAST, 2);
    let [_, second] = [(0u64, 11u64), (1, 12)].map(|(i, seed)| {
        let data = pattern(seed, len);
        write_bytes(&a, 0, &data);
        let got = cost(&mut p, i, SendOp::Write(remote(&b, 0)), len);
        assert_eq!(read_bytes(&b, 0, len), data, "WRITE {i} placed");
        got
    });
    second
}

#[test]
fn a_lost_last_packet_is_resent_after_a_round_trip_not_the_ack_timeout() {
    // rxe: the ACK timeout (4.096 us * 2^14 = 67.1 ms) from the first packet, then the
    // whole message again from its first packet, one retry counted. The responder answers
    // the 7 duplicates with ACKs (rxe `duplicate_request`) and the LAST with one.
    let rxe = write_with_last_lost(true);
    let fast = write_with_last_lost(false);
    assert_eq!(
        rxe,
        Outcome {
            micros: 67_128,
            sent: 8 + 8 + 7 + 1,
            resent: 8,
            retries: 1,
        }
    );
    // rocex: the first WRITE timed a 20 us round trip, so the early deadline is the 100 us
    // floor after the last packet, and the round trip of the resent LAST makes 120 us;
    // the same packets go again, no retry counted.
    assert_eq!(
        fast,
        Outcome {
            micros: 120,
            sent: 8 + 8 + 7 + 1,
            resent: 8,
            retries: 0,
        }
    );
}

/// One READ of `len` bytes from b with its `nth` response MIDDLE dropped.
fn read_with_middle_lost(rxe_recovery: bool) -> Outcome {
    let mut p = pair(rxe_recovery);
    let (a, b) = (p.side('a'), p.side('b'));
    let len = 16 * 1024;
    let data = pattern(21, len);
    write_bytes(&b, 4096, &data);
    drop_nth(&mut p, b.node, Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 5);
    let mut got = cost(&mut p, 7, SendOp::Read(remote(&b, 4096)), len);
    assert_eq!(read_bytes(&a, 0, len), data, "READ data");
    got.resent += p.fabric.node(b.node).counters().retransmitted_pkts;
    got
}

#[test]
fn a_read_response_gap_restarts_the_read_at_once() {
    // 16 responses; the 6th (PSN +5) is lost. rxe drops the 10 after it and waits for the
    // ACK timeout from the last response (20 us + 67.1 ms), then asks for PSN +5 on: 11
    // responses again, one round trip more.
    let rxe = read_with_middle_lost(true);
    let fast = read_with_middle_lost(false);
    assert_eq!(
        rxe,
        Outcome {
            micros: 67_148,
            sent: 1 + 16 + 1 + 11,
            resent: 1,
            retries: 1,
        }
    );
    // rocex asks for PSN +5 on as soon as PSN +6 arrives (20 us): the same second READ
    // and the same 11 responses, one round trip after the gap.
    assert_eq!(
        fast,
        Outcome {
            micros: 40,
            sent: 1 + 16 + 1 + 11,
            resent: 1,
            retries: 1,
        }
    );
}

/// A WRITE of 8 packets whose third is lost and whose sequence NAK is lost too.
fn write_with_nak_lost(rxe_recovery: bool) -> Outcome {
    let mut p = pair(rxe_recovery);
    let (a, b) = (p.side('a'), p.side('b'));
    let len = 8 * 1024;
    // A first WRITE times the round trip.
    p.post(&a, 0, SendOp::Write(remote(&b, 0)), 0, 1024);
    assert_eq!(p.completions(&a, 1, Duration::from_secs(1)).len(), 1);
    let (an, bn) = (a.node, b.node);
    let middles = Rc::new(Cell::new(0));
    p.fabric.intercept(move |f, _to, bytes| {
        let (pkt, _) = PacketRepr::parse(bytes).expect("engines send valid packets");
        if f == an && pkt.opcode() == Opcode::RC_RDMA_WRITE_MIDDLE {
            middles.set(middles.get() + 1);
            return middles.get() != 2;
        }
        // Every NAK is lost.
        !(f == bn
            && pkt
                .aeth
                .is_some_and(|x| x.syndrome.to_byte() & 0xe0 == 0x60))
    });
    let data = pattern(31, len);
    write_bytes(&a, 0, &data);
    let got = cost(&mut p, 1, SendOp::Write(remote(&b, 0)), len);
    assert_eq!(read_bytes(&b, 0, len), data);
    got
}

#[test]
fn a_lost_sequence_nak_costs_a_round_trip_not_the_ack_timeout() {
    // The responder NAKs the gap once, and the NAK is lost; it then drops the rest
    // silently (rxe `check_psn`), so no ACK came and both resend all 8 packets: the
    // answers are the NAK, ACKs of the duplicates of PSN +0 and +1, and the last ACK.
    let rxe = write_with_nak_lost(true);
    let fast = write_with_nak_lost(false);
    assert_eq!(
        rxe,
        Outcome {
            micros: 67_128,
            sent: 8 + 8 + 4,
            resent: 8,
            retries: 1,
        }
    );
    assert_eq!(
        fast,
        Outcome {
            micros: 120,
            sent: 8 + 8 + 4,
            resent: 8,
            retries: 0,
        }
    );
}

/// Streams `n` messages of `len` bytes (READs from b, or WRITEs to b), `depth` in flight,
/// over a link losing `loss` of packets both ways; checks every completion in order and
/// every byte, and returns the virtual time the stream took and the packets resent.
fn stream(rxe_recovery: bool, read: bool, len: usize, n: u64, loss: f64) -> (u64, u64) {
    let link = Link { loss, ..link() };
    let mut p = Pair::new(
        3,
        link,
        Params {
            rxe_recovery,
            buf_len: 8 << 20,
            ..Params::default()
        },
    );
    let (a, b) = (p.side('a'), p.side('b'));
    let depth = 8u64;
    let slot = |i: u64| (i % 16) * len as u64;
    let src = |i: u64| pattern(i, len);
    let (from, to) = if read { (&b, &a) } else { (&a, &b) };
    let post = |p: &mut Pair, i: u64| {
        write_bytes(from, slot(i), &src(i));
        let op = if read {
            SendOp::Read(remote(&b, slot(i)))
        } else {
            SendOp::Write(remote(&b, 4 << 20 | slot(i)))
        };
        let local = if read { 4 << 20 | slot(i) } else { slot(i) };
        p.post(&a, i, op, local, len as u32);
    };
    let t0 = p.now();
    let mut posted = 0;
    for _ in 0..depth {
        post(&mut p, posted);
        posted += 1;
    }
    let mut wcs = std::collections::VecDeque::new();
    for i in 0..n {
        if wcs.is_empty() {
            wcs.extend(p.completions(&a, 1, Duration::from_secs(10)));
        }
        let wc = wcs.pop_front().expect("a completion within 10 s");
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
        assert_eq!(
            read_bytes(to, 4 << 20 | slot(i), len),
            src(i),
            "message {i}'s bytes"
        );
        if posted < n {
            post(&mut p, posted);
            posted += 1;
        }
    }
    let resent = p.fabric.node(a.node).counters().retransmitted_pkts;
    ((p.now() - t0).as_micros() as u64, resent)
}

#[test]
fn streams_under_random_loss_finish_sooner_with_the_same_data() {
    // 16 KiB READs and 64 KiB WRITEs, 8 in flight, 1% and 5% of packets lost both ways;
    // (virtual microseconds, packets resent by the requester) rxe's way and rocex's.
    let mut got = Vec::new();
    for (read, len) in [(true, 16 << 10), (false, 64 << 10)] {
        for loss in [0.01, 0.05] {
            let rxe = stream(true, read, len, 150, loss);
            let fast = stream(false, read, len, 150, loss);
            got.push((read, loss, rxe, fast));
        }
    }
    assert_eq!(
        got,
        [
            (true, 0.01, (780, 156), (760, 148)),
            (true, 0.05, (1_344_717, 872), (5_340, 872)),
            // At 1% every loss of a WRITE packet was followed by one the responder NAKed.
            (false, 0.01, (2_900, 7_896), (2_900, 7_896)),
            // At 5% the NAKs and last packets lost too: the same packets resent, each
            // round trip instead of 67 ms after the last answer.
            (false, 0.05, (3_699_727, 51_438), (14_640, 51_438)),
        ]
    );
}
