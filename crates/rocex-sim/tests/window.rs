//! The go-back-N window (`Config::window`): rxe's 128 PSNs by default; a wider ceiling
//! reached by doubling on a clean path, left for rxe's window after a loss, and never with
//! `Config::rxe_recovery`. Seen from the requester's own side (`Engine::qp_status`: the
//! next PSN past the oldest unacknowledged one) after every event of a seeded simulation.

mod common;

use std::collections::VecDeque;
use std::time::Duration;

use common::*;
use rocex_proto::MAX_UNACKED_PSNS;
use rocex_proto::verbs::{Mtu, SendOp, WcStatus};
use rocex_sim::{Bottleneck, Link};
use rocex_wire::Psn;

/// 64 KiB WRITEs at a 4 KiB MTU: 16 PSNs each.
const LEN: usize = 64 << 10;
/// Messages per stream: 9600 PSNs.
const N: u64 = 600;
/// Messages posted at once: 1024 PSNs, past any window tested.
const DEPTH: u64 = 64;
/// Buffer slots a message's bytes stay in until it completes.
const SLOTS: u64 = 2 * DEPTH;

/// What a stream showed.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// PSNs in flight at most before the first go-back (all of them, without one).
    peak: u32,
    /// At most from the first go-back until a whole rxe window past the resent PSN was
    /// acknowledged, and at most after that.
    after_loss: Option<(u32, u32)>,
    /// Packets resent.
    resent: u64,
}

/// Streams [`N`] WRITEs from a to b over 500 us each way, [`DEPTH`] in flight, with
/// `window` and `rxe_recovery` on a; `lose` drops a's `lose`th packet (from 1) once.
/// Checks every completion and every byte; returns what it saw and the virtual time.
fn stream(window: u32, rxe_recovery: bool, lose: Option<u32>) -> (Seen, Duration) {
    let params = Params {
        mtu: Mtu::M4096,
        window,
        rxe_recovery,
        buf_len: 2 * SLOTS as usize * LEN,
        ..Params::default()
    };
    let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(500)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    if let Some(nth) = lose {
        let mut sent = 0;
        p.fabric.intercept(move |from, _to, _bytes| {
            if from == a.node {
                sent += 1;
                return sent != nth;
            }
            true
        });
    }
    // Sources in the buffer's first half, destinations in its second.
    let slot = |i: u64| (i % SLOTS) * LEN as u64;
    let dest = |i: u64| SLOTS * LEN as u64 + slot(i);
    let post = |p: &mut Pair, i: u64| {
        write_bytes(&a, slot(i), &pattern(i, LEN));
        let op = SendOp::Write(remote(&b, dest(i)));
        p.post(&a, i, op, slot(i), LEN as u32);
    };
    let (t0, mut posted) = (p.now(), 0);
    while posted < DEPTH {
        post(&mut p, posted);
        posted += 1;
    }
    let mut seen = Seen {
        peak: 0,
        after_loss: None,
        resent: 0,
    };
    // The oldest unacknowledged PSN at the first go-back.
    let mut went_back: Option<Psn> = None;
    let mut wcs = VecDeque::new();
    for i in 0..N {
        if wcs.is_empty() {
            let limit = p.now() + Duration::from_secs(10);
            p.fabric.run_until(limit, |f| {
                let s = f.node(a.node).qp_status(a.qpn).unwrap();
                let (next, oldest) = (Psn::new(s.sq_psn), Psn::new(s.unacked_psn));
                let in_flight = next.diff(oldest) as u32;
                if went_back.is_none() && s.counters.retransmitted_pkts > 0 {
                    went_back = Some(oldest);
                    seen.after_loss = Some((0, 0));
                }
                match (went_back, &mut seen.after_loss) {
                    (Some(at), Some((during, after))) => {
                        let past = oldest.diff(at) as u32;
                        let m = if past < MAX_UNACKED_PSNS {
                            during
                        } else {
                            after
                        };
                        *m = (*m).max(in_flight);
                    }
                    _ => seen.peak = seen.peak.max(in_flight),
                }
                wcs.extend(f.node(a.node).poll_cq(a.cq));
                !wcs.is_empty()
            });
        }
        let wc = wcs.pop_front().expect("a completion within 10 s");
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
        assert!(
            read_bytes(&b, dest(i), LEN) == pattern(i, LEN),
            "message {i}'s bytes"
        );
        if posted < N {
            post(&mut p, posted);
            posted += 1;
        }
    }
    seen.resent = p
        .fabric
        .node(a.node)
        .qp_status(a.qpn)
        .unwrap()
        .counters
        .retransmitted_pkts;
    (seen, p.now() - t0)
}

#[test]
fn rxes_window_by_default_and_with_rxe_recovery() {
    for (window, rxe_recovery) in [(MAX_UNACKED_PSNS, false), (512, true)] {
        let (seen, _) = stream(window, rxe_recovery, None);
        let want = Seen {
            peak: 128,
            after_loss: None,
            resent: 0,
        };
        assert_eq!(seen, want, "window {window}, rxe_recovery {rxe_recovery}");
    }
}

#[test]
fn a_clean_path_grows_the_window_to_its_ceiling() {
    let (rxe, rxe_time) = stream(MAX_UNACKED_PSNS, false, None);
    let (wide, wide_time) = stream(512, false, None);
    assert_eq!((rxe.peak, wide.peak, wide.resent), (128, 512, 0));
    // A window-bound stream: 75 round trips of rxe's window, against 2 to grow and 18 at
    // 512.
    assert!(
        wide_time * 3 < rxe_time,
        "512: {wide_time:?}, 128: {rxe_time:?}"
    );
}

#[test]
fn a_loss_sets_the_window_back_to_rxes_until_a_clean_one_passes() {
    // Packet 5000 of 9600 is lost once, long after the window reached 512: the go-back
    // resends from it with 128 in flight, and the window grows again once 128 PSNs past
    // it are acknowledged.
    let (seen, _) = stream(512, false, Some(5000));
    assert_eq!((seen.peak, seen.after_loss), (512, Some((128, 512))));
    assert!(seen.resent > 0);
}

/// The median time a 512-byte WRITE, one at a time on a QP of its own, takes to complete
/// while another QP streams 64 KiB WRITEs with `window` through a responder that takes
/// 1 Gb/s (a slower peer than the link: its queue holds what the windows put in it).
fn small_write_beside_a_stream(window: u32) -> Duration {
    let params = Params {
        mtu: Mtu::M4096,
        window,
        buf_len: 4 << 20,
        ..Params::default()
    };
    let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(10)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    let slow = Bottleneck {
        rate: 1e9,
        mark_above: usize::MAX,
        capacity: usize::MAX,
    };
    p.fabric.set_bottleneck(b.node, slow);
    let (small, small_cq) = p.second_qp(&params, 4);

    let stream = |p: &mut Pair, i: u64| {
        let op = SendOp::Write(remote(&b, (i % 32) * LEN as u64));
        p.post(&a, i, op, (i % 32) * LEN as u64, LEN as u32);
    };
    for i in 0..DEPTH {
        stream(&mut p, i);
    }
    let mut posted = DEPTH;
    let mut took = Vec::new();
    // The first 20 while the stream's window grows; 40 timed after.
    for n in 0..60 {
        let op = SendOp::Write(remote(&b, 3 << 20));
        let small_wr = wr(n, op, vec![sge(&a, 3 << 20, 512)]);
        let t0 = p.now();
        p.fabric
            .node(a.node)
            .post_send(t0, small, small_wr)
            .unwrap();
        let mut done = None;
        let limit = t0 + Duration::from_secs(10);
        let mut stream_done = 0;
        p.fabric.run_until(limit, |f| {
            let e = f.node(a.node);
            while let Some(wc) = e.poll_cq(a.cq) {
                assert_eq!(wc.status, WcStatus::Success);
                stream_done += 1;
            }
            if let Some(wc) = e.poll_cq(small_cq) {
                assert_eq!((wc.wr_id, wc.status), (n, WcStatus::Success));
                done = Some(f.now());
            }
            done.is_some()
        });
        for _ in 0..stream_done {
            stream(&mut p, posted);
            posted += 1;
        }
        let at = done.expect("the small WRITE completes within 10 s");
        if n >= 20 {
            took.push(at - t0);
        }
    }
    took.sort();
    took[took.len() / 2]
}

#[test]
fn a_wide_window_is_queue_ahead_of_other_qps_at_a_slow_responder() {
    // What the stream keeps in flight waits in the responder's queue, and the small
    // WRITE waits behind it: 128 PSNs of 4 KiB drain at 1 Gb/s in 4.3 ms, 512 in 17 ms.
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let narrow = ms(small_write_beside_a_stream(MAX_UNACKED_PSNS));
    let wide = ms(small_write_beside_a_stream(512));
    assert!(
        (4.0..4.6).contains(&narrow) && (16.0..18.0).contains(&wide),
        "window 128: {narrow} ms, 512: {wide} ms"
    );
}
