//! `rocex top`: a live view of a `rocexd`: the device's totals, one line per client
//! process and one per QP (busiest first), redrawn every interval on a terminal; into a
//! pipe or file, one snapshot. Rates are differences between two `Stat` readings an interval apart: a QP's
//! packets sent and received from its send and receive PSNs (each packet takes one), the
//! device's from rxe's `sent_pkts`, `rcvd_pkts` and `retransmitted_pkts`. A QP's
//! retransmitted packets, RNR and sequence NAKs received and sent and duplicate requests
//! are its totals (its counters of rxe's names in `Stat`).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rocex_verbs::{Context, QpStat, Stats};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The daemon's control socket [default: $ROCEX_SOCKET, else the only rocexd running].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Seconds between readings (0.1 to 3600).
    #[arg(short = 'd', long, default_value_t = 1.0, value_parser = parse_interval)]
    interval: f64,
    /// Stop after this many views [default: 1 into a pipe or file, no end on a terminal].
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// At most this many QP lines in a view (the busiest).
    #[arg(long, default_value_t = 40)]
    rows: usize,
}

fn parse_interval(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|d| (0.1..=3600.0).contains(d))
        .ok_or_else(|| format!("{s:?} is not a number of seconds from 0.1 to 3600"))
}

/// PSNs count modulo 2^24.
const PSN_MASK: u64 = (1 << 24) - 1;

fn counter(c: &[(String, u64)], name: &str) -> u64 {
    c.iter().find(|(n, _)| n == name).map_or(0, |&(_, v)| v)
}

fn group<'a>(s: &'a Stats, name: &str) -> &'a [(String, u64)] {
    s.groups
        .iter()
        .find(|g| g.name == name)
        .map_or(&[], |g| &g.counters)
}

/// One QP's line: its rates over `secs` since `before` (its previous reading, if it
/// existed then).
struct Row {
    /// The client process that owns the QP (0: the daemon's own QP).
    pid: u64,
    tx: f64,
    rx: f64,
    sq: u64,
    rq: u64,
    line: String,
}

fn row(q: &QpStat, before: Option<&QpStat>, secs: f64) -> Row {
    let c = &q.counters;
    let rate = |name: &str| {
        before.map_or(0.0, |b| {
            let d = counter(c, name).wrapping_sub(counter(&b.counters, name)) & PSN_MASK;
            d as f64 / secs
        })
    };
    let (tx, rx) = (rate("sq_psn"), rate("rq_psn"));
    let in_flight = counter(c, "sq_psn").wrapping_sub(counter(c, "unacked_psn")) & PSN_MASK;
    let (pid, sq, rq) = (
        counter(c, "client_pid"),
        counter(c, "sq_wqes"),
        counter(c, "rq_wqes"),
    );
    let line = format!(
        "{:>8} {:<4} {:<5} {:>10.0} {:>10.0} {:>8} {:>6} {:>6} {:>5} {:>5} \
         {:>6} {:>6} {:>7} {:>6} {:>7} {:>6} {:>8}",
        format!("{:#x}", q.qpn),
        q.qp_type.name(),
        q.state.name(),
        tx,
        rx,
        in_flight,
        sq,
        rq,
        counter(c, "retry_left"),
        counter(c, "rnr_retry_left"),
        counter(c, "retransmitted_pkts"),
        counter(c, "rcvd_rnr_err"),
        counter(c, "send_rnr_err"),
        counter(c, "rcvd_seq_err"),
        counter(c, "nak_psn_sequence"),
        counter(c, "duplicate_request"),
        pid,
    );
    Row {
        pid,
        tx,
        rx,
        sq,
        rq,
        line,
    }
}

/// A client process's name, as `top(1)` shows it (its `comm`).
fn command(pid: u64) -> String {
    if pid == 0 {
        return "(rocexd)".to_owned();
    }
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| "?".to_owned(), |c| c.trim().to_owned())
}

/// One line per client process: its QPs' count, rates and queued work requests summed,
/// busiest first.
fn clients(rows: &[Row]) -> String {
    let mut by_pid: BTreeMap<u64, (usize, f64, f64, u64, u64)> = BTreeMap::new();
    for r in rows {
        let e = by_pid.entry(r.pid).or_default();
        *e = (e.0 + 1, e.1 + r.tx, e.2 + r.rx, e.3 + r.sq, e.4 + r.rq);
    }
    let mut list: Vec<_> = by_pid.into_iter().collect();
    list.sort_by(|a, b| (b.1.1 + b.1.2).total_cmp(&(a.1.1 + a.1.2)));
    let mut out = format!(
        "{:>8} {:<16} {:>5} {:>10} {:>10} {:>6} {:>6}\n",
        "PID", "COMMAND", "QPS", "TX pkt/s", "RX pkt/s", "SQ", "RQ"
    );
    for (pid, (qps, tx, rx, sq, rq)) in list {
        out.push_str(&format!(
            "{pid:>8} {:<16} {qps:>5} {tx:>10.0} {rx:>10.0} {sq:>6} {rq:>6}\n",
            command(pid)
        ));
    }
    out
}

/// The view of `now` against `before`, `secs` apart.
fn view(socket: &str, addr: &str, before: &Stats, now: &Stats, secs: f64, rows: usize) -> String {
    let (e0, e1) = (group(before, "engine"), group(now, "engine"));
    let per_s = |name: &str| counter(e1, name).saturating_sub(counter(e0, name)) as f64 / secs;
    let d = group(now, "daemon");
    let drops: u64 = e1
        .iter()
        .filter(|(n, _)| n.starts_with("drop_"))
        .map(|&(_, v)| v)
        .sum();
    let mut out = format!(
        "rocexd {addr} ({socket})  clients {}  qps {}  mrs {}  registered {} B\n\
         sent {:.0} pkt/s  received {:.0} pkt/s  retransmitted {:.0} pkt/s  \
         RNR NAKs received {} sent {}  sequence NAKs {}  retries exceeded {}  dropped {}\n\n",
        counter(d, "clients"),
        counter(d, "qps"),
        counter(d, "mrs"),
        counter(d, "registered_bytes"),
        per_s("sent_pkts"),
        per_s("rcvd_pkts"),
        per_s("retransmitted_pkts"),
        counter(e1, "rcvd_rnr_err"),
        counter(e1, "send_rnr_err"),
        counter(e1, "rcvd_seq_err"),
        counter(e1, "retry_exceeded_err") + counter(e1, "retry_rnr_exceeded_err"),
        drops,
    );
    let mut lines: Vec<Row> = now
        .qps
        .iter()
        .map(|q| row(q, before.qps.iter().find(|b| b.qpn == q.qpn), secs))
        .collect();
    out.push_str(&clients(&lines));
    out.push_str(&format!(
        "\n{:>8} {:<4} {:<5} {:>10} {:>10} {:>8} {:>6} {:>6} {:>5} {:>5} \
         {:>6} {:>6} {:>7} {:>6} {:>7} {:>6} {:>8}\n",
        "QPN",
        "TYPE",
        "STATE",
        "TX pkt/s",
        "RX pkt/s",
        "INFLIGHT",
        "SQ",
        "RQ",
        "RETRY",
        "RNR",
        "RETX",
        "RNR-IN",
        "RNR-OUT",
        "SEQ-IN",
        "SEQ-OUT",
        "DUP",
        "PID"
    ));
    // Busiest first; equals keep the QPN order they came in.
    lines.sort_by(|a, b| (b.tx + b.rx).total_cmp(&(a.tx + a.rx)));
    for r in lines.iter().take(rows) {
        out.push_str(&r.line);
        out.push('\n');
    }
    if lines.len() > rows {
        out.push_str(&format!("... {} more QPs\n", lines.len() - rows));
    }
    out
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let opened = crate::choose::daemon(a.socket.as_deref())
        .and_then(|s| Context::open_daemon_path(&s).map(|c| (s, c)));
    let (socket, ctx) = match opened {
        Ok(o) => o,
        Err(e) => {
            eprintln!("rocex top: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shown = socket.display().to_string();
    let addr = ctx.gid_addr().to_string();
    let tty = std::io::stdout().is_terminal();
    let count = a.count.unwrap_or(if tty { u64::MAX } else { 1 });
    let interval = Duration::from_secs_f64(a.interval);
    let mut before = match ctx.stats() {
        Ok(s) => (s, Instant::now()),
        Err(e) => {
            eprintln!("rocex top: {shown}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    for _ in 0..count {
        std::thread::sleep(interval);
        let now = match ctx.stats() {
            Ok(s) => (s, Instant::now()),
            Err(e) => {
                eprintln!("rocex top: {shown}: {e}");
                return ExitCode::FAILURE;
            }
        };
        let secs = now.1.duration_since(before.1).as_secs_f64();
        let text = view(&shown, &addr, &before.0, &now.0, secs, a.rows);
        // On a terminal each view replaces the last (cursor home, clear the screen).
        let home = if tty { "\x1b[H\x1b[2J" } else { "" };
        if write!(out, "{home}{text}")
            .and_then(|()| out.flush())
            .is_err()
        {
            // A closed pipe (`rocex top | head`) ends the view quietly.
            return ExitCode::SUCCESS;
        }
        before = now;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_verbs::StatGroup;
    use rocex_verbs::verbs::{QpState, QpType};

    fn qp(qpn: u32, sq_psn: u64, rq_psn: u64) -> QpStat {
        QpStat {
            qpn,
            qp_type: QpType::Rc,
            state: QpState::Rts,
            counters: [
                ("sq_psn", sq_psn),
                ("unacked_psn", sq_psn.saturating_sub(3)),
                ("rq_psn", rq_psn),
                ("sq_wqes", 2),
                ("client_pid", 0),
                ("retransmitted_pkts", qpn.into()),
                ("rcvd_rnr_err", 1),
                ("send_rnr_err", 2),
                ("rcvd_seq_err", 3),
                ("nak_psn_sequence", 4),
                ("duplicate_request", 5),
            ]
            .map(|(n, v)| (n.to_owned(), v))
            .into(),
        }
    }

    #[test]
    fn rates_come_from_psn_differences_across_the_wrap() {
        let engine = |sent| StatGroup {
            name: "engine".into(),
            counters: vec![("sent_pkts".into(), sent)],
        };
        let before = Stats {
            groups: vec![engine(100)],
            qps: vec![qp(17, PSN_MASK - 9, 50), qp(18, 5, 5)],
            next: 0,
        };
        let now = Stats {
            groups: vec![engine(300)],
            qps: vec![qp(17, 10, 50), qp(18, 5, 5), qp(19, 1, 1)],
            next: 0,
        };
        let v = view("/s", "10.0.0.1", &before, &now, 2.0, 2);
        assert!(v.contains("sent 100 pkt/s"), "{v}");
        let lines: Vec<&str> = v.lines().collect();
        // The QPs are the daemon's own here: one client line, their rates and work
        // requests summed.
        let client = "       0 (rocexd)             3         10          0      6      0";
        assert_eq!(lines[4], client, "{v}");
        // 20 PSNs across the wrap in 2 s; the busiest QP first; one line too many.
        let first = lines.iter().position(|l| l.contains("QPN TYPE")).unwrap() + 1;
        assert!(
            lines[first].starts_with("    0x11 RC   RTS           10"),
            "{v}"
        );
        assert!(lines[first].contains("        3      2"), "{v}");
        // Its totals: RETX (the QPN here) RNR-IN RNR-OUT SEQ-IN SEQ-OUT DUP, then the PID.
        assert!(
            lines[first].ends_with("     17      1       2      3       4      5        0"),
            "{v}"
        );
        assert_eq!(lines.last(), Some(&"... 1 more QPs"), "{v}");
    }
}
