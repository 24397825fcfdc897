//! Every capture in pcaps/ passes `rocex dump --check` (parse, ICRC, byte-exact re-emit),
//! and its decoded form matches the reviewed snapshot.

use std::collections::BTreeMap;
use std::fmt::Write;

use rocex_dump::{Ports, Tally, Verdict, analyze, capture};
use rocex_proto_tests::{captures, name};

/// RoCE frames per capture whose lines go into the snapshot (the histogram covers them all).
const SNAPSHOT_LINES: usize = 120;

#[test]
fn every_capture_checks_clean() {
    let files = captures();
    assert!(!files.is_empty(), "pcaps/ holds no capture");
    let mut failures = Vec::new();
    for path in &files {
        let frames = capture::read(path).unwrap_or_else(|e| panic!("{}: {e}", name(path)));
        let mut tally = Tally::default();
        for (i, c) in frames.iter().enumerate() {
            let a = analyze(i as u64 + 1, c.ts, &c.data, &Ports::default());
            if let Verdict::Bad(why) = &a.verdict {
                failures.push(format!("{} frame {}: {why}", name(path), i + 1));
            }
            tally.add(&a.verdict);
        }
        assert!(tally.roce > 0, "{}: no RoCE frame", name(path));
        eprintln!("{}: {tally}", name(path));
    }
    assert!(
        failures.is_empty(),
        "{} bad frames:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn decoded_captures_match_snapshots() {
    for path in captures() {
        let frames = capture::read(&path).unwrap();
        let t0 = frames.first().map_or(0.0, |f| f.ts);
        let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
        let mut lines = String::new();
        let mut shown = 0;
        for (i, c) in frames.iter().enumerate() {
            let a = analyze(i as u64 + 1, c.ts, &c.data, &Ports::default());
            if !a.summary.roce {
                continue;
            }
            let key = a
                .summary
                .opcode
                .clone()
                .unwrap_or_else(|| "unparsed".into());
            *histogram.entry(key).or_default() += 1;
            if shown < SNAPSHOT_LINES {
                // Times vary with the capture host; the snapshot keeps what the frame says.
                let mut s = a.summary.clone();
                s.ts = t0;
                writeln!(lines, "{}", s.line(t0)).unwrap();
                shown += 1;
            }
        }
        let mut out = String::new();
        for (op, n) in &histogram {
            writeln!(out, "{n:>6} {op}").unwrap();
        }
        out.push_str("--\n");
        out.push_str(&lines);
        insta::assert_snapshot!(name(&path), out);
    }
}
