//! Mixed ends: Debian's programs under `rocex run` on one rocex host against rocex's own
//! tools on the other (two namespaces on a veth pair, each test its own), in both roles.
//! `rocex pingpong` speaks ibv_rc_pingpong's and ibv_ud_pingpong's out-of-band exchange
//! and runs its own engine in its process (so its host has no rocexd); `rocex perf` speaks
//! perftest's and runs on the rocexd of its host (`--socket`).
//!
//! What is checked is what each end can know: both exit 0 after their full count, and the
//! received bytes where the tools check them (`-c`: each page's first byte as the stock
//! tools write it). perftest fills its buffers with `rand()`, so against it `rocex perf`
//! has no pattern to verify; the result row shows the count each side completed.
//!
//! Needs root and `ip`: without them it prints `SKIPPED:`, or fails when `CI` is set.

mod common;

use std::process::Command;

use common::netns::{Net, Pair};
use common::{bins, ready, serve_then_connect};

static PINGPONG: Pair = Pair {
    ns: ["ribmA", "ribmB"],
    veth: ["ribm0", "ribm1"],
    addr: ["198.18.211.1", "198.18.211.2"],
};

static PERF: Pair = Pair {
    ns: ["ribpA", "ribpB"],
    veth: ["ribp0", "ribp1"],
    addr: ["198.18.212.1", "198.18.212.2"],
};

/// `rocex SUBCOMMAND ARGS...` in host 1.
fn rocex(net: &Net, args: &[&str]) -> Command {
    let mut c = net.cmd(1, &bins().0);
    c.args(args);
    c
}

/// ibv_rc_pingpong (with the data check, and with completion events) and ibv_ud_pingpong
/// through the drop-in on host 0 against `rocex pingpong` on host 1, each end serving once.
#[test]
fn ibverbs_utils_against_rocex_pingpong() {
    if !ready(&["ibv_rc_pingpong", "ibv_ud_pingpong"]) {
        return;
    }
    let Some(net) = Net::up(&PINGPONG, "ibverbs_utils_against_rocex_pingpong") else {
        return;
    };
    let d = net.daemon(0);
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            "ibv_rc_pingpong",
            &["-c", "-s", "4096"],
            &["-c", "-s", "4096"],
        ),
        (
            "ibv_rc_pingpong",
            &["-c", "-s", "65536", "-m", "4096"],
            &["-c", "-s", "65536", "-m", "4096"],
        ),
        ("ibv_rc_pingpong", &["-e", "-s", "3000"], &["-s", "3000"]),
        ("ibv_ud_pingpong", &["-s", "2048"], &["--ud", "-s", "2048"]),
    ];
    for (prog, dropin, ours) in cases {
        let mut dargs = vec!["-g", "1", "-n", "200", "-p", "19540"];
        dargs.extend_from_slice(dropin);
        let mut pargs = vec!["pingpong", "-n", "200", "-p", "19540"];
        pargs.extend_from_slice(ours);
        for dropin_serves in [true, false] {
            let what = format!("{prog} {dropin:?}, drop-in serving: {dropin_serves}");
            let (s, c) = if dropin_serves {
                let mut p = rocex(&net, &pargs);
                p.arg(net.pair().addr[0]);
                serve_then_connect(&what, net.under_rocex(0, &d, prog, &dargs), p)
            } else {
                let mut a = dargs.clone();
                a.push(net.pair().addr[1]);
                serve_then_connect(&what, rocex(&net, &pargs), net.under_rocex(0, &d, prog, &a))
            };
            for t in [&s, &c] {
                assert!(t.contains("200 iters in"), "{what}: {t}");
                assert!(!t.contains("invalid data"), "{what}: {t}");
            }
        }
    }
}

/// The first line of `out` whose first two columns are `size` and `iters`: a perftest
/// result row, which `rocex perf` prints alike.
fn has_row(out: &str, size: &str, iters: &str) -> bool {
    out.lines()
        .any(|l| l.split_whitespace().take(2).eq([size, iters]))
}

/// perftest's bandwidth and latency tests of each operation through the drop-in on host 0
/// against `rocex perf` on host 1's rocexd, each end serving once.
#[test]
fn perftest_against_rocex_perf() {
    let cases: [(&str, &[&str], &str); 7] = [
        ("ib_write_bw", &["write", "bw"], "65536"),
        ("ib_read_bw", &["read", "bw"], "65536"),
        ("ib_send_bw", &["send", "bw"], "65536"),
        ("ib_atomic_bw", &["atomic", "bw"], "8"),
        ("ib_write_lat", &["write", "lat"], "2"),
        ("ib_send_lat", &["send", "lat"], "2"),
        ("ib_read_lat", &["read", "lat"], "2"),
    ];
    if !ready(&cases.map(|c| c.0)) {
        return;
    }
    let Some(net) = Net::up(&PERF, "perftest_against_rocex_perf") else {
        return;
    };
    let d = [net.daemon(0), net.daemon(1)];
    for (prog, op, size) in cases {
        let dargs = ["-n", "300", "-p", "19541"];
        let mut pargs = vec!["perf"];
        pargs.extend_from_slice(op);
        pargs.extend(["-n", "300", "-p", "19541", "--socket"]);
        let sock = d[1].sock.to_str().unwrap();
        pargs.push(sock);
        for dropin_serves in [true, false] {
            let what = format!("{prog} against rocex perf, drop-in serving: {dropin_serves}");
            let (_, c) = if dropin_serves {
                let mut p = rocex(&net, &pargs);
                p.arg(net.pair().addr[0]);
                serve_then_connect(&what, net.under_rocex(0, &d[0], prog, &dargs), p)
            } else {
                let mut a = dargs.to_vec();
                a.push(net.pair().addr[1]);
                serve_then_connect(
                    &what,
                    rocex(&net, &pargs),
                    net.under_rocex(0, &d[0], prog, &a),
                )
            };
            // The client reports the run: every iteration completed.
            assert!(
                has_row(&c, size, "300"),
                "{what}: no {size} B x 300 row:\n{c}"
            );
        }
    }
}
