//! The results `proto-tests/bench/compare.sh` collects, as `report.py --json` writes them:
//! medians over the runs, `null` where a measurement failed.

use serde::Deserialize;

/// One `just bench-compare`.
#[derive(Debug, Deserialize)]
pub(crate) struct Results {
    /// `rocex perf write bw`, 1 QP, MTU 4096, per message size.
    pub(crate) msg_size: Vec<SizePoint>,
    /// `rocex perf write bw`, 64 KiB, MTU 4096, per QP count.
    pub(crate) qps: Vec<QpPoint>,
    /// What users use instead, for the same chart.
    pub(crate) references: References,
    /// Round trips of an 8-byte WRITE and of a 40-byte UDP ping-pong.
    pub(crate) latency: Latency,
}

/// Throughput at one message size.
#[derive(Debug, Deserialize)]
pub(crate) struct SizePoint {
    /// Bytes per WRITE.
    pub(crate) size: u64,
    /// Payload Gb/s.
    pub(crate) gbps: Option<f64>,
}

/// Throughput with one number of QPs.
#[derive(Debug, Deserialize)]
pub(crate) struct QpPoint {
    /// RC QPs on each side.
    pub(crate) qps: u32,
    /// Payload Gb/s, all QPs together; `None` when the run failed.
    pub(crate) gbps: Option<f64>,
}

/// Reference throughputs.
#[derive(Debug, Deserialize)]
pub(crate) struct References {
    /// iperf3, one TCP stream.
    pub(crate) iperf3_gbps: Option<f64>,
    /// Raw UDP, one 4124-byte datagram (a 4 KiB WRITE packet's size) per syscall.
    pub(crate) udp_gbps: Option<f64>,
}

/// Two latency distributions.
#[derive(Debug, Deserialize)]
pub(crate) struct Latency {
    /// rocex's 8-byte WRITE round trip (twice perftest's half round trips).
    pub(crate) rocex_rtt_us: Percentiles,
    /// The kernel UDP busy-poll ping-pong's round trip.
    pub(crate) udp_rtt_us: Percentiles,
}

/// Points of a latency distribution, in microseconds.
#[derive(Debug, Deserialize)]
pub(crate) struct Percentiles {
    pub(crate) min: Option<f64>,
    pub(crate) p50: Option<f64>,
    pub(crate) p99: Option<f64>,
    pub(crate) p999: Option<f64>,
    pub(crate) max: Option<f64>,
}

impl Percentiles {
    /// The points in order, with their labels.
    pub(crate) fn points(&self) -> [(&'static str, Option<f64>); 5] {
        [
            ("min", self.min),
            ("p50", self.p50),
            ("p99", self.p99),
            ("p99.9", self.p999),
            ("max", self.max),
        ]
    }
}

/// One `just bench-loss` (proto-tests/bench/loss.sh): medians over its runs.
#[derive(Debug, Deserialize)]
pub(crate) struct LossResults {
    /// One line per stream and recovery mode.
    pub(crate) series: Vec<LossSeries>,
}

/// Goodput of one stream under one recovery mode, at each loss rate.
#[derive(Debug, Deserialize)]
pub(crate) struct LossSeries {
    /// What the line is, for the legend.
    pub(crate) label: String,
    /// `write` or `read`.
    pub(crate) op: String,
    /// `rocex` or `rxe` (`rocexd --rxe-recovery`).
    pub(crate) mode: String,
    /// Share of datagrams dropped, in percent (0: the lossless reference).
    pub(crate) loss_pct: Vec<f64>,
    /// Goodput relative to the same run's lossless stream.
    pub(crate) relative: Vec<Option<f64>>,
}

/// One `proto-tests/storage/bench.sh`: medians over its runs of each iSER workload in each
/// setup, `null` where a setup does not run the workload.
#[derive(Debug, Deserialize)]
pub(crate) struct StorageResults {
    /// Runs behind each median (a cell may hold more samples, bench.sh counts them).
    pub(crate) runs: u32,
    /// The commit the runs were taken on.
    pub(crate) rev: String,
    /// The setups, in the order of every workload's cells.
    pub(crate) setups: Vec<String>,
    /// One entry per phase, block size and queue depth.
    pub(crate) workloads: Vec<StorageWorkload>,
}

/// One iSER workload's medians, one cell per setup.
#[derive(Debug, Deserialize)]
pub(crate) struct StorageWorkload {
    /// `write` (fio's random writes) or `verify` (the same blocks read back and checked).
    pub(crate) phase: String,
    /// Block size as bench.sh names it: `4k`, `128k`.
    pub(crate) bs: String,
    /// Queue depth.
    pub(crate) depth: u32,
    /// Median IOPS per setup.
    pub(crate) iops: Vec<Option<f64>>,
}

impl StorageResults {
    /// What the chart cannot draw: no workload, a workload whose cells do not match the setups, or an
    /// IOPS median that is not positive (a log scale has no place for it).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.workloads.is_empty() {
            return Err("no workloads".to_owned());
        }
        for w in &self.workloads {
            let at = || format!("workload {} {} qd{}", w.phase, w.bs, w.depth);
            if w.iops.len() != self.setups.len() {
                return Err(format!(
                    "{}: {} IOPS cells for {} setups",
                    at(),
                    w.iops.len(),
                    self.setups.len()
                ));
            }
            if let Some(v) = w.iops.iter().flatten().find(|v| **v <= 0.0) {
                return Err(format!("{}: IOPS {v} is not positive", at()));
            }
        }
        Ok(())
    }
}
