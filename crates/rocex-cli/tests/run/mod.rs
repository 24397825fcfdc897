//! Running the `rocex` binary as a user does, with a generous kill-timeout that only keeps
//! a regression (a wait where a refusal belongs) from hanging the test run.

// Each test crate uses its own subset.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rocex_testkit::listen::{self, Proto};

/// What a run left behind.
pub(crate) struct Ran {
    /// The exit code; `None` when it was killed.
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `rocex` with no daemon in its environment.
pub(crate) fn rocex() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocex"));
    c.env_remove("ROCEX_SOCKET");
    c
}

/// Starts `c` with its output captured.
pub(crate) fn spawn(c: &mut Command) -> Child {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rocex")
}

/// Waits for `child`, killing it after `limit` (then `code` is `None`).
pub(crate) fn finish(child: Child, limit: Duration) -> Ran {
    let (code, out) = match rocex_testkit::wait_or_kill(child, limit) {
        Ok(out) => (out.status.code(), out),
        Err(out) => (None, out),
    };
    Ran {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `rocex args` to its end (at most `limit`).
pub(crate) fn run(args: &[&str], limit: Duration) -> Ran {
    finish(spawn(rocex().args(args)), limit)
}

/// Starts the server `c` (a `rocex` command taking `-p PORT`) on port 0: the child and
/// the port the kernel gave it, once it listens there.
pub(crate) fn serve(c: &mut Command) -> (Child, String) {
    let mut child = spawn(c.args(["-p", "0"]));
    let at = listen::wait_bound(&mut child, Proto::Tcp, SERVER_START, "the server");
    (child, at.port().to_string())
}

/// How long a server may take to listen (other tests and builds share the cores).
const SERVER_START: Duration = Duration::from_secs(30);
