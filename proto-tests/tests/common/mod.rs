//! Damaging real captures at test time: the records of a classic pcap file, to flip bytes
//! in, drop, or cut short, and the damaged copies both replays are given.

use std::path::{Path, PathBuf};

use rocex_conform::Report;
use rocex_dump::{Ports, analyze};
use rocex_proto_tests::name;
use rocex_wire::frame::Frame;

/// The records of a little-endian classic pcap file (every capture in pcaps/ is one).
pub(crate) struct Records {
    header: Vec<u8>,
    /// Record header (16 bytes) and frame bytes, in file order; frame N is `records[N - 1]`.
    records: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Records {
    pub(crate) fn read(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes[..4], [0xd4, 0xc3, 0xb2, 0xa1], "{}", path.display());
        let mut records = Vec::new();
        let mut at = 24;
        while at < bytes.len() {
            let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            records.push((
                bytes[at..at + 16].to_vec(),
                bytes[at + 16..at + 16 + incl].to_vec(),
            ));
            at += 16 + incl;
        }
        Self {
            header: bytes[..24].to_vec(),
            records,
        }
    }

    /// Frame `n` (from 1).
    pub(crate) fn frame(&self, n: u64) -> &[u8] {
        &self.records[n as usize - 1].1
    }

    /// Flips every bit of the last ICRC byte of RoCE frame `n`.
    pub(crate) fn flip_icrc(&mut self, n: u64) {
        let data = &mut self.records[n as usize - 1].1;
        let f = Frame::parse(data).expect("a RoCE frame");
        let end = f.repr.link.header_len() + f.repr.ip.header_len() + f.repr.udp.length as usize;
        data[end - 1] ^= 0xff;
    }

    /// Keeps the frames whose numbers (as read) satisfy `keep`.
    pub(crate) fn keep(&mut self, keep: impl Fn(u64) -> bool) {
        let mut n = 0;
        self.records.retain(|_| {
            n += 1;
            keep(n)
        });
    }

    /// The file's bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut v = self.header.clone();
        for (h, d) in &self.records {
            v.extend_from_slice(h);
            v.extend_from_slice(d);
        }
        v
    }

    /// The file's bytes up to the middle of frame `n`'s data.
    pub(crate) fn cut_inside(&self, n: u64) -> Vec<u8> {
        let before: usize = self.records[..n as usize - 1]
            .iter()
            .map(|(h, d)| h.len() + d.len())
            .sum();
        let mut v = self.bytes();
        v.truncate(24 + before + 16 + self.frame(n).len() / 2);
        v
    }

    pub(crate) fn write(&self, path: &Path) {
        std::fs::write(path, self.bytes()).unwrap();
    }
}

/// The numbers of the frames that are UDP to port 4791.
pub(crate) fn roce_frames(rec: &Records) -> Vec<u64> {
    (1..=rec.records.len() as u64)
        .filter(|&n| {
            analyze(n, 0.0, rec.frame(n), &Ports::default())
                .summary
                .roce
        })
        .collect()
}

/// A fresh scratch directory for one test.
pub(crate) fn scratch(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocex-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A copy in `dir` of the capture at `path` with the ICRC of every 5th RoCE frame flipped,
/// and the numbers of those frames.
pub(crate) fn with_bad_icrcs(path: &Path, dir: &Path) -> (PathBuf, Vec<u64>) {
    let mut rec = Records::read(path);
    let hit: Vec<u64> = roce_frames(&rec).into_iter().step_by(5).collect();
    for &f in &hit {
        rec.flip_icrc(f);
    }
    let bad = dir.join(format!("damaged-{}", name(path)));
    rec.write(&bad);
    (bad, hit)
}

/// A copy in `dir` of the capture at `path` cut in the middle of its last RoCE frame, and
/// that frame's number.
pub(crate) fn cut_in_last_roce(path: &Path, dir: &Path) -> (PathBuf, u64) {
    let rec = Records::read(path);
    let last = *roce_frames(&rec).last().expect("RoCE frames");
    let cut = dir.join(format!("cut-{}", name(path)));
    std::fs::write(&cut, rec.cut_inside(last)).unwrap();
    (cut, last)
}

/// A copy in `dir` of the capture at `path` without its RoCE frames.
pub(crate) fn without_roce(path: &Path, dir: &Path) -> PathBuf {
    let mut rec = Records::read(path);
    let roce = roce_frames(&rec);
    rec.keep(|f| !roce.contains(&f));
    let none = dir.join(format!("none-{}", name(path)));
    rec.write(&none);
    none
}

/// The report of a damaged copy (`with_bad_icrcs`) lists exactly the frames in `hit` as
/// damaged and blames rocex for none of them.
#[track_caller]
pub(crate) fn assert_damaged_listed(report: &Report, hit: &[u64], n: &str) {
    let listed: Vec<u64> = report.damaged.iter().map(|d| d.frame).collect();
    assert_eq!(listed, hit, "{n}: damaged frames");
    assert_eq!(
        report.totals.mismatched,
        0,
        "{n}: a damaged frame blamed on rocex:\n  {}",
        mismatch_lines(report)
    );
}

/// The report of a copy cut inside its RoCE frame `last` (`cut_in_last_roce`) says the
/// capture ends after the frame before, and fails.
#[track_caller]
pub(crate) fn assert_cut_short(report: &Report, last: u64, n: &str) {
    assert_eq!(report.truncated_after, Some(last - 1), "{n}");
    assert!(report.failed(), "{n}: a cut capture passed");
}

/// The report's first 20 mismatch lines, for a failure message.
pub(crate) fn mismatch_lines(report: &Report) -> String {
    report
        .lines
        .iter()
        .map(ToString::to_string)
        .filter(|l| l.starts_with("mismatch"))
        .take(20)
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// What a capture's snapshot holds: the skipped line and the totals.
pub(crate) fn counts(report: &Report) -> String {
    let skipped = report
        .skipped_line()
        .unwrap_or_else(|| "skipped nothing".into());
    format!("{skipped}\n{}\n", report.totals)
}
