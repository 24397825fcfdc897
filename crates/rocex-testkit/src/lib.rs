//! What rocex's tests share: the rule below, bounded runs of programs, the workspace's
//! binaries a test runs ([`bins`]), a `rocexd` fixture ([`rocexd`]), readiness of a server a
//! test starts ([`listen`]), two hosts in network namespaces on a veth pair ([`veth`]) and
//! tcpdump on one of them ([`capture`]), and the checks of a drop-in library against C
//! headers ([`layout`]) and Debian's binaries ([`symbols`]), an RC QP's attributes to RTS
//! ([`rc`]) and test data ([`pattern`]).
//!
//! A test that needs something this machine lacks (root, a network namespace, a tool from
//! Debian's packages) calls [`cannot_run`]. In CI (`CI` set to anything but empty or
//! `false`; `.ci/run` sets it) that fails the test: CI installs everything and runs as
//! root, so a missing piece is a defect there. Elsewhere the test returns early after a
//! `SKIPPED:` line, and the skip is appended to the ledger named by `ROCEX_SKIP_LOG`,
//! which `just test` empties before the run and prints after it: a skip is never silent.

#![forbid(unsafe_code)]

pub mod bins;
pub mod capture;
pub mod layout;
pub mod listen;
pub mod rc;
pub mod rocexd;
pub mod symbols;
pub mod veth;

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// The variable naming the skip ledger (one line per skipped test).
pub const SKIP_LOG: &str = "ROCEX_SKIP_LOG";

/// Whether this run is CI, where a test that cannot run fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Records that `test` cannot run because it needs `what`: panics in CI, else prints a
/// `SKIPPED:` notice, appends it to the ledger and returns (the caller returns too).
#[track_caller]
pub fn cannot_run(test: &str, what: &str) {
    assert!(!in_ci(), "{test} needs {what}, which CI must provide");
    let line = format!("SKIPPED: {test} needs {what}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG).map(PathBuf::from) {
        // O_APPEND writes of one short line are atomic between the test processes.
        let appended = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!("cannot record the skip in {}: {e}", path.display());
        }
    }
}

/// The running test's name, for [`cannot_run`]'s notice: libtest names each test's thread
/// after the test.
pub fn this_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test outside libtest")
        .to_owned()
}

/// One test of this binary at a time, for tests that share fixed addresses (their daemons
/// bind RoCE's port on them); a test that failed holding it does not stop the others.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process runs as root (namespaces, taps, raw sockets).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `None` when this process is not root, after recording why `test` cannot run.
pub fn require_root(test: &str) -> Option<()> {
    if is_root() {
        Some(())
    } else {
        cannot_run(test, "root");
        None
    }
}

/// Finds an external program on `PATH`, or records why `test` cannot run without it
/// (`just deps` and `.ci/install-deps.sh` install the tests' tools).
pub fn require_tool(test: &str, tool: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    if found.is_none() {
        cannot_run(test, &format!("`{tool}` (`just deps` installs it)"));
    }
    found
}

/// Waits for `child` at most `limit`: its output, or `Err` with what it printed before it
/// was killed (a test bounds every program it runs, so that a hang fails rather than waits).
pub fn wait_or_kill(mut child: Child, limit: Duration) -> Result<Output, Output> {
    let end = Instant::now() + limit;
    while child.try_wait().expect("wait for a child").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            return Err(child.wait_with_output().expect("collect the output"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output().expect("collect the output"))
}

/// [`wait_or_kill`], failing the test with `who` and what it printed when it ran too long.
#[track_caller]
pub fn finish(child: Child, limit: Duration, who: &str) -> Output {
    wait_or_kill(child, limit).unwrap_or_else(|out| {
        panic!(
            "{who} did not finish within {limit:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `len` bytes of test data that differ for every `seed`: xorshift64 from the seed
/// scrambled by the golden ratio (odd, so that no seed starts it at zero), its low byte
/// per step. A test names its messages by seed and checks what arrived against them.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
