//! `rocex dump` and `rocex conform replay` on captures that are cut short, empty or hold no
//! RoCE: like tcpdump, the intact frames, then where the file ends, and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

fn pcap(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcaps")
        .join(name)
}

fn rocex(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocex"))
        .args(args)
        .arg(file)
        .output()
        .expect("rocex runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch file holding `bytes`, removed on drop; its own file even when tests running
/// at the same time ask for the same name.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("rocex-cli-{}-{n}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        Self(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// The first 3000 bytes of rxe61-rc_pingpong.pcap hold 20 whole frames (19 of TCP, the
/// first RoCE SEND) and part of the 21st.
fn cut() -> Scratch {
    let whole = std::fs::read(pcap("rxe61-rc_pingpong.pcap")).unwrap();
    Scratch::new("cut.pcap", &whole[..3000])
}

#[test]
fn dump_prints_the_intact_frames_of_a_cut_capture() {
    let t = cut();
    let out = rocex(&["dump"], &t.0);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 20, "{stdout}");
    assert!(lines[19].trim_start().starts_with("20 "), "{}", lines[19]);
    assert!(lines[19].contains("RC_SEND_FIRST"), "{}", lines[19]);
    assert!(
        text(&out.stderr).contains("truncated capture after frame 20"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2));

    let out = rocex(&["dump", "--check"], &t.0);
    assert!(text(&out.stdout).ends_with("frames=20 roce=1 ok=1 bad=0\n"));
    assert!(text(&out.stderr).contains("truncated capture after frame 20"));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn replay_of_a_cut_capture_fails_and_says_where_it_ends() {
    let t = cut();
    let out = rocex(&["conform", "replay"], &t.0);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("truncated capture after frame 20\n"),
        "{stdout}"
    );
    assert!(
        stdout
            .ends_with("connections=1 requests=1 responses=0 matched=0 mismatched=0 inferred=2\n"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn an_empty_file_says_so() {
    let t = Scratch::new("empty.pcap", b"");
    for args in [&["dump"][..], &["dump", "--check"], &["conform", "replay"]] {
        let out = rocex(args, &t.0);
        assert!(text(&out.stderr).contains("empty file"), "{args:?}");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn no_roce_is_nothing_to_check_or_replay() {
    // The first 19 frames of rxe61-rc_pingpong.pcap are the TCP exchange: 24 bytes of
    // file header, then each record's 16-byte header and its bytes.
    let whole = std::fs::read(pcap("rxe61-rc_pingpong.pcap")).unwrap();
    let mut at = 24;
    for _ in 0..19 {
        at += 16 + u32::from_le_bytes(whole[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    let t = Scratch::new("tcp.pcap", &whole[..at]);
    let out = rocex(&["dump"], &t.0);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).lines().count(), 19);
    let out = rocex(&["dump", "--check"], &t.0);
    assert!(text(&out.stdout).ends_with("frames=19 roce=0 ok=0 bad=0\n"));
    assert!(text(&out.stderr).contains("nothing to check"));
    assert_eq!(out.status.code(), Some(1));
    let out = rocex(&["conform", "replay"], &t.0);
    assert!(
        text(&out.stderr).contains("nothing to replay"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn requester_replay_of_a_lossy_capture_matches_rxe() {
    // One 4 KiB WRITE at MTU 1024 whose MIDDLE at PSN 1698442 was lost: rxe resent from
    // the NAK's PSN, and so does rocex.
    let out = rocex(
        &["conform", "replay", "--requester", "--verbose"],
        &pcap("probe_write-loss5.pcap"),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("request-lost: rxe's RC_RDMA_WRITE_MIDDLE psn=1698442"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "match 198.18.0.12->198.18.0.11 qp=0x11 frame=34: RC_RDMA_WRITE_MIDDLE psn=1698442"
        ),
        "{stdout}"
    );
    assert!(
        stdout
            .ends_with("connections=1 requests=5 responses=2 matched=5 mismatched=0 inferred=5\n"),
        "{stdout}"
    );
}
