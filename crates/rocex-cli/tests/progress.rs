//! A long run shows how it goes: `rocex demo` on a terminal (`script` gives it one) draws
//! a live line with the messages done, their rate and the retransmissions so far, and
//! draws none into a pipe; `just demo` passes its arguments on.
//!
//! The demo binds RoCE's port on 127.0.0.1 and 127.0.0.2, so its runs take turns.

mod run;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

const LIMIT: Duration = Duration::from_secs(240);

/// Half the packets lost (a fixed seed): slow enough to be drawn, quick to finish.
const DEMO: [&str; 6] = [
    "demo",
    "--pings",
    "60",
    "--writes",
    "10",
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
        "/60 ",
    ] {
        assert!(r.stdout.contains(want), "no {want:?} on the terminal: {r}");
    }
    // The table still follows, on lines of its own.
    assert!(r.stdout.contains("\nSEND ping-pong   64 B x 60"), "{r}");
}

#[test]
fn demo_draws_no_line_into_a_pipe() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let r = run::run(&DEMO, LIMIT);
    assert_eq!(r.code, Some(0), "{r}");
    assert!(!r.stderr.contains('\r'), "{r}");
    assert!(!r.stdout.contains('\r'), "{r}");
    assert!(r.stdout.contains("SEND ping-pong   64 B x 60"), "{r}");
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
