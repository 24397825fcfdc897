//! The simulated fabric and `--inject` apply one fault model (`docs/faults.md`): given the
//! same seed and the same packets, a fabric link and the injector `--inject` wraps
//! (`rocex_sim::Injector`) decide the same fate for every packet, so what the fabric did
//! to a run is what the injector does to the same packets.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use rocex_proto::Instant;
use rocex_proto::verbs::SendOp;
use rocex_sim::{FaultCounters, Injector, Link, Stats};

const LINK: Link = Link {
    delay: Duration::from_micros(5),
    jitter: Duration::from_micros(3),
    loss: 0.08,
    duplicate: 0.05,
    reorder: 0.05,
    reorder_by: Duration::from_micros(40),
    corrupt: 0.02,
};

/// A run of WRITEs and READs over [`LINK`] with faults drawn from `seed`: what the fabric
/// counted, and every packet the engines sent, in the order they went onto the links.
fn fabric_run(seed: u64) -> (Stats, Vec<Vec<u8>>) {
    let mut p = Pair::new(seed, LINK, Params::default());
    let (a, b) = (p.side('a'), p.side('b'));
    let sent = Rc::new(RefCell::new(Vec::new()));
    let record = sent.clone();
    p.fabric.intercept(move |_from, _to, bytes| {
        record.borrow_mut().push(bytes.clone());
        true
    });
    for i in 0..200u64 {
        let op = if i % 4 == 3 {
            SendOp::Read(remote(&b, i * 4096))
        } else {
            SendOp::Write(remote(&b, i * 4096))
        };
        p.post(&a, i, op, i * 4096, 3000);
    }
    let wcs = p.completions(&a, 200, Duration::from_secs(60));
    assert_eq!(wcs.len(), 200, "every request completes through the faults");
    assert_ok(&wcs);
    p.settle(Duration::from_secs(1));
    let packets = sent.borrow().clone();
    (p.fabric.stats, packets)
}

/// What the injector does to `packets`, sent in order, with faults drawn from `seed`: its
/// counts, and how many copies it let through in the end.
fn injector_run(seed: u64, packets: &[Vec<u8>]) -> (FaultCounters, u64) {
    let mut inj = Injector::new(LINK, seed);
    let mut out = Vec::new();
    for (i, p) in packets.iter().enumerate() {
        inj.apply(Instant::from_micros(i as u64), (), p, &mut out);
    }
    inj.release(Instant::from_millis(1000), &mut out);
    (inj.counters, out.len() as u64)
}

fn counted(s: &Stats) -> FaultCounters {
    FaultCounters {
        lost: s.lost,
        duplicated: s.duplicated,
        reordered: s.reordered,
        corrupted: s.corrupted,
    }
}

#[test]
fn the_fabric_and_the_injector_decide_alike() {
    let (stats, packets) = fabric_run(0xfa17);
    assert_eq!(stats.sent, packets.len() as u64);
    let fabric = counted(&stats);
    // Every fault happened, so each count below had something to agree on.
    assert!(
        fabric.lost > 0 && fabric.duplicated > 0 && fabric.reordered > 0 && fabric.corrupted > 0,
        "{fabric:?}"
    );
    assert_eq!(injector_run(0xfa17, &packets), (fabric, stats.delivered));
    // Another seed draws other fates for the same packets.
    assert_ne!(injector_run(0xfa18, &packets).0, fabric);
}
