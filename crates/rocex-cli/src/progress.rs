//! What the long-running commands (perf, soak, demo) say while they run: a live progress
//! line on stderr, drawn only when stderr is a terminal, and a notice, on any stderr, when
//! a run has stopped progressing.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(200);
/// How long a run goes before its first line: a short run prints none.
const FIRST: Duration = Duration::from_secs(1);

/// A line rewritten in place (`\r`, then erase to the end of the line).
pub(crate) struct Line {
    enabled: bool,
    start: Instant,
    last: Option<Instant>,
    shown: bool,
}

impl Line {
    /// A line on stderr, drawn when stderr is a terminal.
    pub(crate) fn new() -> Self {
        Self::when(true)
    }

    /// A line drawn only if `enabled` (and stderr is a terminal).
    pub(crate) fn when(enabled: bool) -> Self {
        Self {
            enabled: enabled && std::io::stderr().is_terminal(),
            start: Instant::now(),
            last: None,
            shown: false,
        }
    }

    /// Whether the line is drawn at all (stderr is a terminal).
    pub(crate) fn live(&self) -> bool {
        self.enabled
    }

    /// Whether a redraw is due: the line is on, the run has gone on for a second, and the
    /// last redraw was a moment ago. The caller then computes the text and draws it.
    pub(crate) fn due(&self) -> bool {
        self.enabled
            && self.start.elapsed() >= FIRST
            && self.last.is_none_or(|t| t.elapsed() >= REDRAW)
    }

    /// Draws `text` over the previous line.
    pub(crate) fn draw(&mut self, text: &str) {
        self.last = Some(Instant::now());
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r{text}\x1b[K");
        let _ = e.flush();
        self.shown = true;
    }

    /// Ends the line, so that what is printed next starts on a line of its own.
    pub(crate) fn finish(&mut self) {
        if self.shown {
            eprintln!();
            self.shown = false;
        }
    }

    /// Prints `text` as a line of its own on stderr, the live line (if any) ended first.
    pub(crate) fn say(&mut self, text: &str) {
        self.finish();
        eprintln!("{text}");
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Messages per second, short: `812/s`, `12.3k/s`, `1.25M/s`.
pub(crate) fn rate(n: u64, elapsed: Duration) -> String {
    let r = n as f64 / elapsed.as_secs_f64().max(1e-9);
    if r >= 1e6 {
        format!("{:.2}M/s", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.1}k/s", r / 1e3)
    } else {
        format!("{r:.0}/s")
    }
}

/// Watches for a run that stops progressing: after `notice` with nothing done, says so
/// once (until it progresses again).
pub(crate) struct Stall {
    notice: Duration,
    since: Instant,
    told: bool,
}

impl Stall {
    pub(crate) fn new(notice: Duration) -> Self {
        Self {
            notice,
            since: Instant::now(),
            told: false,
        }
    }

    /// Something completed.
    pub(crate) fn progressed(&mut self) {
        self.since = Instant::now();
        self.told = false;
    }

    /// Once the run has been idle for the notice time, `what` of the idle time: the line
    /// to say (once per stall).
    pub(crate) fn check(&mut self, what: impl FnOnce(Duration) -> String) -> Option<String> {
        if self.told || self.since.elapsed() < self.notice {
            return None;
        }
        self.told = true;
        Some(what(self.since.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(rate(812, Duration::from_secs(1)), "812/s");
        assert_eq!(rate(123_000, Duration::from_secs(10)), "12.3k/s");
        assert_eq!(rate(2_500_000, Duration::from_secs(2)), "1.25M/s");
    }
}
