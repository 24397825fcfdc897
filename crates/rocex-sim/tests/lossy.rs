//! 10 000 mixed messages over a link that loses 10%, duplicates 5%, reorders and corrupts:
//! every message arrives exactly once, in order, with its bytes intact.

mod common;
mod mixed;

use std::time::Duration;

use common::*;
use mixed::{Kind, Mix};
use rocex_proto::verbs::Mtu;
use rocex_sim::Link;

const MESSAGES: u64 = 10_000;

/// SEND with immediate, WRITE with immediate, READ and FETCH_ADD of up to 6000 bytes.
const MIX: Mix = Mix {
    kinds: &[
        Kind::SendWithImm,
        Kind::WriteWithImm,
        Kind::Read,
        Kind::FetchAdd,
    ],
    len_of: |i| {
        pattern(i ^ 0xabc, 2)
            .iter()
            .map(|b| *b as usize)
            .sum::<usize>()
            * 13
            % 6000
    },
    slot: 8192,
    slots: 256,
    targets: 64,
    recvs: 512,
    window: 96,
};

#[test]
fn mixed_messages_survive_a_bad_link() {
    let link = Link {
        delay: Duration::from_micros(10),
        jitter: Duration::from_micros(4),
        loss: 0.10,
        duplicate: 0.05,
        reorder: 0.05,
        reorder_by: Duration::from_micros(60),
        corrupt: 0.01,
    };
    let params = Params {
        mtu: Mtu::M1024,
        buf_len: 8 << 20,
        timeout: 8,
        ..Params::default()
    };
    let mut p = Pair::new(0x5eed, link, params);
    let (a, b) = (p.side('a'), p.side('b'));
    if std::env::var_os("ROCEX_TRACE").is_some() {
        p.fabric.intercept(move |from, _to, bytes| {
            let (pkt, _) = rocex_wire::PacketRepr::parse(bytes).unwrap();
            eprintln!("{from} {pkt}");
            true
        });
    }
    assert_eq!(MIX.run(&mut p, MESSAGES), MESSAGES / 2);
    let (ca, cb) = (
        p.fabric.node(a.node).counters().clone(),
        p.fabric.node(b.node).counters().clone(),
    );
    let stats = p.fabric.stats;
    eprintln!(
        "fabric {stats:?}\nretransmitted A={} B={}, retries A={}, duplicate requests at B={}, icrc drops A={} B={}, virtual time {:?}",
        ca.retransmitted_pkts,
        cb.retransmitted_pkts,
        ca.completer_retry_err,
        cb.duplicate_request,
        ca.drop_icrc,
        cb.drop_icrc,
        p.now()
    );
    assert!(
        stats.lost > 1000 && stats.duplicated > 500 && stats.corrupted > 50,
        "the link did impair: {stats:?}"
    );
    assert!(ca.retransmitted_pkts > 0 && cb.duplicate_request > 0);
    // Every corrupted packet that arrived was dropped by its ICRC (the data checks above
    // would catch one that was not).
    assert!(ca.drop_icrc + cb.drop_icrc > 0);
}
