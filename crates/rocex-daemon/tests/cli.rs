//! `rocexd` as a user runs it, the binary itself: a `--socket` in a missing directory is
//! refused without creating it while the default one under /run/rocex is served (the
//! directory created when missing; root only), logs written to a file carry no colour
//! codes, a fatal error is printed once, and the shutdown line names every counter as
//! `rocex stat` does.
//!
//! Each test owns its address (127.0.9.11 to 127.0.9.14), so they run side by side.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rocexd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocexd"));
    c.env_remove("ROCEX_SOCKET").env("RUST_LOG", "info");
    c
}

/// A fresh directory of this test's own.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocexd-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `rocexd` with `args` to its end.
fn run(args: &[&str]) -> Output {
    let child = rocexd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rocexd");
    rocex_testkit::finish(child, Duration::from_secs(30), "rocexd")
}

#[test]
fn socket_in_a_missing_directory_is_refused_and_not_created() {
    let dir = scratch("nodir");
    let missing = dir.join("missing");
    let sock = missing.join("sub").join("d.sock");
    let out = run(&["--addr", "127.0.9.11", "--socket", sock.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let want = format!("directory {} does not exist", missing.join("sub").display());
    assert!(err.contains(&want), "wanted {want:?} in: {err}");
    assert!(!missing.exists(), "rocexd created {}", missing.display());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_fatal_error_is_printed_once() {
    let dir = scratch("fatal");
    let sock = dir.join("d.sock");
    let pcap = dir.join("no-such-dir").join("x.pcap");
    let out = run(&[
        "--addr",
        "127.0.9.13",
        "--socket",
        sock.to_str().unwrap(),
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&*pcap.to_string_lossy()))
        .collect();
    assert_eq!(lines.len(), 1, "the error is not printed once: {err}");
    assert!(lines[0].starts_with("rocexd: "), "{err}");
    assert!(!sock.exists(), "the socket was bound before the error");
    let _ = std::fs::remove_dir_all(dir);
}

/// Waits until `sock` accepts connections.
fn wait_for(sock: &Path, child: &mut Child) {
    let end = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "rocexd exited");
        assert!(Instant::now() < end, "rocexd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn logs_to_a_file_are_plain_and_the_shutdown_counters_named() {
    let dir = scratch("log");
    let sock = dir.join("d.sock");
    let log = dir.join("stderr");
    let mut child = rocexd()
        .args(["--addr", "127.0.9.12", "--socket", sock.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start rocexd");
    wait_for(&sock, &mut child);
    // One datagram that is not RoCE: the backend counts it, the engine drops it.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.send_to(&[0u8; 40], "127.0.9.12:4791").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = rocex_testkit::finish(child, Duration::from_secs(10), "rocexd");
    assert!(out.status.success(), "rocexd failed on SIGTERM");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("rocexd serving"), "{text}");
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file: {text:?}"
    );
    let stopped = text
        .lines()
        .find(|l| l.contains("stopped"))
        .unwrap_or_else(|| panic!("no shutdown line: {text}"));
    // rocex stat's names, group by group, and no Rust debug structures.
    for want in ["engine: ", "daemon: ", "backend: ", "rx_packets=1", "cm: "] {
        assert!(stopped.contains(want), "{want:?} not in {stopped:?}");
    }
    for debug in ['{', '}', '('] {
        assert!(!stopped.contains(debug), "debug output in {stopped:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_default_run_directory_is_created() {
    // /run is root's; the daemon's default socket lives there.
    if rocex_testkit::require_root("the_default_run_directory_is_created").is_none() {
        return;
    }
    let sock = Path::new("/run/rocex/127.0.9.14.sock");
    let mut child = rocexd()
        .args(["--addr", "127.0.9.14"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rocexd");
    wait_for(sock, &mut child);
    assert!(Path::new("/run/rocex").is_dir());
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = rocex_testkit::finish(child, Duration::from_secs(10), "rocexd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!sock.exists(), "the socket outlived the daemon");
}
