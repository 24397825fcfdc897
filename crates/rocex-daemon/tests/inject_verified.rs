//! Two `rocexd` without `--peers-are-rocex` in two network namespaces (`icx0`, `icx1`,
//! 198.18.211.1 and .2), both injecting loss, duplication, reordering and single-bit
//! corruption into everything they send. `rocex perf` WRITE, READ, SEND and atomic
//! bandwidth runs between them must verify every byte on every backend: each checks
//! every received ICRC (udp and uring by solving for the IPv4 identification their socket
//! hides), so no corrupted packet reaches memory.
//!
//! Needs root and `ip` (`common::netns`).

mod common;

use common::netns::{Layout, Net};
use common::perf::perf;
use common::{Daemon, counter};
use rocex_verbs::Context;

const LAYOUT: Layout = Layout {
    ns: ["icx0", "icx1"],
    veth: ["icxv0", "icxv1"],
    addr: ["198.18.211.1", "198.18.211.2"],
};
/// The faults of the report this test answers, on both daemons.
const FAULTS: &str = "loss=0.1,dup=0.02,reorder=0.05,corrupt=0.01";
/// Every run but the atomic one (always 8 bytes) moves 16 KiB messages. A completion every
/// 10 requests: a READ whose response is lost within its message waits for the 67 ms ACK
/// timeout (as rxe does), and a side gives up after 30 s without a completion.
const ARGS: [&str; 4] = ["-s", "16384", "-Q", "10"];

/// The daemon of side `i` on `backend`, with [`FAULTS`] and otherwise default flags.
fn daemon(net: &Net, i: usize, backend: &str) -> Daemon {
    net.rocexd(i)
        .args(["--backend", backend, "--inject", FAULTS])
        .start()
}

/// Every bandwidth test through the faults on `backend`, `iters` iterations each (READ a
/// third of them: its lost responses wait for the ACK timeout); then the corrupted packets
/// must have been dropped by their ICRC.
fn through_faults(backend: &str, test: &str, iters: u64) {
    let Some(net) = Net::up(test, &LAYOUT) else {
        return;
    };
    let d = [daemon(&net, 0, backend), daemon(&net, 1, backend)];
    perf(&d, "write", "bw", &ARGS, iters);
    perf(&d, "read", "bw", &ARGS, iters / 3);
    perf(&d, "send", "bw", &ARGS, iters);
    perf(&d, "atomic", "bw", &ARGS, iters);
    for dm in &d {
        let ctx = Context::open(&dm.sock).expect("open");
        let corrupted = counter(&ctx, "inject", "corrupted");
        // The peer's corrupted packets were caught by the ICRC check and dropped ...
        let dropped = counter(&ctx, "engine", "drop_icrc");
        assert!(
            dropped > 0,
            "{backend}: no bad ICRC dropped ({corrupted} corrupted here)"
        );
        // ... and every good one checked under the identifications rocex sends with.
        assert_eq!(counter(&ctx, "backend", "icrc_foreign_id"), 0, "{backend}");
    }
}

/// The default backend, with the report's 2000 iterations.
#[test]
fn udp_verifies_every_op_through_faults() {
    through_faults("udp", "udp_verifies_every_op_through_faults", 2000);
}

#[test]
fn uring_verifies_every_op_through_faults() {
    through_faults("uring", "uring_verifies_every_op_through_faults", 1000);
}

#[test]
fn afpacket_verifies_every_op_through_faults() {
    through_faults(
        "afpacket",
        "afpacket_verifies_every_op_through_faults",
        1000,
    );
}
