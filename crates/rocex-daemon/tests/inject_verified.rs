//! Two `rocexd` with default flags (no `--peers-are-rocex`) in two network namespaces
//! (`icx0`, `icx1`) joined by a veth pair (198.18.211.1 and 198.18.211.2/24, MTU 9000),
//! both injecting loss, duplication, reordering and single-bit corruption into everything
//! they send. `rocex perf` WRITE, READ, SEND and atomic bandwidth runs between them must
//! verify every byte: the UDP backend checks every received ICRC by solving for the IPv4
//! identification it cannot see, so no corrupted packet reaches memory.
//!
//! Needs root and `ip`: without them the test fails when `CI` is set and skips with a
//! notice otherwise. `rocex perf` is the `rocex` next to `rocexd` (built by `cargo build -p
//! rocex-cli` when first needed), or `$ROCEX_BIN`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Daemon, Opts, socket_in};
use rocex_verbs::Context;

const NS: [&str; 2] = ["icx0", "icx1"];
const VETH: [&str; 2] = ["icxv0", "icxv1"];
const ADDR: [&str; 2] = ["198.18.211.1", "198.18.211.2"];
/// The faults of the report this test answers, on both daemons.
const FAULTS: &str = "loss=0.1,dup=0.02,reorder=0.05,corrupt=0.01";
/// Message size of every run but the atomic one (always 8 bytes).
const SIZE: &str = "16384";

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// The namespaces and the veth pair, removed on drop.
struct Net;

impl Net {
    /// `None` when the machine lacks what the test needs (`rocex_testkit::cannot_run`).
    fn up(test: &str) -> Option<Self> {
        if !rocex_testkit::is_root() {
            rocex_testkit::cannot_run(test, "root (network namespaces)");
            return None;
        }
        if Command::new("ip").arg("-V").output().is_err() {
            rocex_testkit::cannot_run(test, "`ip` (iproute2)");
            return None;
        }
        remove_namespaces();
        let net = Self;
        for ns in NS {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", VETH[0], "netns", NS[0], "type", "veth", "peer", "name", VETH[1],
            "netns", NS[1],
        ]);
        for i in 0..2 {
            let cidr = format!("{}/24", ADDR[i]);
            ip(&["-n", NS[i], "addr", "add", &cidr, "dev", VETH[i]]);
            ip(&["-n", NS[i], "link", "set", VETH[i], "mtu", "9000", "up"]);
        }
        Some(net)
    }
}

/// Deleting a namespace deletes the veth end in it, and with it the pair.
fn remove_namespaces() {
    for ns in NS {
        let _ = Command::new("ip")
            .args(["netns", "del", ns])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        remove_namespaces();
    }
}

/// The `rocex` binary: `$ROCEX_BIN`, else built next to `rocexd`.
fn rocex_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("ROCEX_BIN") {
        return PathBuf::from(p);
    }
    let dir = Path::new(env!("CARGO_BIN_EXE_rocexd"))
        .parent()
        .expect("the binaries' directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "-q", "-p", "rocex-cli", "--bin", "rocex"]);
    if dir.ends_with("release") {
        build.arg("--release");
    }
    run(&mut build);
    dir.join("rocex")
}

/// Waits for `child` at most `limit` (a hang is a failure, not a wait), killing it after.
fn finish(mut child: Child, limit: Duration, who: &str) -> Output {
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{who} did not finish within {} s: {}",
                limit.as_secs(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// The flat JSON object `rocex perf --json` printed, as its keys and raw values.
fn perf_json(o: &Output, who: &str) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{who} failed: {}{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    let line = text.trim();
    let body = line
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("{who}: not one JSON object: {text}"));
    body.split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once(':')
                .unwrap_or_else(|| panic!("{who}: bad JSON member {kv:?}"));
            (k.trim().trim_matches('"').to_owned(), v.trim().to_owned())
        })
        .collect()
}

/// `rocex perf OP bw --verify --json` with its server on daemon 1 and its client on
/// daemon 0 (the exchange over 127.0.0.1 in the root namespace); both ends must report
/// every iteration verified.
fn perf(bin: &Path, d: &[Daemon; 2], op: &str, iters: u64) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
        .to_string();
    let iters_arg = iters.to_string();
    let cmd = |sock: &Path| {
        let mut c = Command::new(bin);
        c.args(["perf", op, "bw", "-s", SIZE, "-n", &iters_arg, "-p", &port])
            // A completion every 10 requests: a READ whose response is lost within its
            // message waits for the 67 ms ACK timeout (as rxe does), and the client gives
            // up after 30 s without a completion.
            .args(["-Q", "10", "--verify", "--json", "--socket"])
            .arg(sock)
            .env_remove("ROCEX_SOCKET")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let server = cmd(&d[1].sock).spawn().expect("start the perf server");
    std::thread::sleep(Duration::from_millis(200));
    let client = cmd(&d[0].sock)
        .arg("127.0.0.1")
        .spawn()
        .expect("start the perf client");
    let limit = Duration::from_secs(300);
    let c = perf_json(&finish(client, limit, "perf client"), "perf client");
    let s = perf_json(&finish(server, limit, "perf server"), "perf server");
    let want = [
        ("op", format!("\"{op}\"")),
        ("verified", "true".into()),
        ("errors", "0".into()),
        ("iters", iters.to_string()),
    ];
    for (who, v) in [("client", &c), ("server", &s)] {
        for (k, val) in &want {
            assert_eq!(v.get(*k), Some(val), "{op} {who}: {k} in {v:?}");
        }
    }
}

/// The counter `name` of group `group` in the daemon's statistics.
fn counter(ctx: &Context, group: &str, name: &str) -> u64 {
    let stats = ctx.stats().expect("stats");
    let g = stats
        .groups
        .iter()
        .find(|g| g.name == group)
        .unwrap_or_else(|| panic!("no group {group}"));
    g.counters
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {group}.{name}"))
        .1
}

#[test]
fn every_op_verified_through_injected_faults_without_peers_are_rocex() {
    let Some(_net) = Net::up("every_op_verified_through_injected_faults") else {
        return;
    };
    let bin = rocex_bin();
    let d = [0, 1].map(|i| {
        let opts = Opts {
            netns: Some(NS[i]),
            extra: &["--inject", FAULTS],
            log: true,
        };
        Daemon::start_with(ADDR[i], &socket_in(&format!("inject-{i}")), opts)
    });
    // About 20 s each in a debug build; READ's lost responses wait for the ACK timeout.
    perf(&bin, &d, "write", 2000);
    perf(&bin, &d, "read", 600);
    perf(&bin, &d, "send", 2000);
    perf(&bin, &d, "atomic", 2000);
    for dm in &d {
        let ctx = Context::open(&dm.sock).expect("open");
        let corrupted = counter(&ctx, "inject", "corrupted");
        // The peer's corrupted packets were caught by the ICRC check and dropped ...
        let dropped = counter(&ctx, "engine", "drop_icrc");
        assert!(
            dropped > 0,
            "no bad ICRC dropped ({corrupted} corrupted here)"
        );
        // ... and every good packet checked under the identifications rocex sends with.
        assert_eq!(counter(&ctx, "backend", "icrc_foreign_id"), 0);
    }
}
