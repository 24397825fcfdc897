//! `rocex conform replay --requester` over every capture in pcaps/: given the work
//! requests rxe's request stream shows and rxe's responses at their captured times,
//! rocex's requester must send what kernel rxe sent, retransmissions after NAKs, timeouts
//! and RNR NAKs and READ restarts included; each capture's counts (inferences included)
//! are snapshots. Damaged, cut and RoCE-less captures are reported as the responder
//! replay reports them.

mod common;

use rocex_conform::{ConformError, Options, Report, replay_requester_file};
use rocex_proto_tests::{captures, name};

use common::{Records, roce_frames, scratch};

fn replay(path: &std::path::Path) -> Report {
    replay_requester_file(path, &Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", name(path)))
}

fn mismatch_lines(report: &Report) -> String {
    report
        .lines
        .iter()
        .map(ToString::to_string)
        .filter(|l| l.starts_with("mismatch"))
        .take(20)
        .collect::<Vec<_>>()
        .join("\n  ")
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
        let counts = format!(
            "{}\n{t}\n",
            report
                .skipped_line()
                .unwrap_or_else(|| "skipped nothing".into())
        );
        insta::assert_snapshot!(n, counts);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every 5th RoCE frame damaged: listed frame by frame, nothing blamed on rocex.
#[test]
fn damaged_frames_are_reported_as_such() {
    let dir = scratch("requester-damaged");
    for path in captures() {
        let n = name(&path);
        let mut rec = Records::read(&path);
        let hit: Vec<u64> = roce_frames(&rec).into_iter().step_by(5).collect();
        for &f in &hit {
            rec.flip_icrc(f);
        }
        let bad = dir.join(&n);
        rec.write(&bad);
        let report = replay(&bad);
        let listed: Vec<u64> = report.damaged.iter().map(|d| d.frame).collect();
        assert_eq!(listed, hit, "{n}: damaged frames");
        assert_eq!(
            report.totals.mismatched,
            0,
            "{n}: a damaged frame blamed on rocex:\n  {}",
            mismatch_lines(&report)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn cut_and_roceless_captures() {
    let dir = scratch("requester-cut");
    for path in captures() {
        let n = name(&path);
        let mut rec = Records::read(&path);
        let roce = roce_frames(&rec);
        let last = *roce.last().expect("RoCE frames");
        let cut = dir.join(format!("cut-{n}"));
        std::fs::write(&cut, rec.cut_inside(last)).unwrap();
        let report = replay(&cut);
        assert_eq!(report.truncated_after, Some(last - 1), "{n}");
        assert!(report.failed(), "{n}: a cut capture passed");
        rec.keep(|f| !roce.contains(&f));
        let none = dir.join(format!("none-{n}"));
        rec.write(&none);
        assert!(matches!(
            replay_requester_file(&none, &Options::default()),
            Err(ConformError::NothingToReplay)
        ));
    }
    std::fs::remove_dir_all(&dir).ok();
}
