//! A long run shows how it goes: `rocex demo`, `rocex perf` and `rocex soak` on a terminal
//! (`script` gives them one) draw a live line with the messages done, their rate and the
//! retransmissions so far, and draw none into a pipe; `just demo` passes its arguments on.
//!
//! The demo binds RoCE's port on 127.0.0.1 and 127.0.0.2, so its runs take turns; perf and
//! soak run on daemons of their own (127.0.9.51 to 127.0.9.54), which lose 10% of what
//! they send so that there is something to retransmit.

mod common;
mod run;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

const LIMIT: Duration = Duration::from_secs(240);

/// Half the packets lost (a fixed seed): slow enough to be drawn (the first line comes
/// after a second, and 60 pings took half of one once rocex resent after a round trip
/// rather than the ACK timeout), quick to finish.
const DEMO: [&str; 6] = [
    "demo",
    "--pings",
    "300",
    "--writes",
    "20",
    "--inject=loss=0.5,seed=3",
];

#[test]
fn demo_draws_a_live_line_on_a_terminal() {
    let test = "demo_draws_a_live_line_on_a_terminal";
    let Some(script) = rocex_testkit::require_tool(test, "script") else {
        return;
    };
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let cmd = format!("'{}' {}", env!("CARGO_BIN_EXE_rocex"), DEMO.join(" "));
    // script(1) runs the command on a pseudo-terminal and copies what it printed.
    let r = run::finish(
        run::spawn(Command::new(script).args(["-qfec", &cmd, "/dev/null"])),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{r}");
    for want in [
        "\rSEND ping-pong: ",
        "\rRDMA WRITE: ",
        " retransmitted ",
        "/300 ",
    ] {
        assert!(r.stdout.contains(want), "no {want:?} on the terminal: {r}");
    }
    // The table still follows, on lines of its own.
    assert!(r.stdout.contains("\nSEND ping-pong   64 B x 300"), "{r}");
}

#[test]
fn demo_draws_no_line_into_a_pipe() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = run::run(&DEMO, LIMIT);
    assert_eq!(r.code, Some(0), "{r}");
    assert!(!r.stderr.contains('\r'), "{r}");
    assert!(!r.stdout.contains('\r'), "{r}");
    assert!(r.stdout.contains("SEND ping-pong   64 B x 300"), "{r}");
}

#[test]
fn just_demo_passes_its_arguments() {
    let Some(just) = rocex_testkit::require_tool("just_demo_passes_its_arguments", "just") else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(just)
        .current_dir(root)
        .args(["--dry-run", "demo", "--inject", "loss=0.1", "--pings", "5"])
        .output()
        .expect("run just");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("rocex-cli -- demo --inject loss=0.1 --pings 5"),
        "{err}"
    );
}

/// `rocex ARGS` on a pseudo-terminal through `script`: what it printed there, and its
/// exit code.
fn on_terminal(script: &Path, args: &str) -> run::Ran {
    let cmd = format!("'{}' {args}", env!("CARGO_BIN_EXE_rocex"));
    run::finish(
        run::spawn(Command::new(script).args(["-qfec", &cmd, "/dev/null"])),
        LIMIT,
    )
}

fn lossy(addr: &str) -> common::Daemon {
    common::daemon(addr, &["--inject", "loss=0.1,seed=5"])
}

fn path(d: &common::Daemon) -> PathBuf {
    d.sock.clone()
}

#[test]
fn soak_draws_a_live_line_on_a_terminal() {
    let test = "soak_draws_a_live_line_on_a_terminal";
    let Some(script) = rocex_testkit::require_tool(test, "script") else {
        return;
    };
    let (a, b) = (lossy("127.0.9.51"), lossy("127.0.9.52"));
    let args = format!(
        "soak --socket-a '{}' --socket-b '{}' --messages 10000 --qps 2",
        path(&a).display(),
        path(&b).display()
    );
    let r = on_terminal(&script, &args);
    assert_eq!(r.code, Some(0), "{r}");
    for want in ["\rsoak: done=", " msg/s ", " retransmitted="] {
        assert!(r.stdout.contains(want), "no {want:?} on the terminal: {r}");
    }
    assert!(r.stdout.contains("\nsoak ok: messages=10000"), "{r}");
}

#[test]
fn perf_draws_a_live_line_on_a_terminal() {
    let test = "perf_draws_a_live_line_on_a_terminal";
    let Some(script) = rocex_testkit::require_tool(test, "script") else {
        return;
    };
    let (a, b) = (lossy("127.0.9.53"), lossy("127.0.9.54"));
    let (server, port) = run::serve(
        run::rocex()
            .args(["perf", "write", "bw", "-D", "3", "--socket"])
            .arg(path(&b)),
    );
    let args = format!(
        "perf write bw -D 3 -p {port} --socket '{}' 127.0.0.1",
        path(&a).display()
    );
    let r = on_terminal(&script, &args);
    let s = run::finish(server, LIMIT);
    assert_eq!(r.code, Some(0), "{r}");
    assert_eq!(s.code, Some(0), "{s}");
    for want in ["\r[", "% ", " msgs ", " Gb/s", " retransmitted "] {
        assert!(r.stdout.contains(want), "no {want:?} on the terminal: {r}");
    }
    // The server, whose output is a pipe, draws none.
    assert!(!s.stderr.contains('\r') && !s.stdout.contains('\r'), "{s}");
}

/// With every packet lost (rxe's retry count 7 retries for ever) nothing completes: the
/// demo says so, naming what it waits for, long before it gives up. The run is stopped
/// once the notice is read.
#[test]
fn a_run_that_stops_progressing_says_so() {
    use std::io::{BufRead, BufReader};
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut child = run::spawn(run::rocex().args(["demo", "--pings", "5", "--inject=loss=1"]));
    let stderr = child.stderr.take().unwrap();
    let pid = child.id();
    // Only so that a regression cannot hang the run (the notice comes after 5 s idle);
    // called off once the run is reaped, so that no other process gets the signal.
    let (done, cancelled) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if cancelled.recv_timeout(LIMIT).is_err() {
            // SAFETY: kill(2) of our own child, not yet reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    let mut seen = Vec::new();
    let mut notice = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line.contains("nothing completed") {
            notice = Some(line);
            break;
        }
        seen.push(line);
    }
    let _ = child.kill();
    let _ = done.send(());
    guard.join().unwrap();
    let _ = child.wait();
    let notice = notice.unwrap_or_else(|| panic!("no notice; stderr: {seen:?}"));
    assert!(
        notice.starts_with("rocex demo: SEND ping-pong: nothing completed for 5 s (0 of 5 done, "),
        "{notice}"
    );
    assert!(
        notice.contains(" packets retransmitted by 127.0.0.1); giving up after 30 s"),
        "{notice}"
    );
}
