//! Every `rocex perf` test, bandwidth then latency, one after another with `--verify` on
//! one pair of `rocexd` per backend, in two network namespaces (`h6a`, `h6b`: veth
//! 198.18.206.1 and .2/24). Whatever a run leaves behind in a daemon (datagrams still in
//! its socket for a QP already destroyed, a backend's receive ring after a run that only
//! received, a responder's saved READs) meets the next run, as on a long-lived daemon;
//! fresh daemons per run would hide it. A READ then a SEND on the same io_uring daemons
//! once crawled at 64 datagrams per retransmit timeout until the SEND gave up.
//!
//! Needs root and `ip` (`common::netns`).

mod common;

use common::netns::{Layout, Net};
use common::perf::perf;

const LAYOUT: Layout = Layout {
    ns: ["h6a", "h6b"],
    veth: ["h6v0", "h6v1"],
    addr: ["198.18.206.1", "198.18.206.2"],
};

/// The message size of the bandwidth tests: 16 packets at path MTU 4096.
const SIZE: &str = "65536";
/// Iterations of each test.
const ITERS: u64 = 200;

/// Every operation's bandwidth test, then its latency test, on the same two daemons.
fn sequence(backend: &str, test: &str) {
    let Some(net) = Net::up(test, &LAYOUT) else {
        return;
    };
    let d = net.daemons(backend);
    let ops = ["write", "read", "send", "atomic"];
    for op in ops {
        let size: &[&str] = if op == "atomic" { &[] } else { &["-s", SIZE] };
        perf(&d, op, "bw", size, ITERS);
    }
    for op in ops {
        perf(&d, op, "lat", &[], ITERS);
    }
}

#[test]
fn sequence_udp() {
    sequence("udp", "sequence_udp");
}

#[test]
fn sequence_afpacket() {
    sequence("afpacket", "sequence_afpacket");
}

#[test]
fn sequence_uring() {
    sequence("uring", "sequence_uring");
}
