//! `--metrics ADDR`: every counter `rocex stat` shows, in Prometheus' text exposition
//! format (version 0.0.4), over HTTP at `http://ADDR/metrics`.
//!
//! The endpoint runs on a thread of its own that is an ordinary client of the daemon: it
//! holds one control connection and asks `Stat` (`docs/abi.md` §6.2) for each scrape, so
//! the event loop knows nothing of HTTP and a slow scraper cannot stall it. That connection
//! is one of the `clients` it reports. The HTTP side is the least a scraper needs: one
//! request per connection, `GET` or `HEAD` of `/metrics`, answered and closed; anything
//! else gets 404, 405 or 400, a daemon that does not answer 503. Names are in
//! docs/daemon.md ("Metrics").

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rocex_verbs::{Context, Stats};

/// How long a scraper may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request head read; a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 8192;

/// The per-QP value that names the QP's client process (0: none), shown as a label.
const CLIENT_PID: &str = "client_pid";

/// Counters of the daemon's own group that are levels, not counts.
const DAEMON_GAUGES: [&str; 5] = ["clients", "qps", "mrs", "registered_bytes", "direct_slots"];

/// Per-QP values that are levels (PSNs, queue depths, retries left); the others
/// (retransmissions, NAKs, duplicates) are counts.
const QP_GAUGES: [&str; 8] = rocex_proto::QpStatus::LEVEL_NAMES;

/// Binds the endpoint's address, so that a bad or taken one stops the daemon at start.
pub(crate) fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
}

/// Serves scrapes on `listener` from a thread of its own, reading the counters through
/// the control socket at `socket`.
pub(crate) fn spawn(listener: TcpListener, socket: PathBuf) -> io::Result<()> {
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || serve(&listener, &socket))
        .map(drop)
}

fn serve(listener: &TcpListener, socket: &Path) {
    let mut ctx: Option<Context> = None;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if let Err(e) = answer(stream, &mut ctx, socket) {
            tracing::debug!(error = %e, "metrics request");
        }
    }
}

/// Reads one request and writes its answer.
fn answer(mut stream: TcpStream, ctx: &mut Option<Context>, socket: &Path) -> io::Result<()> {
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let head = read_head(&mut stream)?;
    let mut words = head.lines().next().unwrap_or_default().split(' ');
    let (method, path, version) = (words.next(), words.next(), words.next());
    let (status, body) = match (method, path, version) {
        (Some(m), Some(p), Some(v)) if v.starts_with("HTTP/1.") && p.starts_with('/') => {
            match (m, p.split('?').next()) {
                ("GET" | "HEAD", Some("/metrics")) => match scrape(ctx, socket) {
                    Ok(text) => ("200 OK", text),
                    Err(e) => ("503 Service Unavailable", format!("{e}\n")),
                },
                ("GET" | "HEAD", _) => ("404 Not Found", "only /metrics is served\n".into()),
                _ => ("405 Method Not Allowed", "GET or HEAD\n".into()),
            }
        }
        _ => ("400 Bad Request", "not an HTTP/1 request\n".into()),
    };
    let kind = if status.starts_with("200") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Allow: GET, HEAD\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(header.as_bytes())?;
    if method != Some("HEAD") {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

/// The request line and headers, up to the blank line that ends them.
fn read_head(stream: &mut TcpStream) -> io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// The counters now, through the held control connection (opened again when the first
/// attempt finds it closed).
fn scrape(ctx: &mut Option<Context>, socket: &Path) -> Result<String, rocex_verbs::Error> {
    for _ in 0..2 {
        let c = match ctx {
            Some(c) if !c.is_gone() => c,
            _ => ctx.insert(Context::open(socket)?),
        };
        match c.stats() {
            Ok(s) => return Ok(render(&c.gid_addr().to_string(), &s)),
            Err(rocex_verbs::Error::DaemonGone) => *ctx = None,
            Err(e) => return Err(e),
        }
    }
    Err(rocex_verbs::Error::DaemonGone)
}

/// The exposition: `rocex_<name>_total` for the engine's counters (rxe's names),
/// `rocex_<group>_<name>` for the other groups' levels and `..._total` for their counts,
/// per QP (labels `qpn` and `type`) `rocex_qp_<name>` gauges for its levels and
/// `rocex_qp_<name>_total` for its counts, and `rocex_qp_info` (1, with the QP's `state` and
/// its client's `client_pid`); every sample carries the device's address as `addr`.
fn render(addr: &str, s: &Stats) -> String {
    let mut out = String::new();
    for g in &s.groups {
        for (name, value) in &g.counters {
            let stem = match g.name.as_str() {
                "engine" => format!("rocex_{name}"),
                group => format!("rocex_{group}_{name}"),
            };
            let level = g.name == "daemon"
                && (DAEMON_GAUGES.contains(&name.as_str()) || name.ends_with("_ns"));
            let (kind, metric) = match level {
                true => ("gauge", stem),
                false => ("counter", format!("{stem}_total")),
            };
            let _ = writeln!(
                out,
                "# TYPE {metric} {kind}\n{metric}{{addr=\"{addr}\"}} {value}"
            );
        }
    }
    let _ = writeln!(out, "# TYPE rocex_qp_info gauge");
    for q in &s.qps {
        // The owner is a label: a process id is not a level to graph.
        let owner = q
            .counters
            .iter()
            .find(|(n, _)| n == CLIENT_PID)
            .map_or_else(String::new, |(_, pid)| format!(",client_pid=\"{pid}\""));
        let _ = writeln!(
            out,
            "rocex_qp_info{{addr=\"{addr}\",qpn=\"{}\",type=\"{}\",state=\"{}\"{owner}}} 1",
            q.qpn,
            q.qp_type.name(),
            q.state.name()
        );
    }
    // One family per QP counter name, its samples together, as the format requires.
    let names: Vec<&String> = s
        .qps
        .first()
        .map(|q| q.counters.iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let names = names.into_iter().filter(|n| *n != CLIENT_PID);
    for name in names {
        let (kind, metric) = match QP_GAUGES.contains(&name.as_str()) {
            true => ("gauge", format!("rocex_qp_{name}")),
            false => ("counter", format!("rocex_qp_{name}_total")),
        };
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for q in &s.qps {
            if let Some((_, v)) = q.counters.iter().find(|(n, _)| n == name) {
                let _ = writeln!(
                    out,
                    "{metric}{{addr=\"{addr}\",qpn=\"{}\",type=\"{}\"}} {v}",
                    q.qpn,
                    q.qp_type.name()
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_verbs::verbs::{QpState, QpType};
    use rocex_verbs::{QpStat, StatGroup};

    #[test]
    fn groups_and_qps_become_families_with_labels() {
        let s = Stats {
            groups: vec![
                StatGroup {
                    name: "engine".into(),
                    counters: vec![("sent_pkts".into(), 3)],
                },
                StatGroup {
                    name: "daemon".into(),
                    counters: vec![("clients".into(), 2), ("disconnects".into(), 1)],
                },
            ],
            qps: vec![
                QpStat {
                    qpn: 17,
                    qp_type: QpType::Rc,
                    state: QpState::Rts,
                    counters: vec![
                        ("sq_psn".into(), 5),
                        ("rq_psn".into(), 9),
                        ("client_pid".into(), 4242),
                        ("retransmitted_pkts".into(), 6),
                    ],
                },
                QpStat {
                    qpn: 18,
                    qp_type: QpType::Ud,
                    state: QpState::Init,
                    counters: vec![
                        ("sq_psn".into(), 7),
                        ("rq_psn".into(), 0),
                        ("client_pid".into(), 0),
                        ("retransmitted_pkts".into(), 0),
                    ],
                },
            ],
            next: 0,
        };
        let text = render("10.0.0.1", &s);
        for line in [
            "# TYPE rocex_sent_pkts_total counter",
            "rocex_sent_pkts_total{addr=\"10.0.0.1\"} 3",
            "# TYPE rocex_daemon_clients gauge",
            "# TYPE rocex_daemon_disconnects_total counter",
            "rocex_daemon_disconnects_total{addr=\"10.0.0.1\"} 1",
            "rocex_daemon_clients{addr=\"10.0.0.1\"} 2",
            "rocex_qp_info{addr=\"10.0.0.1\",qpn=\"18\",type=\"UD\",state=\"INIT\",client_pid=\"0\"} 1",
            "rocex_qp_info{addr=\"10.0.0.1\",qpn=\"17\",type=\"RC\",state=\"RTS\",client_pid=\"4242\"} 1",
            "rocex_qp_sq_psn{addr=\"10.0.0.1\",qpn=\"17\",type=\"RC\"} 5",
            "# TYPE rocex_qp_sq_psn gauge",
            "# TYPE rocex_qp_retransmitted_pkts_total counter",
            "rocex_qp_retransmitted_pkts_total{addr=\"10.0.0.1\",qpn=\"17\",type=\"RC\"} 6",
            "rocex_qp_retransmitted_pkts_total{addr=\"10.0.0.1\",qpn=\"18\",type=\"UD\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        // Each family's samples follow its TYPE line, uninterrupted.
        let sq: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with("rocex_qp_sq_psn"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(sq.len(), 2);
        assert_eq!(sq[1], sq[0] + 1, "{text}");
        assert!(!text.contains("rocex_qp_client_pid"), "{text}");
    }
}
