//! When the daemon polls again and when it sleeps.
//!
//! Spinning answers a doorbell in a pass instead of a wakeup, but on a small machine the
//! core it holds is the one the client needs to post the next request or to see the last
//! completion: two spinning daemons beside two spinning clients on two cores wait for the
//! scheduler's slices, milliseconds (`docs/architecture.md`, "The data path: measured
//! choices"). So the daemon spins only while spinning pays, with the adaptive window of
//! Linux's cpuidle-haltpoll governor (`adjust_poll_limit`): a sleep that ended within
//! [`MAX_WINDOW`] would have been caught by spinning, so the window doubles (from
//! [`START_WINDOW`]); a longer sleep halves it, down to zero. Requests and ACKs a few
//! microseconds apart and round trips through the peer's daemon keep the daemon awake; no
//! traffic puts it to sleep after one empty pass. Each empty pass inside the window yields
//! the core, so that a client waiting on the same core runs at once rather than at the
//! end of the daemon's slice (`docs/architecture.md` has the windows measured).
//!
//! A yield that lasts longer than [`CONTENDED`] handed the core to a thread that does not
//! give it back: a program spinning on its own memory, as perftest's latency tests wait
//! for a WRITE. Yielding on would cost the daemon its place: on EEVDF kernels each yield
//! forfeits the rest of the slice (`yield_task_fair`), so a daemon that keeps yielding
//! falls behind in virtual time and its wakeups no longer preempt the spinner, which
//! then holds the core for milliseconds. So the daemon stops spinning for [`HOLD_OFF`]:
//! it sleeps when idle, and each packet or doorbell wakes it ahead of the spinner.

use std::time::{Duration, Instant};

/// The first window after a short sleep.
const START_WINDOW: Duration = Duration::from_micros(2);
/// The longest window: longer than an 8-byte round trip between two daemons on a small
/// machine (about 15 us), so that a ping-pong keeps both awake.
const MAX_WINDOW: Duration = Duration::from_micros(50);

/// A yield longer than this let another thread hold the core (a yield with nothing else
/// to run returns in a microsecond; a thread that yields back, in tens).
const CONTENDED: Duration = Duration::from_micros(200);
/// How long the daemon sleeps instead of spinning after such a yield.
const HOLD_OFF: Duration = Duration::from_millis(10);

/// The spinning policy's state.
#[derive(Debug)]
pub(crate) struct Spin {
    /// How long empty passes go on before sleeping.
    window: Duration,
    /// At most this many empty passes (`--spin-limit`; 0: never spin).
    max_turns: u32,
    idle_turns: u32,
    idle_since: Option<Instant>,
    /// No spinning before this: a yield met a thread that kept the core.
    held_off_until: Option<Instant>,
}

impl Spin {
    pub(crate) fn new(max_turns: u32) -> Self {
        Self {
            window: Duration::ZERO,
            max_turns,
            idle_turns: 0,
            idle_since: None,
            held_off_until: None,
        }
    }

    /// A pass found work.
    pub(crate) fn busy(&mut self) {
        self.idle_turns = 0;
        self.idle_since = None;
    }

    /// A pass found nothing: true when the daemon should poll again (having yielded the
    /// core), false when it should sleep.
    pub(crate) fn again(&mut self) -> bool {
        let now = Instant::now();
        if !self.may_spin(now) {
            return false;
        }
        std::thread::yield_now();
        self.yielded(now, now.elapsed())
    }

    /// Whether an empty pass at `now` may be followed by another.
    fn may_spin(&mut self, now: Instant) -> bool {
        if self.idle_turns >= self.max_turns
            || self.window.is_zero()
            || self.held_off_until.is_some_and(|t| t > now)
        {
            return false;
        }
        self.idle_turns += 1;
        let since = *self.idle_since.get_or_insert(now);
        now.duration_since(since) < self.window
    }

    /// A yield begun at `at` took `took`: true when spinning goes on.
    fn yielded(&mut self, at: Instant, took: Duration) -> bool {
        if took > CONTENDED {
            self.held_off_until = Some(at + took + HOLD_OFF);
            return false;
        }
        true
    }

    /// The daemon slept for `slept`: adapts the window.
    pub(crate) fn slept(&mut self, slept: Duration) {
        self.busy();
        self.window = if slept <= MAX_WINDOW {
            (self.window * 2).clamp(START_WINDOW, MAX_WINDOW)
        } else if self.window / 2 < START_WINDOW {
            Duration::ZERO
        } else {
            self.window / 2
        };
    }

    #[cfg(test)]
    fn window(&self) -> Duration {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_sleeps_open_the_window_and_long_ones_close_it() {
        let mut s = Spin::new(2000);
        assert!(!s.again(), "a closed window sleeps at once");
        s.slept(Duration::from_micros(3));
        assert_eq!(s.window(), START_WINDOW);
        for _ in 0..8 {
            s.slept(Duration::from_micros(3));
        }
        assert_eq!(s.window(), MAX_WINDOW);
        s.slept(Duration::from_millis(5));
        assert_eq!(s.window(), MAX_WINDOW / 2);
        for _ in 0..8 {
            s.slept(Duration::from_millis(5));
        }
        assert_eq!(s.window(), Duration::ZERO);
    }

    #[test]
    fn a_yield_that_kept_the_core_stops_the_spinning() {
        let mut s = Spin::new(2000);
        for _ in 0..8 {
            s.slept(Duration::from_micros(3));
        }
        let now = Instant::now();
        assert!(s.may_spin(now), "an open window spins");
        assert!(
            s.yielded(now, Duration::from_micros(5)),
            "a short yield spins on"
        );
        assert!(
            !s.yielded(now, Duration::from_millis(2)),
            "a long one stops"
        );
        s.slept(Duration::from_micros(3));
        assert_eq!(s.window(), MAX_WINDOW);
        let later = now + Duration::from_millis(2);
        assert!(!s.may_spin(later), "held off although the window is open");
        assert!(
            s.may_spin(later + HOLD_OFF),
            "spins again once the hold-off is over"
        );
    }

    #[test]
    fn spin_limit_caps_the_empty_passes() {
        let mut s = Spin::new(0);
        s.slept(Duration::from_micros(1));
        assert!(!s.again(), "--spin-limit 0 never spins");
    }
}
