//! Sixteen READs and atomics in flight (`max_rd_atomic` = `max_dest_rd_atomic` = 16), of
//! mixed sizes at MTU 1024, over links that lose, duplicate and hold packets back for
//! several ACK timeouts: duplicate requests reach the responder after the originals were
//! answered, some after their saved resources were recycled. Every READ must return the
//! remote bytes, every atomic the value exactly-once, in-order execution gives, and every
//! work request must complete successfully, in order, with a finite retry count.

mod common;

use std::time::Duration;

use common::*;
use rocex_proto::Counters;
use rocex_proto::verbs::{Mtu, SendOp, WcOpcode, WcStatus};
use rocex_sim::Link;

/// Where B keeps the bytes READs fetch.
const SRC_AT: u64 = 0;
const SRC_LEN: usize = 64 << 10;
/// B's two atomic counters.
const COUNTERS_AT: u64 = 1 << 20;
/// A's landing slots, one per work request.
const SLOTS_AT: u64 = 2 << 20;
const SLOT: u64 = 8192;
/// What A's slots hold before anything lands in them.
const UNTOUCHED: u8 = 0xa5;
/// Work requests per run, all posted at once.
const OPS: u64 = 300;

/// READ lengths around the MTU: single packets, exact multiples, one byte over, seven.
const READ_LENS: [u32; 10] = [1, 8, 1000, 1024, 1025, 2048, 3000, 4096, 5000, 7168];

/// What a work request must find in its slot.
enum Expect {
    /// The `len` remote bytes from `at`.
    Read { at: u64, len: u32 },
    /// The counter's value before the atomic, executed once and in order.
    Atomic { orig: u64 },
}

impl Expect {
    fn len(&self) -> u32 {
        match self {
            Self::Read { len, .. } => *len,
            Self::Atomic { .. } => 8,
        }
    }
}

/// A small deterministic generator for the workload.
struct Gen(u64);

impl Gen {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn params() -> Params {
    Params {
        mtu: Mtu::M1024,
        buf_len: 8 << 20,
        // 4.096 us * 2^8 = 1.05 ms.
        timeout: 8,
        retry_cnt: 6,
        max_rd_atomic: 16,
        ..Params::default()
    }
}

/// A 40 us round trip; a tenth of the packets held back up to five ACK timeouts.
fn lossy() -> Link {
    Link {
        delay: Duration::from_micros(20),
        jitter: Duration::from_micros(10),
        loss: 0.05,
        duplicate: 0.10,
        reorder: 0.10,
        reorder_by: Duration::from_millis(5),
        corrupt: 0.0,
    }
}

/// Posts [`OPS`] READs, FETCH_ADDs and COMPARE_SWAPs at once, waits for them and checks
/// every result; returns the responder's counters, or what went wrong.
fn run(seed: u64, link: Link) -> Result<Counters, String> {
    let mut p = Pair::new(seed, link, params());
    let (a, b) = (p.side('a'), p.side('b'));
    let src = pattern(seed ^ 0x5eed, SRC_LEN);
    write_bytes(&b, SRC_AT, &src);
    write_bytes(&a, SLOTS_AT, &vec![UNTOUCHED; (OPS * SLOT) as usize]);
    let mut counters = [0u64; 2];
    let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut expect = Vec::new();
    for i in 0..OPS {
        let c = g.below(2) as usize;
        let counter = remote(&b, COUNTERS_AT + 8 * c as u64);
        let op = match g.below(4) {
            0 | 1 => {
                let len = READ_LENS[g.below(READ_LENS.len() as u64) as usize];
                let at = SRC_AT + g.below(SRC_LEN as u64 - u64::from(len));
                expect.push(Expect::Read { at, len });
                SendOp::Read(remote(&b, at))
            }
            2 => {
                expect.push(Expect::Atomic { orig: counters[c] });
                counters[c] += i + 1;
                SendOp::FetchAdd {
                    remote: counter,
                    add: i + 1,
                }
            }
            _ => {
                // Half the compares match. A swap run twice, or not at all, shows in the
                // value the next atomic on the counter returns.
                let hit = g.below(2) == 0;
                let compare = if hit { counters[c] } else { !counters[c] };
                let swap = counters[c] + (i << 8);
                expect.push(Expect::Atomic { orig: counters[c] });
                if hit {
                    counters[c] = swap;
                }
                SendOp::CompareSwap {
                    remote: counter,
                    compare,
                    swap,
                }
            }
        };
        let len = expect.last().map_or(0, Expect::len);
        p.post(&a, i, op, SLOTS_AT + i * SLOT, len);
    }
    let wcs = p.completions(&a, OPS as usize, Duration::from_secs(120));
    let ca = p.fabric.node(a.node).counters().clone();
    let summary = format!(
        "retries {}, out-of-sequence responses dropped {}",
        ca.completer_retry_err, ca.drop_out_of_seq
    );
    if wcs.len() != OPS as usize {
        return Err(format!("{} of {OPS} completed ({summary})", wcs.len()));
    }
    for (i, wc) in wcs.iter().enumerate() {
        if (wc.wr_id, wc.status) != (i as u64, WcStatus::Success) {
            return Err(format!("completion {i} is {wc:?} ({summary})"));
        }
    }
    for (i, (e, wc)) in expect.iter().zip(&wcs).enumerate() {
        let slot = SLOTS_AT + i as u64 * SLOT;
        match *e {
            Expect::Read { at, len } => {
                let want = &src[at as usize..(at + u64::from(len)) as usize];
                if read_bytes(&a, slot, len as usize) != want {
                    return Err(format!("READ {i} of {len} bytes from {at} got other bytes"));
                }
                if (wc.opcode, wc.byte_len) != (WcOpcode::RdmaRead, len) {
                    return Err(format!("READ {i} completed as {wc:?}"));
                }
            }
            Expect::Atomic { orig } => {
                let got = u64::from_ne_bytes(read_bytes(&a, slot, 8).try_into().unwrap());
                if got != orig {
                    return Err(format!("atomic {i} returned {got:#x}, not {orig:#x}"));
                }
            }
        }
        if read_bytes(&a, slot + u64::from(e.len()), 8) != [UNTOUCHED; 8] {
            return Err(format!("work request {i} wrote past its buffer"));
        }
    }
    for (c, want) in counters.iter().enumerate() {
        let at = COUNTERS_AT + 8 * c as u64;
        let got = u64::from_ne_bytes(read_bytes(&b, at, 8).try_into().unwrap());
        if got != *want {
            return Err(format!("counter {c} ended at {got:#x}, not {want:#x}"));
        }
    }
    Ok(p.fabric.node(b.node).counters().clone())
}

/// Runs `seeds` over `link`; panics with every failure.
fn run_all(link: Link, seeds: std::ops::Range<u64>) -> Vec<Counters> {
    let mut failures = Vec::new();
    let mut counters = Vec::new();
    for seed in seeds {
        match run(seed, link) {
            Ok(c) => counters.push(c),
            Err(e) => failures.push(format!("seed {seed}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    counters
}

#[test]
fn sixteen_reads_and_atomics_survive_loss_and_late_duplicates() {
    let responder = run_all(lossy(), 0..32);
    let replays: u64 = responder.iter().map(|c| c.duplicate_request).sum();
    let recycled: u64 = responder.iter().map(|c| c.drop_no_resource).sum();
    assert!(replays > 0, "duplicate requests reached the responder");
    assert!(
        recycled > 0,
        "late duplicates found their resources recycled (and were dropped unanswered)"
    );
}

/// Responses held back past the ACK timeout while others keep arriving: a retry is spent
/// only on a timeout with no response at all, as in rxe, so the retries last.
#[test]
fn retries_last_while_held_back_answers_stream_in() {
    let held_back = Link {
        loss: 0.02,
        duplicate: 0.20,
        reorder: 0.30,
        // Up to 20 ACK timeouts.
        reorder_by: Duration::from_millis(20),
        ..lossy()
    };
    run_all(held_back, 0..32);
}

/// A round trip of four to six ACK timeouts.
#[test]
fn retries_last_over_a_round_trip_of_several_timeouts() {
    let slow = Link {
        delay: Duration::from_millis(2),
        jitter: Duration::from_millis(1),
        loss: 0.02,
        duplicate: 0.05,
        ..Link::default()
    };
    run_all(slow, 0..32);
}
