//! Results as perftest prints them (MB/sec are 2^20 bytes, as perftest's), or one JSON
//! object, and a progress line on long runs when stderr is a terminal.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use rocex_proto::Counters;
use rocex_proto::verbs::Mtu;

use super::exchange::Prelude;
use super::{Ctx, Op, Outcome, Params, Test};

const MIB: f64 = 1024.0 * 1024.0;
const LINE: &str =
    "---------------------------------------------------------------------------------------";

/// Bandwidth over windows of `window` completions, whose best is the peak (perftest's peak
/// is over its completion-moderation intervals).
pub(crate) struct Sampler {
    size: u64,
    window: u64,
    count: u64,
    window_start: Option<Instant>,
    /// `count` when the current window started.
    window_count: u64,
    last: Option<Instant>,
    peak: f64,
}

impl Sampler {
    pub(crate) fn new(size: u64, window: u64) -> Self {
        Self {
            size,
            window: window.max(16),
            count: 0,
            window_start: None,
            window_count: 0,
            last: None,
            peak: 0.0,
        }
    }

    /// Counts `n` messages completed at `now` (one completion stands for several when
    /// requests are signaled only every so often).
    pub(crate) fn tick(&mut self, now: Instant, n: u64) {
        let before = self.count;
        self.count += n;
        self.last = Some(now);
        let start = *self.window_start.get_or_insert(now);
        if self.count / self.window > before / self.window {
            let dt = now.duration_since(start).as_secs_f64();
            if dt > 0.0 {
                let bytes = (self.count - self.window_count) * self.size;
                self.peak = self.peak.max(bytes as f64 / MIB / dt);
            }
            self.window_start = Some(now);
            self.window_count = self.count;
        }
    }

    pub(crate) fn peak_mbs(&self) -> f64 {
        self.peak
    }

    /// Seconds from `start` to the last completion (at least a nanosecond).
    pub(crate) fn elapsed(&self, start: Instant) -> f64 {
        self.last
            .map_or(0.0, |l| l.duration_since(start).as_secs_f64())
            .max(1e-9)
    }
}

/// The live progress line of a run (on a terminal): a bar, messages done, their rate, the
/// bandwidth and, for the engine in this process, its retransmissions.
pub(crate) struct Progress {
    line: crate::progress::Line,
    duration: Option<Duration>,
    size: u64,
}

impl Progress {
    pub(crate) fn new(p: &Params) -> Self {
        Self {
            line: crate::progress::Line::when(!p.json),
            duration: p.duration,
            size: u64::from(p.size),
        }
    }

    /// A new size of `-a`.
    pub(crate) fn resize(&mut self, size: u32) {
        self.size = u64::from(size);
    }

    /// `done` of `target` messages since `start`; `retransmitted` is asked only when the
    /// line is redrawn.
    pub(crate) fn update(
        &mut self,
        start: Instant,
        done: u64,
        target: u64,
        retransmitted: impl FnOnce() -> Option<u64>,
    ) {
        if !self.line.due() {
            return;
        }
        let elapsed = start.elapsed();
        let frac = match self.duration {
            Some(d) => elapsed.as_secs_f64() / d.as_secs_f64(),
            None => done as f64 / target.max(1) as f64,
        }
        .clamp(0.0, 1.0);
        let width = 30;
        let filled = (frac * f64::from(width)) as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(width as usize - filled);
        let gbps = (done * self.size) as f64 * 8.0 / elapsed.as_secs_f64().max(1e-9) / 1e9;
        let mut text = format!(
            "[{bar}] {:5.1}% {done} msgs {} {gbps:.2} Gb/s",
            frac * 100.0,
            crate::progress::rate(done, elapsed)
        );
        if let Some(r) = retransmitted() {
            text += &format!(" retransmitted {r}");
        }
        self.line.draw(&text);
    }

    /// Says that nothing has completed for a while, on a line of its own.
    pub(crate) fn say(&mut self, text: &str) {
        self.line.say(text);
    }

    pub(crate) fn finish(&mut self) {
        self.line.finish();
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Write => "write",
        Op::Read => "read",
        Op::Send => "send",
        Op::Atomic => "atomic",
    }
}

fn test_name(t: Test) -> &'static str {
    match t {
        Test::Bw => "bw",
        Test::Lat => "lat",
    }
}

pub(crate) fn print_header(p: &Params, pre: &Prelude, mtu: Mtu, ctx: &Ctx, local: IpAddr) {
    let kind = match p.op {
        Op::Write => "RDMA_Write",
        Op::Read => "RDMA_Read",
        Op::Send => "Send",
        Op::Atomic => "Atomic",
    };
    println!("{LINE}");
    println!(
        "                    {kind} {} Test (rocex; peer perftest {}{})",
        if p.test == Test::Bw { "BW" } else { "Latency" },
        pre.peer_version,
        if pre.peer_is_rocex { ", rocex" } else { "" }
    );
    println!(" Connection type : RC\t\tNumber of qps   : {}", p.qps);
    println!(
        " TX depth        : {}\t\tMtu             : {}[B]",
        p.tx_depth,
        mtu.bytes()
    );
    if p.test == Test::Bw {
        println!(" CQ Moderation   : {}", p.cq_mod);
    }
    println!(" Address         : {local}");
    println!("{LINE}");
    for (i, q) in ctx.qps.iter().enumerate() {
        println!(
            " local address: QPN {:#08x} PSN {:#08x} RKey {:#08x} VAddr {:#018x}",
            q.qpn,
            q.psn,
            q.rkey,
            ctx.remote_area(i)
        );
        if let Some(k) = q.peer {
            println!(
                " remote address: QPN {:#08x} PSN {:#08x} RKey {:#08x} VAddr {:#018x} OUT {:#04x}",
                k.qpn, k.psn, k.rkey, k.vaddr, k.out_reads
            );
        }
    }
    println!("{LINE}");
}

/// Sorted latencies: min, max, median, mean, standard deviation, 99% and 99.9%.
struct LatStats {
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    stdev: f64,
    p99: f64,
    p999: f64,
}

fn lat_stats(v: &[f64]) -> Option<LatStats> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() as f64 * q).ceil() as usize).clamp(1, s.len()) - 1];
    let avg = s.iter().sum::<f64>() / s.len() as f64;
    let var = s.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / s.len() as f64;
    Some(LatStats {
        min: s[0],
        max: s[s.len() - 1],
        typical: at(0.5),
        avg,
        stdev: var.sqrt(),
        p99: at(0.99),
        p999: at(0.999),
    })
}

/// A bandwidth in MB/s (2^20 bytes) in the unit the run reports: MB/s, or Gb/s (10^9 bits)
/// with `--report_gbits`.
pub(crate) fn bw_unit(p: &Params, mbs: f64) -> f64 {
    if p.gbits { mbs * MIB * 8.0 / 1e9 } else { mbs }
}

/// The whole result of a run of one size: column titles, the row, and what follows.
pub(crate) fn print(p: &Params, out: &Outcome, counters: Option<&Counters>) {
    print_columns(p);
    print_row(p, out);
    print_footer(p, out, counters);
}

/// The column titles (perftest prints them once, above the row of each size).
pub(crate) fn print_columns(p: &Params) {
    if p.json {
        return;
    }
    if p.test == Test::Bw {
        let unit = if p.gbits { "Gb/sec" } else { "MB/sec" };
        println!(
            " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
        );
    } else if p.duration.is_some() {
        // perftest's table of a timed latency test: the mean and the transaction rate.
        println!(" #bytes        #iterations       t_avg[usec]    tps average");
    } else {
        println!(
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
        );
    }
}

/// One size's result: a row of the table, or one JSON object.
pub(crate) fn print_row(p: &Params, out: &Outcome) {
    let bytes = out.iters as f64 * f64::from(p.size);
    let secs = out.seconds.max(1e-9);
    let gbps = if out.iters > 0 {
        bytes * 8.0 / secs / 1e9
    } else {
        0.0
    };
    let mpps = if out.iters > 0 {
        out.iters as f64 / secs / 1e6
    } else {
        0.0
    };
    let stats = lat_stats(&out.lat_us);
    let per_qp = out.iters / u64::from(p.qps.max(1));
    if p.json {
        let cpu = cpu_times();
        let v = serde_json::json!({
            "op": op_name(p.op),
            "test": test_name(p.test),
            "size": p.size,
            "iters": per_qp,
            "qps": p.qps,
            "gbps": gbps,
            "mpps": mpps,
            "lat_us_p50": stats.as_ref().map(|s| s.typical),
            "lat_us_p99": stats.as_ref().map(|s| s.p99),
            "verified": out.verdict.checked && out.verdict.errors == 0,
            "errors": out.verdict.errors,
            "cpu_user_s": cpu.map(|c| c.0),
            "cpu_sys_s": cpu.map(|c| c.1),
        });
        println!("{v}");
        return;
    }
    if out.passive && out.iters == 0 {
        println!(" (server: the client measures this test)");
    } else if p.test == Test::Bw {
        println!(
            " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
            p.size,
            per_qp,
            bw_unit(p, out.peak_mbs),
            bw_unit(p, bytes / MIB / secs),
            mpps
        );
    } else if let (Some(s), true) = (&stats, p.duration.is_some()) {
        println!(
            " {:<7}       {}            {:<7.2}        {:<7.2}",
            p.size,
            out.iters,
            s.avg,
            out.iters as f64 / secs
        );
    } else if let Some(s) = stats {
        println!(
            " {:<6} {:<14} {:<14.2} {:<12.2} {:<16.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
            p.size, out.iters, s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
        );
    }
}

/// The closing line, the verification verdict and the engine's counters.
pub(crate) fn print_footer(p: &Params, out: &Outcome, counters: Option<&Counters>) {
    if p.json {
        return;
    }
    println!("{LINE}");
    if p.verify {
        println!(
            " verify: {}",
            if !out.verdict.checked {
                "nothing checked".to_owned()
            } else if out.verdict.errors == 0 {
                "ok".to_owned()
            } else {
                format!("{} errors", out.verdict.errors)
            }
        );
    }
    if let Some(c) = counters {
        eprintln!(
            "rocex: sent_pkts={} rcvd_pkts={} retransmitted={} duplicate_request={} out_of_seq={}",
            c.sent_pkts,
            c.rcvd_pkts,
            c.retransmitted_pkts,
            c.duplicate_request,
            c.out_of_seq_request
        );
    }
}

/// The CPU time this process has used so far, in user space and in the kernel (seconds):
/// what the packets cost beside how fast they went (docs/performance.md, goal 1).
fn cpu_times() -> Option<(f64, f64)> {
    // SAFETY: an all-zero rusage is a valid place for getrusage to write.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is writable for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some((secs(u.ru_utime), secs(u.ru_stime)))
}
