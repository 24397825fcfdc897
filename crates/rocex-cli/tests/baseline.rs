//! `rocex baseline` on loopback: the sink counts what the blaster sent, the ping gets every
//! echo back, and both report in the JSON keys `proto-tests/bench/compare.sh` reads.

use std::process::{Command, Stdio};
use std::time::Duration;

use rocex_testkit::listen::{self, Proto};

fn rocex() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocex"))
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// Runs the server mode `server[0]` on port 0 of `ip` with the rest of `server`, then,
/// once it has bound, the client mode `client[0]` against that port with the rest of
/// `client`; their reports.
fn pair(ip: &str, server: &[&str], client: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let mut srv = rocex()
        .args(["baseline", server[0], &format!("{ip}:0")])
        .args(&server[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server side");
    let at = listen::wait_bound(&mut srv, Proto::Udp, Duration::from_secs(30), server[0]);
    let cli = json(
        &rocex()
            .args(["baseline", client[0], &at.to_string()])
            .args(&client[1..])
            .output()
            .expect("run the client"),
    );
    (
        json(&srv.wait_with_output().expect("the server's report")),
        cli,
    )
}

#[test]
fn sink_counts_what_blast_sends() {
    let (sink, blast) = pair("127.0.3.2", &["sink", "10"], &["blast", "1024", "0.3"]);
    let sent = blast["sent"].as_u64().expect("sent");
    let received = sink["received"].as_u64().expect("received");
    assert!(sent > 100, "{blast}");
    // The first datagram opens the sink's window and is not counted; loopback may drop
    // some of a burst, never invent any.
    assert!(received > 0 && received < sent, "{sink} / {blast}");
    assert!(sink["mpps"].as_f64().is_some_and(|m| m > 0.0), "{sink}");
    assert!(
        sink["gbps_payload"].as_f64().is_some_and(|g| g > 0.0),
        "{sink}"
    );
}

#[test]
fn ping_gets_every_echo_back() {
    let (pong, ping) = pair("127.0.3.3", &["pong", "20"], &["ping", "40", "500"]);
    // 500 timed round trips after 50 to warm up; the client's one-byte "stop" ends the pong.
    assert_eq!(pong["echoed"], 550, "{pong}");
    assert_eq!(ping["iters"], 500, "{ping}");
    let q = |k: &str| ping[k].as_f64().unwrap_or(f64::NAN);
    assert!(q("rtt_us_min") > 0.0, "{ping}");
    assert!(q("rtt_us_min") <= q("rtt_us_p50"), "{ping}");
    assert!(q("rtt_us_p50") <= q("rtt_us_p99"), "{ping}");
    assert!(q("rtt_us_p99") <= q("rtt_us_max"), "{ping}");
    assert!(q("recv_call_us") > 0.0, "{ping}");
}

#[test]
fn icrc_reports_its_rate() {
    let out = rocex()
        .args(["baseline", "icrc", "0.2"])
        .output()
        .expect("run rocex baseline icrc");
    let j = json(&out);
    let (n, bytes) = (
        j["packets"].as_f64().unwrap(),
        j["packet_bytes"].as_f64().unwrap(),
    );
    let (secs, ns, gbps) = (
        j["seconds"].as_f64().unwrap(),
        j["ns_per_packet"].as_f64().unwrap(),
        j["gbps"].as_f64().unwrap(),
    );
    assert_eq!(bytes, 4108.0, "{j}");
    assert!(n >= 256.0 && secs >= 0.2, "{j}");
    // The three rates are one measurement.
    assert!((n * ns / 1e9 - secs).abs() < secs * 1e-6, "{j}");
    assert!((bytes * 8.0 / ns - gbps).abs() < gbps * 1e-6, "{j}");
}
