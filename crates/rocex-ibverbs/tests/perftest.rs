//! The whole matrix of Debian's programs under `rocex run` on both ends (two rocexd on
//! 127.0.N.1 and .2): the ibverbs-utils ping-pongs on RC, UC and UD, at several sizes,
//! with completion events and (RC) with the `ibv_wr_*` API and a data check, and perftest's bandwidth and latency tests of every operation
//! with defaults, with four QPs and at 4096 bytes.

mod common;

use common::{client_server, pair, pingpong, ready};

/// The result row of a perftest run: its first two columns are the size and iterations.
fn result_row<'a>(out: &'a str, size: &str, iters: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().take(2).eq([size, iters]))
        .unwrap_or_else(|| panic!("no {size} B x {iters} result row:\n{out}"))
}

#[test]
fn ibverbs_utils_ping_pongs() {
    let progs = ["ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong"];
    if !ready(&progs) {
        return;
    }
    let d = pair(30);
    let runs: [(&str, &[&str]); 8] = [
        ("ibv_rc_pingpong", &["-s", "1"]),
        // The ibv_qp_ex work-request API, with the received bytes checked.
        ("ibv_rc_pingpong", &["-N", "-c", "-s", "5000"]),
        ("ibv_rc_pingpong", &["-s", "65536", "-m", "4096"]),
        ("ibv_rc_pingpong", &["-s", "3000", "-m", "256", "-e"]),
        ("ibv_uc_pingpong", &["-s", "4096", "-m", "1024"]),
        ("ibv_uc_pingpong", &["-s", "2048", "-e"]),
        ("ibv_ud_pingpong", &["-s", "1024"]),
        ("ibv_ud_pingpong", &["-s", "2048", "-e"]),
    ];
    for (prog, extra) in runs {
        pingpong(&d, 30, prog, "100", extra);
    }
}

/// ibv_srq_pingpong: 8 QPs (4 with events) sharing one receive queue, which the
/// library keeps (rocexd has none).
#[test]
fn ibv_srq_pingpong_both_ends() {
    if !ready(&["ibv_srq_pingpong"]) {
        return;
    }
    let d = pair(31);
    for extra in [
        &["-q", "8", "-s", "4096"][..],
        &["-e", "-q", "4", "-s", "2000"][..],
    ] {
        pingpong(&d, 31, "ibv_srq_pingpong", "300", extra);
    }
}

/// Runs each of `tests` with 200 iterations per QP (`qps` QPs) and checks its result row.
fn perftest(n: u8, port: &str, tests: &[&str], size: &str, qps: u32, extra: &[&str]) {
    if !ready(tests) {
        return;
    }
    let d = pair(n);
    for t in tests {
        let mut args = vec!["-n", "200", "-p", port];
        args.extend_from_slice(extra);
        let (c, _) = client_server(&d, n, t, &args, &args);
        let row = result_row(&c, size, &(200 * qps).to_string());
        assert!(row.split_whitespace().count() >= 4, "{t}: {row}");
    }
}

#[test]
fn perftest_bandwidth_defaults() {
    perftest(
        32,
        "19532",
        &["ib_write_bw", "ib_read_bw", "ib_send_bw"],
        "65536",
        1,
        &[],
    );
    perftest(32, "19532", &["ib_atomic_bw"], "8", 1, &[]);
}

#[test]
fn perftest_latency_defaults() {
    let lat = ["ib_write_lat", "ib_read_lat", "ib_send_lat"];
    perftest(33, "19533", &lat, "2", 1, &[]);
    perftest(33, "19533", &["ib_atomic_lat"], "8", 1, &[]);
}

#[test]
fn perftest_four_qps() {
    let tests = ["ib_write_bw", "ib_read_bw", "ib_send_bw"];
    perftest(34, "19534", &tests, "65536", 4, &["-q", "4"]);
}

#[test]
fn perftest_at_4096_bytes_mtu_4096() {
    let tests = [
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_write_lat",
        "ib_send_lat",
    ];
    perftest(
        35,
        "19535",
        &tests,
        "4096",
        1,
        &["-s", "4096", "-m", "4096"],
    );
}

/// rocexd dying under a running program gives it an error, not a hang: ib_write_bw's
/// client, in the middle of a 30-second run, fails instead of completing once its daemon
/// is killed.
#[test]
fn a_dead_daemon_ends_the_program_with_an_error() {
    if !ready(&["ib_write_bw"]) {
        return;
    }
    let mut d = pair(36);
    let args = ["-D", "30", "-p", "19536"];
    let mut server = common::under_rocex(&d[1].sock, "ib_write_bw", &args)
        .spawn()
        .unwrap();
    common::listening(&mut server, "ib_write_bw server");
    let mut cargs = args.to_vec();
    cargs.push("127.0.36.2");
    let client = common::under_rocex(&d[0].sock, "ib_write_bw", &cargs)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    d[0].kill();
    let c = common::finish(client, "ib_write_bw client");
    let _ = common::finish(server, "ib_write_bw server");
    // Had it not noticed, it would have finished its 30 seconds successfully.
    assert!(!c.status.success(), "{}", common::text(&c));
}
