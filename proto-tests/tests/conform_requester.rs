//! `rocex conform replay --requester` over every capture in pcaps/: given the work
//! requests rxe's request stream shows and rxe's responses at their captured times,
//! rocex's requester must send what kernel rxe sent, retransmissions after NAKs, timeouts
//! and RNR NAKs and READ restarts included; each capture's counts (inferences included)
//! are snapshots. Damaged, cut and RoCE-less captures are reported as the responder
//! replay reports them.

mod common;

use rocex_conform::{ConformError, Options, Report, replay_requester_file};
use rocex_proto_tests::{captures, name};

use common::{
    assert_cut_short, assert_damaged_listed, counts, cut_in_last_roce, mismatch_lines, scratch,
    with_bad_icrcs, without_roce,
};

fn replay(path: &std::path::Path) -> Report {
    replay_requester_file(path, &Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", name(path)))
}

#[test]
fn every_requester_replays_as_rxe_sent() {
    let mut failures = Vec::new();
    for path in captures() {
        let report = replay(&path);
        let t = report.totals;
        let n = name(&path);
        println!("{n:<34} {t}");
        if report.failed() {
            failures.push(format!("{n}: {t}\n  {}", mismatch_lines(&report)));
        }
        if t.connections > 0 {
            assert!(t.matched > 0, "{n}: RC traffic but nothing compared: {t}");
        }
        insta::assert_snapshot!(n, counts(&report));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every 5th RoCE frame damaged: listed frame by frame, nothing blamed on rocex.
#[test]
fn damaged_frames_are_reported_as_such() {
    let dir = scratch("requester-damaged");
    for path in captures() {
        let n = name(&path);
        let (bad, hit) = with_bad_icrcs(&path, &dir);
        assert_damaged_listed(&replay(&bad), &hit, &n);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cut_and_roceless_captures() {
    let dir = scratch("requester-cut");
    for path in captures() {
        let n = name(&path);
        let (cut, last) = cut_in_last_roce(&path, &dir);
        assert_cut_short(&replay(&cut), last, &n);
        assert!(matches!(
            replay_requester_file(&without_roce(&path, &dir), &Options::default()),
            Err(ConformError::NothingToReplay)
        ));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// With rocex's own recovery (`Options::rocex_recovery`) the requester goes back sooner
/// than rxe did, with the packets of rxe's go-backs: over every capture the only
/// difference is one early go-back to FETCH_ADD 3945414, which rxe had resent already
/// and whose ACK was on its way (docs/interop.md, "Replaying the requester").
#[test]
fn rocex_recovery_differs_only_by_going_back_sooner() {
    let opts = Options {
        rocex_recovery: true,
        ..Options::default()
    };
    let mut differences = Vec::new();
    for path in captures() {
        let report =
            replay_requester_file(&path, &opts).unwrap_or_else(|e| panic!("{}: {e}", name(&path)));
        for l in report.lines.iter().map(ToString::to_string) {
            if l.starts_with("mismatch") {
                differences.push(format!("{}: {l}", name(&path)));
            }
        }
    }
    assert_eq!(
        differences,
        [
            "atomic_bw_faa-loss5.pcap: mismatch 198.18.0.12->198.18.0.11 qp=0x11 frame=136: rxe sent RC_FETCH_ADD psn=3945417 ack va=0x55a6c17444c0 rkey=0x2fa swap_add=0x1 compare=0x0 len=0; rocex sent RC_FETCH_ADD psn=3945414 ack va=0x55a6c1744400 rkey=0x2fa swap_add=0x1 compare=0x0 len=0"
        ]
    );
}
