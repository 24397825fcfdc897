//! How long a poll waits for the peer's answer, and how often: the policy both lingers
//! share, the direct engine's (`direct/linger.rs`) and the daemon rings' (`answer.rs`).
//!
//! The window follows the answers: twice the last one's delay (no less than a floor),
//! doubled after a wait in vain. Waits in vain in a row make the next 1, 3, 7 ... chances
//! skip the wait, so a program whose peer does not answer quickly, or at all (a bandwidth
//! test's requester), pays the window rarely.

use std::time::Duration;

/// The shortest window the direct engine's polls wait: a few of the peer's system calls
/// (its ACK, its return from the poll, its post), measured 4-7 us on this machine for an
/// answer of one packet.
pub(crate) const MIN_WINDOW: Duration = Duration::from_micros(10);

/// The longest window: a larger answer takes the peer longer to land the request and to
/// send (64 KiB: 30-40 us here), but past a few wake-ups waiting costs more than it saves.
pub(crate) const MAX_WINDOW: Duration = Duration::from_micros(100);

/// The chances skipped after misses in a row grow no further than 2^this - 1.
const MAX_BACKOFF: u32 = 10;

/// Whether waiting for answers has been paying.
#[derive(Debug)]
pub(crate) struct Patience {
    /// How long the next wait lasts.
    window: Duration,
    /// The shortest window.
    floor: Duration,
    misses: Backoff,
    /// Waits an answer ended, waits in vain, and chances skipped after one in vain.
    answered: u64,
    in_vain: u64,
    skipped: u64,
}

impl Patience {
    /// Windows of `floor` to [`MAX_WINDOW`].
    pub(crate) fn new(floor: Duration) -> Self {
        Self {
            window: floor,
            floor,
            misses: Backoff::default(),
            answered: 0,
            in_vain: 0,
            skipped: 0,
        }
    }

    /// A chance to wait: how long, or `None` when waits in vain have it skipped.
    pub(crate) fn chance(&mut self) -> Option<Duration> {
        if self.misses.skip() {
            self.skipped += 1;
            return None;
        }
        Some(self.window)
    }

    /// A wait of `window` is over: the answer came `heard` after it began, or none did.
    pub(crate) fn ended(&mut self, window: Duration, heard: Option<Duration>) {
        if let Some(after) = heard {
            self.window = (after * 2).clamp(self.floor, MAX_WINDOW);
            self.misses.paid();
            self.answered += 1;
        } else {
            self.window = (window * 2).min(MAX_WINDOW);
            self.misses.missed();
            self.in_vain += 1;
        }
    }

    /// Its counters, as `stats` reports them.
    pub(crate) fn counters(&self) -> [(&'static str, u64); 3] {
        [
            ("linger_answered", self.answered),
            ("linger_in_vain", self.in_vain),
            ("linger_skipped", self.skipped),
        ]
    }
}

/// Backing off after misses in a row: the next 1, 3, 7, ... chances are skipped, up to
/// 2^[`MAX_BACKOFF`] - 1, until one pays again.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    misses: u32,
    /// Chances left to skip.
    skip: u32,
}

impl Backoff {
    /// Whether this chance is skipped (one fewer left).
    pub(crate) fn skip(&mut self) -> bool {
        let skip = self.skip > 0;
        self.skip -= u32::from(skip);
        skip
    }

    pub(crate) fn missed(&mut self) {
        self.misses = (self.misses + 1).min(MAX_BACKOFF);
        self.skip = (1 << self.misses) - 1;
    }

    pub(crate) fn paid(&mut self) {
        self.misses = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `n` chances wait, when every wait is in vain.
    fn waits_in_vain(n: u32) -> Vec<u32> {
        let mut p = Patience::new(MIN_WINDOW);
        (1..=n)
            .filter(|_| p.chance().inspect(|&w| p.ended(w, None)).is_some())
            .collect()
    }

    #[test]
    fn waits_in_vain_in_a_row_skip_1_3_7_chances() {
        assert_eq!(waits_in_vain(20), [1, 3, 7, 15]);
        // Capped: after ten misses in a row, one chance in 1 024.
        let w = waits_in_vain(5000);
        assert_eq!(w[10..], [2047, 3071, 4095]);
    }

    #[test]
    fn the_window_follows_the_answers_between_floor_and_ceiling() {
        let mut p = Patience::new(MIN_WINDOW);
        let w = p.chance().unwrap();
        p.ended(w, Some(Duration::from_micros(30)));
        assert_eq!(p.chance(), Some(Duration::from_micros(60)));
        p.ended(Duration::from_micros(60), Some(Duration::from_micros(1)));
        assert_eq!(p.chance(), Some(MIN_WINDOW));
        p.ended(MIN_WINDOW, None);
        // A miss doubles the window and skips the next chance; an answer ends the skipping.
        assert_eq!(p.chance(), None);
        assert_eq!(p.chance(), Some(2 * MIN_WINDOW));
        p.ended(2 * MIN_WINDOW, Some(Duration::from_micros(80)));
        assert_eq!(p.chance(), Some(MAX_WINDOW));
        assert_eq!(p.counters().map(|c| c.1), [3, 1, 1]);
        // The rings' floor is the ceiling: one window whatever the answers.
        let mut rings = Patience::new(MAX_WINDOW);
        rings.ended(MAX_WINDOW, Some(Duration::from_micros(2)));
        assert_eq!(rings.chance(), Some(MAX_WINDOW));
    }
}
