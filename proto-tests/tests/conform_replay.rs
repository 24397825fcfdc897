//! `rocex conform replay` over every capture in pcaps/: rocex's responder must answer each
//! captured RC request stream exactly as kernel rxe did; each capture's counts (inferences
//! included) are snapshots, so a regression cannot hide as more inferences. The same
//! captures, damaged at test time, must be reported frame by frame as damaged, not as
//! rocex's mismatches; cut short, replayed up to the cut and failed; with no RoCE frame,
//! refused.

use rocex_conform::{ConformError, Options, Report, replay_file};
use rocex_dump::capture::CaptureError;
mod common;

use common::{
    assert_cut_short, assert_damaged_listed, counts, cut_in_last_roce, mismatch_lines, scratch,
    with_bad_icrcs, without_roce,
};
use rocex_proto_tests::{captures, name};

fn replay(path: &std::path::Path) -> Report {
    replay_file(path, &Options::default()).unwrap_or_else(|e| panic!("{}: {e}", name(path)))
}

#[test]
fn every_capture_replays_without_mismatch() {
    let mut failures = Vec::new();
    for path in captures() {
        let report = replay(&path);
        let t = report.totals;
        println!("{:<34} {t}", name(&path));
        if report.failed() {
            failures.push(format!(
                "{}: {t}\n  {}",
                name(&path),
                mismatch_lines(&report)
            ));
        }
        if t.connections > 0 {
            assert!(
                t.requests > 0 && t.responses > 0,
                "{}: RC traffic but nothing compared: {t}",
                name(&path)
            );
        }
        assert!(report.damaged.is_empty(), "{}: damaged frames", name(&path));
        insta::assert_snapshot!(name(&path), counts(&report));
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

/// Every 5th RoCE frame of each capture gets one ICRC byte flipped: the replay must list
/// exactly those frames as damaged (ICRC failures) and blame rocex for nothing.
#[test]
fn damaged_frames_are_reported_as_such() {
    let dir = scratch("conform-damaged");
    for path in captures() {
        let n = name(&path);
        let (bad, hit) = with_bad_icrcs(&path, &dir);
        let report = replay(&bad);
        assert_damaged_listed(&report, &hit, &n);
        assert!(
            report
                .damaged
                .iter()
                .all(|d| d.why.starts_with("ICRC mismatch")),
            "{n}: {:?}",
            report.damaged
        );
        assert_eq!(report.skipped.icrc_bad, hit.len() as u64, "{n}");
        for f in &hit {
            let line = format!("damaged frame={f}: ICRC mismatch");
            assert!(
                report
                    .lines
                    .iter()
                    .any(|l| l.to_string().starts_with(&line)),
                "{n}: no line for frame {f}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Each capture cut in the middle of its last RoCE frame: the frames before it are
/// replayed, and the report fails, saying where the file ends.
#[test]
fn a_capture_cut_short_is_replayed_up_to_the_cut() {
    let dir = scratch("conform-cut");
    for path in captures() {
        let (cut, last) = cut_in_last_roce(&path, &dir);
        let report = replay(&cut);
        assert_cut_short(&report, last, &name(&path));
        assert!(
            report
                .to_string()
                .contains(&format!("truncated capture after frame {}", last - 1)),
            "{}",
            name(&path)
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn no_roce_is_nothing_to_replay() {
    let dir = scratch("conform-none");
    for path in captures() {
        let e = replay_file(&without_roce(&path, &dir), &Options::default()).unwrap_err();
        assert!(
            matches!(e, ConformError::NothingToReplay),
            "{}: {e}",
            name(&path)
        );
        assert!(e.to_string().contains("nothing to replay"));
    }
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        replay_file(&empty, &Options::default()),
        Err(ConformError::Capture(CaptureError::Empty))
    ));
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"not a capture at all").unwrap();
    assert!(matches!(
        replay_file(&junk, &Options::default()),
        Err(ConformError::Capture(CaptureError::Format(_)))
    ));
    std::fs::remove_dir_all(&dir).ok();
}
