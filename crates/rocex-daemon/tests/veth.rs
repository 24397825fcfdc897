//! Two `rocexd` in two network namespaces (`h3a`, `h3b`) joined by a veth pair
//! (198.18.203.1 and 198.18.203.2/24, MTU 9000), made and removed by each test
//! (`common::netns`); `rocex perf` runs between them (`common::perf`).
//!
//! Needs root and `ip`: without them a test fails when `CI` is set and skips with a notice
//! otherwise. The tests share the namespace names and addresses, so they run one at a time.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{Layout, Net};
use common::perf::perf;
use common::{Daemon, End, T, end, every_op, ok, pair_at, pattern, post_garbage_slots};
use common::{counter, post_undefined_opcode, read_back, send_recv, write_burst};
use rocex_verbs::Context;
use rocex_verbs::verbs::{Mtu, SendOp, WcOpcode};

const LAYOUT: Layout = Layout {
    ns: ["h3a", "h3b"],
    veth: ["h3v0", "h3v1"],
    addr: ["198.18.203.1", "198.18.203.2"],
};

/// Every backend `rocexd --backend` names.
const BACKENDS: [&str; 3] = ["udp", "afpacket", "uring"];

/// Ends on the two daemons, connected at path MTU 4096.
fn across(d: &[Daemon; 2]) -> (End, End) {
    across_socks(&d[0].sock, &d[1].sock)
}

/// Ends on the daemons at `sa` and `sb`, connected at path MTU 4096.
fn across_socks(sa: &Path, sb: &Path) -> (End, End) {
    let a = end(sa);
    let b = end(sb);
    pair_at(&a, &b, Mtu::M4096);
    (a, b)
}

/// Every perf bandwidth test, verified, over daemons on `backend`.
fn perf_on(backend: &str, test: &str) {
    let Some(net) = Net::up(test, &LAYOUT) else {
        return;
    };
    let d = net.daemons(backend);
    perf(&d, "write", "bw", &["-s", "65536", "-q", "2"], 200);
    perf(&d, "read", "bw", &["-s", "16384"], 200);
    perf(&d, "send", "bw", &["-s", "4096"], 300);
    perf(&d, "atomic", "bw", &["-A", "faa"], 300);
}

#[test]
fn perf_udp() {
    perf_on(BACKENDS[0], "perf_udp");
}

#[test]
fn perf_afpacket() {
    perf_on(BACKENDS[1], "perf_afpacket");
}

#[test]
fn perf_uring() {
    perf_on(BACKENDS[2], "perf_uring");
}

#[test]
fn a_daemon_on_a_1500_byte_link_takes_the_port_mtu_it_carries() {
    // rxe's rule: the largest IB MTU that fits the link once 80 header bytes are off, so
    // 1024 on ordinary Ethernet. A port MTU of 4096 there (the old default) lost every
    // packet of a message over 1 KiB at the sender, and each WRITE failed with RETRY_EXC.
    let Some(net) = Net::up_with_mtu("mtu_1500", &LAYOUT, 1500) else {
        return;
    };
    let d = net.daemons("udp");
    let ctx = Context::open(&d[0].sock).unwrap();
    assert_eq!(ctx.query_port(1).unwrap().active_mtu, Mtu::M1024 as u8);
    drop(ctx);
    perf(&d, "write", "bw", &["-s", "65536"], 100);
}

fn verbs_on(backend: &str, test: &str) {
    let Some(net) = Net::up(test, &LAYOUT) else {
        return;
    };
    let d = net.daemons(backend);
    let (mut a, mut b) = across(&d);
    every_op(&mut a, &mut b);
    every_op(&mut b, &mut a);
}

#[test]
fn every_op_udp() {
    verbs_on(BACKENDS[0], "every_op_udp");
}

#[test]
fn every_op_afpacket() {
    verbs_on(BACKENDS[1], "every_op_afpacket");
}

#[test]
fn every_op_uring() {
    verbs_on(BACKENDS[2], "every_op_uring");
}

/// `rounds` WRITEs of 64 KiB from `a` to `b` with a pattern of their own, each checked at
/// the target and read back; `seed` keeps concurrent clients' data apart.
fn verified_writes(a: &mut End, b: &mut End, seed: u8, rounds: u64) {
    for r in 0..rounds {
        let data = pattern(seed.wrapping_add(r as u8), 65_536);
        let at = 65_536 * (r % 8);
        a.mr.write(at as usize, &data).unwrap();
        a.post(r, SendOp::Write(b.mr.remote(at)), at, 65_536);
        ok(&mut a.cq, r, WcOpcode::RdmaWrite);
        assert!(
            read_back(b, at as usize, 65_536) == data,
            "client {seed}: WRITE {r} differs"
        );
        a.post(1000 + r, SendOp::Read(b.mr.remote(at)), 600_000, 65_536);
        ok(&mut a.cq, 1000 + r, WcOpcode::RdmaRead);
        assert!(
            read_back(a, 600_000, 65_536) == data,
            "client {seed}: READ {r} differs"
        );
    }
}

#[test]
fn concurrent_clients() {
    let Some(net) = Net::up("concurrent_clients", &LAYOUT) else {
        return;
    };
    let d = net.daemons("udp");
    let socks = [d[0].sock.clone(), d[1].sock.clone()];
    let clients: Vec<_> = (0..4u8)
        .map(|k| {
            let socks = socks.clone();
            std::thread::spawn(move || {
                // Each client has its own contexts on both daemons.
                let (mut a, mut b) = across_socks(&socks[0], &socks[1]);
                verified_writes(&mut a, &mut b, 40 * k, 40);
                send_recv(&mut b, &mut a, u64::from(k) + 1);
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client failed");
    }
}

/// Named counters of the daemon's `daemon` group.
fn daemon_counter(ctx: &Context, name: &str) -> u64 {
    counter(ctx, "daemon", name)
}

/// The QPNs a daemon reports.
fn qpns(ctx: &Context) -> BTreeSet<u32> {
    ctx.stats()
        .expect("stats")
        .qps
        .iter()
        .map(|q| q.qpn)
        .collect()
}

/// What the child prints before its QPNs, once it streams.
const CHILD_MARK: &str = "child-qpns:";

/// A child process, killed on drop so that a failing test leaves none behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run as a child process by `killed_client_is_reclaimed`: a pair across the daemons at
/// `ROCEX_VETH_CHILD`'s two sockets streaming WRITEs until killed (or until its daemon
/// is gone), after printing its QPNs.
#[test]
fn child_client_entry() {
    let Some(socks) = std::env::var_os("ROCEX_VETH_CHILD") else {
        return;
    };
    let socks = socks.into_string().unwrap();
    let (sa, sb) = socks.split_once('\n').unwrap();
    let (mut a, b) = across_socks(Path::new(sa), Path::new(sb));
    println!("{CHILD_MARK} {} {}", a.qp.qpn(), b.qp.qpn());
    let mut id = 0u64;
    loop {
        match write_burst(&mut a, &b, &mut id) {
            Ok(()) | Err(rocex_verbs::Error::QueueFull) => {}
            Err(_) => return,
        }
    }
}

/// Polls `cond` until it holds or `T` passes.
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + T;
    while !cond() {
        assert!(Instant::now() < end, "{what} within {} s", T.as_secs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn killed_client_is_reclaimed() {
    let Some(net) = Net::up("killed_client_is_reclaimed", &LAYOUT) else {
        return;
    };
    let mut d = net.ring_daemons("udp");
    let watch = [
        Context::open(&d[0].sock).unwrap(),
        Context::open(&d[1].sock).unwrap(),
    ];
    let (mut good_a, mut good_b) = across(&d);
    let keys = ["clients", "qps", "mrs"];
    let before: Vec<Vec<u64>> = watch
        .iter()
        .map(|c| keys.iter().map(|k| daemon_counter(c, k)).collect())
        .collect();

    let socks = format!("{}\n{}", d[0].sock.display(), d[1].sock.display());
    let mut child = Reaped(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_client_entry", "--nocapture"])
            .env("ROCEX_VETH_CHILD", socks)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    let theirs: Vec<u32> = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child exited early"
        );
        if let Some((_, qpns)) = line.split_once(CHILD_MARK) {
            break qpns
                .split_whitespace()
                .map(|n| n.parse().expect("a QPN"))
                .collect();
        }
    };
    for (w, qpn) in watch.iter().zip(&theirs) {
        assert!(
            qpns(w).contains(qpn),
            "the child's QP {qpn:#x} is not listed"
        );
    }
    // The others keep moving data while the child streams.
    verified_writes(&mut good_a, &mut good_b, 7, 10);
    child.0.kill().unwrap();
    child.0.wait().unwrap();

    // Everything the child held goes: its QPs, MRs and connections.
    for (i, w) in watch.iter().enumerate() {
        eventually("the child's resources reclaimed", || {
            let now: Vec<u64> = keys.iter().map(|k| daemon_counter(w, k)).collect();
            now == before[i] && !theirs.iter().any(|q| qpns(w).contains(q))
        });
    }
    assert!(
        d[0].alive() && d[1].alive(),
        "a daemon died with its client"
    );
    verified_writes(&mut good_a, &mut good_b, 9, 10);
    send_recv(&mut good_b, &mut good_a, 3);
    // A new client gets what the dead one had.
    let (mut a, mut b) = across(&d);
    verified_writes(&mut a, &mut b, 11, 5);
}

#[test]
fn hostile_client_is_contained() {
    let Some(net) = Net::up("hostile_client_is_contained", &LAYOUT) else {
        return;
    };
    let mut d = net.ring_daemons("udp");
    let socks = [d[0].sock.clone(), d[1].sock.clone()];
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let good = std::thread::spawn(move || {
        let (mut a, mut b) = across_socks(&socks[0], &socks[1]);
        verified_writes(&mut a, &mut b, 1, 5);
        started_tx.send(()).unwrap();
        verified_writes(&mut a, &mut b, 2, 60);
    });
    started_rx.recv().expect("the good client started");

    let (mut bad, _bad_peer) = across(&d);
    // An undefined opcode.
    post_undefined_opcode(&mut bad);
    // Garbage slots: each completes with an error.
    post_garbage_slots(&mut bad, 0x9e37_79b9_7f4a_7c15, 32);
    // A producer index far ahead of anything posted breaks only that ring.
    bad.qp.corrupt_sq_producer(0x8000_0000).unwrap();

    good.join().expect("the good client's transfers");
    assert!(
        d[0].alive() && d[1].alive(),
        "a daemon died on a hostile ring"
    );
    assert!(daemon_counter(&bad.ctx, "bad_descriptors") >= 1);
    eventually("the broken ring counted", || {
        daemon_counter(&bad.ctx, "broken_rings") >= 1
    });
}
