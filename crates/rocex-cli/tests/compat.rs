//! Command lines written for perftest and `ibv_*_pingpong` run unchanged on `rocex perf`
//! and `rocex pingpong`: each spelling is checked against the stock tool's own usage text
//! (Debian's perftest and ibverbs-utils), then run between two rocex ends with the meaning
//! the stock tool gives it (`-a` every size from 2 to 2^23, `--report_gbits` in 10^9
//! bits per second, `-c` the stock buffer check), and perftest's output format.
//!
//! The perf pairs run on two `rocexd` (127.0.9.31 and 127.0.9.32); the ping-pongs have an
//! engine each on 127.0.0.1 and 127.0.0.2. They bind RoCE's port there, so they run one at
//! a time.

mod common;
mod run;

use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use common::{Daemon, daemon};
use run::{Ran, finish, rocex, serve, spawn};

/// Generous: a debug build moves 8 MiB messages slowly.
const LIMIT: Duration = Duration::from_secs(240);

/// The stock tool's usage text (stdout and stderr: the tools differ), or `None` after
/// recording why `test` cannot run.
fn usage(test: &str, tool: &str, package: &str) -> Option<String> {
    rocex_testkit::require_tool(test, tool)?;
    let out = Command::new(tool)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("run {tool} ({package}): {e}"));
    Some(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// The column titles rocex prints, as the stock tools hold them (their format strings).
const TITLES: [(&str, &str); 4] = [
    (
        "ib_write_bw",
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]",
    ),
    (
        "ib_write_bw",
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    ),
    (
        "ib_write_lat",
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]",
    ),
    (
        "ib_write_lat",
        " #bytes        #iterations       t_avg[usec]    tps average",
    ),
];

#[test]
fn the_tables_are_perftests() {
    for (tool, title) in TITLES {
        let Some(bin) = rocex_testkit::require_tool("the_tables_are_perftests", tool) else {
            return;
        };
        let bytes = std::fs::read(&bin).unwrap();
        assert!(
            bytes.windows(title.len()).any(|w| w == title.as_bytes()),
            "{tool} does not print {title:?}"
        );
    }
}

#[test]
fn perftest_spellings_are_perftests() {
    let test = "perftest_spellings_are_perftests";
    for (tool, stock) in [
        ("ib_write_bw", "-a, --all  Run sizes from 2 till 2^23"),
        ("ib_write_bw", "-q, --qp=<num of qp's>"),
        ("ib_write_bw", "-I, --inline_size=<size>"),
        ("ib_write_bw", "-F, --CPU-freq"),
        (
            "ib_write_bw",
            "--report_gbits  Report Max/Average BW of test in Gbit/sec",
        ),
        ("ib_write_bw", "-D, --duration"),
        ("ib_write_bw", "-i, --ib-port=<port>"),
        ("ib_write_bw", "-Q, --cq-mod"),
        (
            "ib_atomic_bw",
            "-A, --atomic_type=<type>  type of atomic operation from {CMP_AND_SWAP,FETCH_AND_ADD}",
        ),
    ] {
        let Some(text) = usage(test, tool, "perftest") else {
            return;
        };
        assert!(
            text.contains(stock),
            "{tool} --help lacks {stock:?}:\n{text}"
        );
    }
    for stock in [
        "-i, --ib-port=<port>",
        "-l, --sl=<sl>",
        "-e, --events",
        "-c, --chk",
        "-g, --gid-idx=<gid index>",
    ] {
        let Some(text) = usage(test, "ibv_rc_pingpong", "ibverbs-utils") else {
            return;
        };
        assert!(
            text.contains(stock),
            "ibv_rc_pingpong lacks {stock:?}:\n{text}"
        );
    }
}

/// A perf server and client, each on its own daemon, with `args` on both sides; returns
/// (client, server).
fn perf_pair(d: &[Daemon; 2], args: &[&str]) -> (Ran, Ran) {
    let side = |sock: &std::path::Path| {
        let mut c = rocex();
        c.arg("perf").args(args).arg("--socket").arg(sock);
        c
    };
    let (server, port) = serve(&mut side(&d[1].sock));
    let client = finish(
        spawn(side(&d[0].sock).args(["-p", &port, "127.0.0.1"])),
        LIMIT,
    );
    let server = finish(server, LIMIT);
    assert_eq!(client.code, Some(0), "client of {args:?}: {client}");
    assert_eq!(server.code, Some(0), "server of {args:?}: {server}");
    (client, server)
}

/// The two daemons a perf test runs on, and the lock that keeps it the only test using
/// their addresses (and RoCE's port) meanwhile.
fn daemons() -> (MutexGuard<'static, ()>, [Daemon; 2]) {
    (
        serial(),
        [daemon("127.0.9.31", &[]), daemon("127.0.9.32", &[])],
    )
}

/// Tests that bind the same addresses take turns.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The result rows of perftest's table: lines that start with a number.
fn rows(out: &str) -> Vec<Vec<f64>> {
    out.lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
        .collect()
}

/// The first column of the table: each row's message size.
fn sizes(out: &str) -> Vec<f64> {
    rows(out).iter().map(|row| row[0]).collect()
}

fn all_sizes() -> Vec<f64> {
    (1..=23).map(|i| f64::from(1u32 << i)).collect()
}

#[test]
fn write_bw_all_sizes_in_gbits() {
    let (_g, d) = daemons();
    let args = [
        "write",
        "bw",
        "-a",
        "--report_gbits",
        "-n",
        "5",
        "--qp",
        "1",
        "-F",
        "-x",
        "0",
        "-d",
        "rocex0",
        "-i",
        "1",
        "--verify",
    ];
    let (c, s) = perf_pair(&d, &args);
    assert!(c.stdout.contains(&format!("{}\n", TITLES[1].1)), "{c}");
    let r = rows(&c.stdout);
    assert_eq!(sizes(&c.stdout), all_sizes(), "{c}");
    for row in &r {
        assert_eq!(row[1], 5.0, "{c}");
        // Gb/s is 10^9 bits a second: the message rate times the size says the same.
        let (size, avg, mpps) = (row[0], row[3], row[4]);
        if size >= 65536.0 {
            let want = mpps * 1e6 * size * 8.0 / 1e9;
            // Both columns are rounded: Gb/s to 0.01, Mpps to 10^-6 (a message a second).
            let rounding = 0.005 + 0.5 * size * 8.0 / 1e9;
            assert!(
                (avg - want).abs() <= rounding + want * 0.01,
                "{size} B: {avg} Gb/s, but {mpps} Mpps is {want} Gb/s: {c}"
            );
        }
    }
    // The passive server prints the client's last report, in the same unit.
    let sr = rows(&s.stdout);
    assert_eq!(sr.len(), 1, "{s}");
    assert_eq!(sr[0][0], 8388608.0, "{s}");
    assert!((sr[0][3] - r[22][3]).abs() <= 0.011, "{s}\n{c}");
    assert!(s.stdout.contains(" verify: ok"), "{s}");
}

#[test]
fn write_lat_all_sizes_on_both_sides() {
    let (_g, d) = daemons();
    let (c, s) = perf_pair(&d, &["write", "lat", "-a", "-n", "5", "-F", "--verify"]);
    for side in [&c, &s] {
        assert_eq!(sizes(&side.stdout), all_sizes(), "{side}");
        assert!(side.stdout.contains(" verify: ok"), "{side}");
        assert!(
            side.stdout.contains(&format!("{}\n", TITLES[2].1)),
            "{side}"
        );
    }
}

#[test]
fn read_bw_all_sizes() {
    let (_g, d) = daemons();
    let (c, s) = perf_pair(&d, &["read", "bw", "-a", "-n", "5", "--verify"]);
    assert_eq!(sizes(&c.stdout), all_sizes(), "{c}");
    assert!(c.stdout.contains(&format!("{}\n", TITLES[0].1)), "{c}");
    assert!(c.stdout.contains(" verify: ok"), "{c}");
    assert!(s.stdout.contains(" verify: ok"), "{s}");
}

#[test]
fn send_all_sizes_with_a_handshake_each() {
    let (_g, d) = daemons();
    for test in ["bw", "lat"] {
        let (c, s) = perf_pair(&d, &["send", test, "-a", "-n", "5", "--verify"]);
        for side in [&c, &s] {
            assert_eq!(sizes(&side.stdout), all_sizes(), "send {test}: {side}");
            assert!(side.stdout.contains(" verify: ok"), "send {test}: {side}");
        }
    }
}

#[test]
fn duration_on_both_sides_of_every_test() {
    let (_g, d) = daemons();
    for (op, test) in [
        ("send", "bw"),
        ("send", "lat"),
        ("write", "lat"),
        ("read", "lat"),
    ] {
        let (c, s) = perf_pair(&d, &[op, test, "-D", "1", "-s", "64", "--verify", "--json"]);
        for (who, side) in [("client", &c), ("server", &s)] {
            let v: serde_json::Value = serde_json::from_str(side.stdout.trim())
                .unwrap_or_else(|e| panic!("{op} {test}: {e}: {side}"));
            assert_eq!(v["verified"], true, "{op} {test} {who}: {side}");
            let passive = who == "server" && op == "read";
            if !passive {
                assert!(
                    v["iters"].as_u64().unwrap() > 0,
                    "{op} {test} {who}: {side}"
                );
            }
        }
    }
}

#[test]
fn a_timed_latency_test_prints_perftests_timed_table() {
    let (_g, d) = daemons();
    let (c, s) = perf_pair(&d, &["write", "lat", "-D", "1", "-s", "64"]);
    for side in [&c, &s] {
        assert!(
            side.stdout.contains(&format!("{}\n", TITLES[3].1)),
            "{side}"
        );
        let r = rows(&side.stdout);
        assert_eq!(r.len(), 1, "{side}");
        // size, iterations, mean one-way latency, transactions a second
        assert_eq!((r[0].len(), r[0][0]), (4, 64.0), "{side}");
        assert!(r[0][1] > 0.0 && r[0][2] > 0.0 && r[0][3] > 0.0, "{side}");
    }
}

#[test]
fn atomic_and_inline_spellings_run() {
    let (_g, d) = daemons();
    for args in [
        &[
            "atomic",
            "bw",
            "--atomic_type",
            "CMP_AND_SWAP",
            "-n",
            "100",
            "--verify",
            "--json",
        ][..],
        &[
            "atomic",
            "lat",
            "-A",
            "FETCH_AND_ADD",
            "-n",
            "50",
            "--verify",
            "--json",
        ],
        &[
            "send",
            "bw",
            "--inline_size",
            "64",
            "-s",
            "64",
            "-n",
            "200",
            "--verify",
            "--json",
        ],
        &[
            "write",
            "bw",
            "-D",
            "1",
            "--report_gbits",
            "-s",
            "4096",
            "--verify",
            "--json",
        ],
    ] {
        let (c, s) = perf_pair(&d, args);
        for side in [&c, &s] {
            let v: serde_json::Value = serde_json::from_str(side.stdout.trim())
                .unwrap_or_else(|e| panic!("{args:?}: {e}: {side}"));
            assert_eq!(v["verified"], true, "{args:?}: {side}");
            assert_eq!(v["errors"], 0, "{args:?}: {side}");
        }
    }
}

/// A ping-pong server on 127.0.0.2 with `server` options and a client with `client`
/// options; returns (client, server).
fn pingpong_pair(server: &[&str], client: &[&str]) -> (Ran, Ran) {
    let (srv, port) = serve(rocex().arg("pingpong").args(server));
    let cli = finish(
        spawn(
            rocex()
                .arg("pingpong")
                .args(client)
                .args(["-p", &port, "127.0.0.2"]),
        ),
        LIMIT,
    );
    (cli, finish(srv, LIMIT))
}

#[test]
fn pingpong_spellings_and_the_buffer_check() {
    let _g = serial();
    let stock = [
        "-i", "1", "-l", "3", "-e", "-c", "-g", "0", "-d", "rxe0", "-n", "20",
    ];
    for extra in [&["-s", "10000"][..], &["--ud", "-s", "4096"]] {
        let args: Vec<&str> = stock.iter().chain(extra).copied().collect();
        let (c, s) = pingpong_pair(&args, &args);
        assert_eq!(c.code, Some(0), "client {args:?}: {c}");
        assert_eq!(s.code, Some(0), "server {args:?}: {s}");
        assert!(!s.stdout.contains("invalid data"), "{s}");
        // ibv_rc_pingpong's closing lines.
        assert!(s.stdout.contains(" iters in "), "{s}");
        assert!(s.stdout.contains(" Mbit/sec"), "{s}");
    }
    // A client that does not mark its pages leaves the server's buffer as the stock tool
    // fills it: every page is reported, as ibv_rc_pingpong reports it.
    let (c, s) = pingpong_pair(
        &["-c", "-s", "10000", "-n", "5"],
        &["-s", "10000", "-n", "5"],
    );
    assert_eq!(c.code, Some(0), "{c}");
    assert_eq!(s.code, Some(1), "{s}");
    for page in 0..3 {
        assert!(
            s.stdout.contains(&format!("invalid data in page {page}\n")),
            "{s}"
        );
    }
}
