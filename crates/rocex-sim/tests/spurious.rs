//! Retransmit timers that fire before the responses arrive (a round trip longer than the
//! ACK timeout), responses held back for many timeouts, and loss with a finite retry count:
//! many READs and atomics in flight must still complete once each, in order.

mod common;

use std::time::Duration;

use common::*;
use rocex_proto::verbs::{SendOp, WcStatus};
use rocex_sim::Link;

/// Posts `n` requests cycling through FETCH_ADD, READ and (with `writes`) WRITE, and checks
/// that all complete successfully in order and the counter saw every add once.
fn run(seed: u64, link: Link, params: Params, n: u64, writes: bool) {
    let mut p = Pair::new(seed, link, params);
    let (a, b) = (p.side('a'), p.side('b'));
    let counter_at = 1 << 19;
    write_bytes(&b, 0, &pattern(5, 4096));
    let kinds = if writes { 3 } else { 2 };
    let mut adds = 0;
    for i in 0..n {
        let (op, len) = match i % kinds {
            0 => {
                adds += 1;
                let remote = remote(&b, counter_at);
                (SendOp::FetchAdd { remote, add: 1 }, 8)
            }
            1 => (SendOp::Read(remote(&b, 0)), 3000),
            _ => (SendOp::Write(remote(&b, 4096)), 3000),
        };
        p.post(&a, i, op, 8192 * (i % 60 + 1), len);
    }
    let wcs = p.completions(&a, n as usize, Duration::from_secs(60));
    let c = p.fabric.node(a.node).counters().clone();
    assert_eq!(wcs.len(), n as usize, "seed {seed}: {c:?}");
    for (i, wc) in wcs.iter().enumerate() {
        let got = (wc.wr_id, wc.status);
        assert_eq!(got, (i as u64, WcStatus::Success), "seed {seed}: {c:?}");
    }
    let counter = u64::from_ne_bytes(read_bytes(&b, counter_at, 8).try_into().unwrap());
    assert_eq!(counter, adds, "seed {seed}: every FETCH_ADD once");
}

fn params(timeout: u8, max_rd_atomic: u8) -> Params {
    Params {
        timeout,
        retry_cnt: 6,
        max_rd_atomic,
        ..Params::default()
    }
}

#[test]
fn reads_and_atomics_survive_early_timers() {
    // ACK timeout 4.096 us * 2^10 = 4.2 ms against a 10 ms round trip.
    let link = Link::with_delay(Duration::from_millis(5));
    run(7, link, params(10, 16), 64, false);
    run(7, link, params(10, 4), 64, false);
}

#[test]
fn reads_and_atomics_survive_loss_with_finite_retries() {
    let link = Link {
        delay: Duration::from_micros(20),
        jitter: Duration::from_micros(10),
        loss: 0.05,
        duplicate: 0.05,
        reorder: 0.1,
        reorder_by: Duration::from_micros(100),
        corrupt: 0.0,
    };
    for seed in 0..12 {
        run(seed, link, params(6, 16), 200, false);
    }
}

#[test]
fn reads_and_atomics_survive_stalls() {
    // 5% of packets held back 20 ms, five ACK timeouts.
    let link = Link {
        delay: Duration::from_micros(20),
        jitter: Duration::from_micros(10),
        reorder: 0.05,
        reorder_by: Duration::from_millis(20),
        ..Link::default()
    };
    for seed in 0..12 {
        run(seed, link, params(10, 16), 200, true);
    }
}
