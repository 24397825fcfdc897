//! tcpdump on an interface inside a network namespace, writing a capture the test reads
//! afterwards (with tshark, or rocex's own reader). [`start`] returns once tcpdump says it
//! listens, so no packet the test sends after it is missed.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long tcpdump may take to open the interface.
const START: Duration = Duration::from_secs(10);

/// A running tcpdump; [`stop`](Capture::stop) ends it, as does dropping it.
#[derive(Debug)]
pub struct Capture {
    child: Child,
}

/// `ip netns exec ns tcpdump -i dev --immediate-mode -s 0 -U EXTRA -w file`, once it
/// listens (its "listening on" line, read from a log beside `file`).
///
/// # Errors
///
/// When tcpdump cannot start, exits first or does not listen within 10 s (what it said).
pub fn start(ns: &str, dev: &str, file: &Path, extra: &[&str]) -> io::Result<Capture> {
    let log = file.with_extension("log");
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "tcpdump", "-i", dev])
        .args(["--immediate-mode", "-s", "0", "-U"])
        .args(extra)
        .arg("-w")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?;
    let end = Instant::now() + START;
    loop {
        let said = std::fs::read_to_string(&log)?;
        if said.contains("listening on") {
            let _ = std::fs::remove_file(&log);
            return Ok(Capture { child });
        }
        if Instant::now() > end || child.try_wait()?.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other(format!("tcpdump did not start: {said}")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl Capture {
    /// Lets the last packets in flight reach the file, then stops tcpdump with SIGINT, as
    /// a user would, so that it flushes and closes the capture.
    ///
    /// # Errors
    ///
    /// When waiting for tcpdump fails.
    pub fn stop(mut self) -> io::Result<()> {
        std::thread::sleep(Duration::from_millis(500));
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if self.child.try_wait().is_ok_and(|st| st.is_none()) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
