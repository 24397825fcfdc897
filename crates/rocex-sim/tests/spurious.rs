//! Retransmit timers that fire before the responses arrive (a round trip longer than the
//! ACK timeout): many READs and atomics in flight must still complete once each, in order.

mod common;

use std::time::Duration;

use common::*;
use rocex_proto::verbs::{SendOp, WcStatus};
use rocex_sim::Link;

fn run(max_rd_atomic: u8, delay: Duration, timeout: u8) {
    let params = Params {
        timeout,
        retry_cnt: 6,
        max_rd_atomic,
        ..Params::default()
    };
    let mut p = Pair::new(7, Link::with_delay(delay), params);
    let (a, b) = (p.side('a'), p.side('b'));
    let counter_at = 1 << 19;
    write_bytes(&b, 0, &pattern(5, 4096));
    let n = 64u64;
    for i in 0..n {
        let op = if i % 2 == 0 {
            SendOp::FetchAdd {
                remote: remote(&b, counter_at),
                add: 1,
            }
        } else {
            SendOp::Read(remote(&b, 0))
        };
        let len = if i % 2 == 0 { 8 } else { 4096 };
        p.post_send(&a, wr(i, op, vec![sge(&a, 8192 * (i + 1), len)]));
    }
    let wcs = p.completions(&a, n as usize, Duration::from_secs(60));
    let c = p.fabric.node(a.node).counters().clone();
    assert_eq!(wcs.len(), n as usize, "{c:?}");
    for (i, wc) in wcs.iter().enumerate() {
        assert_eq!(
            (wc.wr_id, wc.status),
            (i as u64, WcStatus::Success),
            "{c:?}"
        );
    }
    let counter = u64::from_ne_bytes(read_bytes(&b, counter_at, 8).try_into().unwrap());
    assert_eq!(counter, n / 2);
    eprintln!(
        "retries {} retransmitted {}",
        c.completer_retry_err, c.retransmitted_pkts
    );
}

#[test]
fn reads_and_atomics_survive_early_timers() {
    // ACK timeout 4.096 us * 2^10 = 4.2 ms against a 10 ms round trip.
    run(16, Duration::from_millis(5), 10);
}

#[test]
fn few_outstanding_survive_early_timers() {
    run(4, Duration::from_millis(5), 10);
}

#[test]
fn reads_and_atomics_survive_loss_with_finite_retries() {
    for seed in 0..12 {
        let link = Link {
            delay: Duration::from_micros(20),
            jitter: Duration::from_micros(10),
            loss: 0.05,
            duplicate: 0.05,
            reorder: 0.1,
            reorder_by: Duration::from_micros(100),
            corrupt: 0.0,
        };
        let params = Params {
            timeout: 6,
            retry_cnt: 6,
            max_rd_atomic: 16,
            ..Params::default()
        };
        let mut p = Pair::new(seed, link, params);
        let (a, b) = (p.side('a'), p.side('b'));
        let counter_at = 1 << 19;
        write_bytes(&b, 0, &pattern(5, 4096));
        let n = 200u64;
        for i in 0..n {
            let op = if i % 2 == 0 {
                SendOp::FetchAdd {
                    remote: remote(&b, counter_at),
                    add: 1,
                }
            } else {
                SendOp::Read(remote(&b, 0))
            };
            let len = if i % 2 == 0 { 8 } else { 3000 };
            p.post_send(&a, wr(i, op, vec![sge(&a, 8192 * (i % 60 + 1), len)]));
        }
        let wcs = p.completions(&a, n as usize, Duration::from_secs(60));
        let c = p.fabric.node(a.node).counters().clone();
        let cb = p.fabric.node(b.node).counters().clone();
        for (i, wc) in wcs.iter().enumerate() {
            assert_eq!(
                (wc.wr_id, wc.status),
                (i as u64, WcStatus::Success),
                "seed {seed} {c:?} {cb:?}"
            );
        }
        assert_eq!(wcs.len(), n as usize, "seed {seed}");
    }
}

#[test]
fn reads_and_atomics_survive_stalls() {
    for seed in 0..12 {
        let link = Link {
            delay: Duration::from_micros(20),
            jitter: Duration::from_micros(10),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.05,
            reorder_by: Duration::from_millis(20),
            corrupt: 0.0,
        };
        let params = Params {
            timeout: 10,
            retry_cnt: 6,
            max_rd_atomic: 16,
            ..Params::default()
        };
        let mut p = Pair::new(seed, link, params);
        let (a, b) = (p.side('a'), p.side('b'));
        let counter_at = 1 << 19;
        write_bytes(&b, 0, &pattern(5, 4096));
        let n = 200u64;
        for i in 0..n {
            let op = match i % 3 {
                0 => SendOp::FetchAdd {
                    remote: remote(&b, counter_at),
                    add: 1,
                },
                1 => SendOp::Read(remote(&b, 0)),
                _ => SendOp::Write(remote(&b, 4096)),
            };
            let len = if i % 3 == 0 { 8 } else { 3000 };
            p.post_send(&a, wr(i, op, vec![sge(&a, 8192 * (i % 60 + 1), len)]));
        }
        let wcs = p.completions(&a, n as usize, Duration::from_secs(60));
        let c = p.fabric.node(a.node).counters().clone();
        let cb = p.fabric.node(b.node).counters().clone();
        for (i, wc) in wcs.iter().enumerate() {
            assert_eq!(
                (wc.wr_id, wc.status),
                (i as u64, WcStatus::Success),
                "seed {seed} {c:?} {cb:?}"
            );
        }
        assert_eq!(wcs.len(), n as usize, "seed {seed}");
    }
}
