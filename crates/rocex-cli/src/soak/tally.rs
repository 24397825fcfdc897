//! What the soak counted: messages and bytes per operation, and every discrepancy, with
//! the first few described so that a failure says where it happened.

use std::time::Duration;

use super::plan::Kind;

/// Descriptions kept of the first discrepancies.
const KEEP: usize = 20;

/// Counts of one run.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Messages completed successfully, per [`Kind::ALL`] index.
    pub(crate) messages: [u64; 6],
    /// Bytes of those messages.
    pub(crate) bytes: [u64; 6],
    /// Receive-consuming messages that never arrived.
    pub(crate) lost: u64,
    /// Messages that arrived more than once.
    pub(crate) duplicated: u64,
    /// Messages (or READ results) whose bytes, length or opcode were wrong.
    pub(crate) corrupted: u64,
    /// Messages that arrived before an earlier one of their lane.
    pub(crate) out_of_order: u64,
    /// Completions with an error status, or for a request that was not next.
    pub(crate) completion_errors: u64,
    /// CMP_SWAPs that did not find the value the previous one stored.
    pub(crate) cas_broken: u64,
    /// Per side (the responder holding the counter): the sum of the FETCH_ADD addends.
    pub(crate) add_sum: [u64; 2],
    /// Per side: the original values FETCH_ADD returned.
    pub(crate) fetched: [Vec<u64>; 2],
    /// The first discrepancies, described.
    pub(crate) notes: Vec<String>,
}

impl Tally {
    /// Records a discrepancy's description (the first [`KEEP`] are kept).
    pub(crate) fn note(&mut self, what: String) {
        if self.notes.len() < KEEP {
            self.notes.push(what);
        }
    }

    /// Counts a completed message.
    pub(crate) fn done(&mut self, kind: Kind, len: u32) {
        let i = Kind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.messages[i] += 1;
        self.bytes[i] += u64::from(len);
    }

    /// Messages completed.
    pub(crate) fn total(&self) -> u64 {
        self.messages.iter().sum()
    }

    /// Whether any discrepancy was counted so far (atomics are judged at the end).
    pub(crate) fn clean(&self) -> bool {
        self.lost + self.duplicated + self.corrupted + self.out_of_order + self.completion_errors
            == 0
    }

    /// One progress line.
    pub(crate) fn progress(&self, of: u64, elapsed: Duration) -> String {
        let n = self.total();
        format!(
            "soak: done={n}/{of} ({:.1}%) {:.0} msg/s lost={} dup={} corrupt={} ooo={} errors={}",
            100.0 * n as f64 / of.max(1) as f64,
            n as f64 / elapsed.as_secs_f64().max(1e-9),
            self.lost,
            self.duplicated,
            self.corrupted,
            self.out_of_order,
            self.completion_errors,
        )
    }
}

/// The end-of-run verdict on the atomics, per side holding a counter.
#[derive(Debug)]
pub(crate) struct Atomics {
    /// Each counter equals the sum of its addends; `None` when the run stopped early (the
    /// FETCH_ADDs in flight then may have been applied without completing).
    pub(crate) sums_match: Option<bool>,
    /// No two FETCH_ADDs on one counter returned the same original.
    pub(crate) originals_distinct: bool,
    /// The final counter values.
    pub(crate) counters: [u64; 2],
}

impl Atomics {
    /// Checks the counters read back against what was added; `finished` when every
    /// request completed.
    pub(crate) fn judge(t: &mut Tally, counters: [u64; 2], finished: bool) -> Self {
        let sums_match = finished.then_some(counters == t.add_sum);
        let mut originals_distinct = true;
        for (side, f) in t.fetched.iter_mut().enumerate() {
            f.sort_unstable();
            if let Some(w) = f.windows(2).find(|w| w[0] == w[1]) {
                originals_distinct = false;
                let v = w[0];
                t.notes
                    .push(format!("side {side}: FETCH_ADD returned {v} twice"));
            }
        }
        if sums_match == Some(false) {
            t.notes.push(format!(
                "counters {counters:?}, sums of the addends {:?}",
                t.add_sum
            ));
        }
        Self {
            sums_match,
            originals_distinct,
            counters,
        }
    }

    /// Whether the atomics add up (as far as they could be judged) and every CMP_SWAP
    /// chain held.
    pub(crate) fn consistent(&self, t: &Tally) -> bool {
        self.sums_match != Some(false) && self.originals_distinct && t.cas_broken == 0
    }
}

/// The run's settings, for the report.
#[derive(Debug)]
pub(crate) struct RunInfo {
    pub(crate) messages: u64,
    pub(crate) qps: u32,
    pub(crate) window: u32,
    pub(crate) mtu: u32,
    pub(crate) timeout: u8,
    pub(crate) seed: u64,
    pub(crate) elapsed: Duration,
}

/// The summary as one JSON object.
pub(crate) fn json(t: &Tally, a: &Atomics, info: &RunInfo, ok: bool) -> serde_json::Value {
    let ops: serde_json::Map<String, serde_json::Value> = Kind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| {
            (
                k.name().to_string(),
                serde_json::json!({"messages": t.messages[i], "bytes": t.bytes[i]}),
            )
        })
        .collect();
    let secs = info.elapsed.as_secs_f64();
    serde_json::json!({
        "ok": ok,
        "messages": t.total(),
        "messages_planned": info.messages,
        "qps": info.qps,
        "window": info.window,
        "mtu": info.mtu,
        "ack_timeout_exp": info.timeout,
        "seed": info.seed,
        "ops": ops,
        "bytes": t.bytes.iter().sum::<u64>(),
        "lost": t.lost,
        "duplicated": t.duplicated,
        "corrupted": t.corrupted,
        "out_of_order": t.out_of_order,
        "completion_errors": t.completion_errors,
        "cas_broken": t.cas_broken,
        "atomics_consistent": a.consistent(t),
        "fetch_add_counters": a.counters,
        "fetch_add_sums": t.add_sum,
        "fetch_add_sums_checked": a.sums_match.is_some(),
        "elapsed_s": (secs * 1000.0).round() / 1000.0,
        "messages_per_s": (t.total() as f64 / secs.max(1e-9)).round(),
        "notes": t.notes,
    })
}

/// The summary as one line.
pub(crate) fn line(t: &Tally, a: &Atomics, info: &RunInfo, ok: bool) -> String {
    let secs = info.elapsed.as_secs_f64();
    let per_op: Vec<String> = Kind::ALL
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{}={}", k.name(), t.messages[i]))
        .collect();
    format!(
        "soak {}: messages={} ({}) bytes={} lost={} duplicated={} corrupted={} out_of_order={} \
         completion_errors={} atomics_consistent={} elapsed={secs:.1}s rate={:.0} msg/s",
        if ok { "ok" } else { "FAILED" },
        t.total(),
        per_op.join(" "),
        t.bytes.iter().sum::<u64>(),
        t.lost,
        t.duplicated,
        t.corrupted,
        t.out_of_order,
        t.completion_errors,
        a.consistent(t),
        t.total() as f64 / secs.max(1e-9),
    )
}
