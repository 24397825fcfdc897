//! `rocexd --metrics ADDR`: a scrape over HTTP gives every counter of `Stat` in
//! Prometheus' text format, device-wide and per QP with labels (its client's pid among
//! them), matching what `Stat` itself says; other paths and methods are refused, and a taken address stops the daemon
//! at start.
//!
//! The exposition is read back by a parser written from the format's rules (one `# TYPE`
//! per family before its samples, `name{labels} value`), not by the daemon's own code, and
//! by Prometheus' own Python client's parser (Debian's python3-prometheus-client).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Daemon, T, loopback, ring_daemon, send_recv};
use rocex_testkit::listen::{self, Proto};

/// A daemon on `addr` serving its metrics on a port of 127.0.0.1 the kernel picks, and
/// that port once it listens.
fn with_metrics(addr: &str) -> (Daemon, u16) {
    let mut d = ring_daemon(addr, &["--metrics", "127.0.0.1:0"]);
    let at = listen::wait_bound(&mut d.child, Proto::Tcp, T, "rocexd's metrics endpoint");
    (d, at.port())
}

/// `METHOD path` over HTTP/1.1: the status line and the body.
fn http(port: u16, method: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the endpoint");
    s.set_read_timeout(Some(T)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a header and a body");
    let status = head.lines().next().unwrap().to_owned();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .unwrap();
    if method != "HEAD" {
        assert_eq!(body.len(), len, "Content-Length");
    }
    (status, body.to_owned())
}

/// Samples by `name{labels}`, checking the format's rules on the way.
fn parse(text: &str) -> BTreeMap<String, u64> {
    let mut samples = BTreeMap::new();
    let mut family = String::new();
    let mut seen = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            // Counters are named `..._total`, as Prometheus' conventions ask.
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
            assert!(!seen.contains(&name.to_owned()), "family {name} twice");
            seen.push(name.to_owned());
            family = name.to_owned();
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("name value");
        let name = series.split('{').next().unwrap();
        assert_eq!(name, family, "{line} outside its family");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name}"
        );
        samples.insert(series.to_owned(), value.parse().expect("an integer value"));
    }
    samples
}

#[test]
fn a_scrape_gives_every_counter_of_stat() {
    let (d, port) = with_metrics("127.0.9.71");
    let (mut x, mut y) = loopback(&d.sock);
    // Some traffic, so that the counters are not all zero.
    send_recv(&mut x, &mut y, 7);

    let (status, body) = http(port, "GET", "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let got = parse(&body);
    let stats = x.ctx.stats().unwrap();
    let addr = "addr=\"127.0.9.71\"";
    for g in &stats.groups {
        for (name, value) in &g.counters {
            let stem = match g.name.as_str() {
                "engine" => format!("rocex_{name}"),
                group => format!("rocex_{group}_{name}"),
            };
            let counter = format!("{stem}_total{{{addr}}}");
            let gauge = format!("{stem}{{{addr}}}");
            let scraped = *got
                .get(&counter)
                .or_else(|| got.get(&gauge))
                .unwrap_or_else(|| panic!("no {counter} or {gauge}"));
            // Traffic counters only grow between the scrape and Stat; levels stay.
            assert!(scraped <= *value || name.ends_with("_ns"), "{stem}");
        }
    }
    assert!(got[&format!("rocex_sent_pkts_total{{{addr}}}")] > 0);
    // The scraper's connection is a client: two endpoints and it.
    assert_eq!(got[&format!("rocex_daemon_clients{{{addr}}}")], 3);
    for q in [&x.qp, &y.qp] {
        let qpn = q.qpn();
        // Each QP names its client: this process.
        let pid = std::process::id();
        let info = format!(
            "rocex_qp_info{{{addr},qpn=\"{qpn}\",type=\"RC\",state=\"RTS\",client_pid=\"{pid}\"}}"
        );
        assert_eq!(got.get(&info), Some(&1), "{body}");
        let s = &stats.qps.iter().find(|s| s.qpn == qpn).unwrap().counters;
        let sq_psn = s.iter().find(|(n, _)| n == "sq_psn").unwrap().1;
        let series = format!("rocex_qp_sq_psn{{{addr},qpn=\"{qpn}\",type=\"RC\"}}");
        assert_eq!(got.get(&series), Some(&sq_psn), "{body}");
        // Its counts are counters (`parse` checks the `_total` of each counter family).
        for name in [
            "retransmitted_pkts",
            "rcvd_rnr_err",
            "send_rnr_err",
            "rcvd_seq_err",
            "nak_psn_sequence",
            "duplicate_request",
        ] {
            let value = s.iter().find(|(n, _)| n == name).expect(name).1;
            let series = format!("rocex_qp_{name}_total{{{addr},qpn=\"{qpn}\",type=\"RC\"}}");
            let scraped = *got
                .get(&series)
                .unwrap_or_else(|| panic!("no {series}:\n{body}"));
            assert!(scraped <= value, "{series}");
        }
    }

    let (status, body) = http(port, "HEAD", "/metrics");
    assert_eq!((status.as_str(), body.as_str()), ("HTTP/1.1 200 OK", ""));
    assert_eq!(http(port, "GET", "/").0, "HTTP/1.1 404 Not Found");
    assert_eq!(
        http(port, "POST", "/metrics").0,
        "HTTP/1.1 405 Method Not Allowed"
    );
    // A client that sends nothing and hangs up does not stop the endpoint.
    drop(TcpStream::connect(("127.0.0.1", port)).unwrap());
    assert_eq!(http(port, "GET", "/metrics").0, "HTTP/1.1 200 OK");
}

#[test]
fn a_taken_metrics_address_stops_the_daemon_at_start() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap().to_string();
    let sock = common::socket_in("metrics-taken");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocexd"))
        .args(["--addr", "127.0.9.72", "--metrics", &at, "--socket"])
        .arg(&sock)
        .env_remove("ROCEX_SOCKET")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = rocex_testkit::finish(out, Duration::from_secs(10), "rocexd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("rocexd: metrics endpoint {at}: ")),
        "{err}"
    );
    assert!(!sock.exists(), "the control socket was bound");
    let _ = std::fs::remove_dir_all(sock.parent().unwrap());
}

/// Prometheus' Python parser over `text`: one line per sample, `family type name
/// label=value,... value`, labels sorted.
const REFERENCE: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
        print(fam.name, fam.type, s.name, labels, int(s.value))
"#;

#[test]
fn prometheus_own_parser_reads_the_exposition() {
    let test = "prometheus_own_parser_reads_the_exposition";
    // Debian's interpreter, where Debian's package puts the module.
    let python = "/usr/bin/python3";
    let has_module = Command::new(python)
        .args(["-c", "import prometheus_client"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_module {
        rocex_testkit::cannot_run(test, "python3-prometheus-client (Debian's package)");
        return;
    }
    let (d, port) = with_metrics("127.0.9.73");
    let (mut x, mut y) = loopback(&d.sock);
    send_recv(&mut x, &mut y, 3);
    let (status, body) = http(port, "GET", "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let mut child = Command::new(python)
        .args(["-c", REFERENCE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = rocex_testkit::finish(child, T, "the reference parser");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the reference parser refused it: {err}\n{body}"
    );
    let parsed = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Vec<&str>> = parsed.lines().map(|l| l.split(' ').collect()).collect();
    // Every sample is read, each in a family with a declared type.
    assert_eq!(lines.len(), parse(&body).len(), "{parsed}");
    for l in &lines {
        assert!(["counter", "gauge"].contains(&l[1]), "{l:?}");
    }
    let find = |name: &str, labels: &str| {
        lines
            .iter()
            .find(|l| l[2] == name && l[3] == labels)
            .unwrap_or_else(|| panic!("no {name}{{{labels}}} in\n{parsed}"))
    };
    let stats = x.ctx.stats().unwrap();
    let sent = stats.get_counter("engine", "sent_pkts");
    let l = find("rocex_sent_pkts_total", "addr=127.0.9.73");
    assert_eq!(l[1], "counter");
    assert!(l[4].parse::<u64>().unwrap() <= sent.unwrap() && l[4] != "0");
    assert_eq!(find("rocex_daemon_clients", "addr=127.0.9.73")[1], "gauge");
    let qpn = y.qp.qpn();
    let pid = std::process::id();
    let info = format!("addr=127.0.9.73,client_pid={pid},qpn={qpn},state=RTS,type=RC");
    assert_eq!(find("rocex_qp_info", &info)[4], "1");
    let rq = format!("addr=127.0.9.73,qpn={qpn},type=RC");
    assert_eq!(find("rocex_qp_rq_wqes", &rq)[1], "gauge");
}
