//! `rocex conform replay` over every capture in pcaps/: rocex's responder must answer each
//! captured RC request stream exactly as kernel rxe did.

use rocex_conform::{Options, replay_file};
use rocex_proto_tests::{captures, name};

#[test]
fn every_capture_replays_without_mismatch() {
    let mut failures = Vec::new();
    for path in captures() {
        let report = replay_file(&path, &Options::default())
            .unwrap_or_else(|e| panic!("{}: {e}", name(&path)));
        let t = report.totals;
        println!("{:<34} {t}", name(&path));
        if t.mismatched > 0 {
            let lines: Vec<String> = report
                .lines
                .iter()
                .map(ToString::to_string)
                .filter(|l| l.starts_with("mismatch"))
                .collect();
            failures.push(format!("{}: {t}\n  {}", name(&path), lines.join("\n  ")));
        }
        if t.connections > 0 {
            assert!(
                t.requests > 0 && t.responses > 0,
                "{}: RC traffic but nothing compared: {t}",
                name(&path)
            );
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn odd_input_is_an_error_or_skipped_not_a_panic() {
    let dir = std::env::temp_dir().join(format!("rocex-conform-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"not a capture at all").unwrap();
    assert!(replay_file(&junk, &Options::default()).is_err());
    // A capture cut short in the middle of a frame.
    let whole = std::fs::read(
        captures()
            .into_iter()
            .find(|p| name(p) == "probe_all.pcap")
            .unwrap(),
    )
    .unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &whole[..whole.len() / 2 + 7]).unwrap();
    let _ = replay_file(&cut, &Options::default());
    std::fs::remove_dir_all(&dir).ok();
}
