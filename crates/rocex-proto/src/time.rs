//! Time as the caller gives it: the engine never reads a clock.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds from an origin the caller chooses.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Self = Self(0);

    /// `ns` nanoseconds after the origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }

    /// `us` microseconds after the origin.
    pub const fn from_micros(us: u64) -> Self {
        Self(us.saturating_mul(1000))
    }

    /// `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub const fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Self) -> Duration {
        self.since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}ms", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

/// The local ACK timeout: 4.096 us x 2^`timeout` (IBTA §9.7.6.1.3 and rxe), none for 0.
pub fn ack_timeout(timeout: u8) -> Option<Duration> {
    (timeout != 0).then(|| Duration::from_nanos(4096u64 << timeout.min(31)))
}

/// The RNR NAK timer table (IBTA §9.7.5.2.8, table 46), in microseconds: code 0 is
/// 655.36 ms, codes 1-31 run from 0.01 ms to 491.52 ms.
pub const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The delay an RNR NAK with timer code `code` asks for.
pub fn rnr_delay(code: u8) -> Duration {
    Duration::from_micros(u64::from(RNR_TIMER_US[usize::from(code & 0x1f)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_timeout_doubles() {
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(1), Some(Duration::from_nanos(8192)));
        assert_eq!(ack_timeout(14), Some(Duration::from_nanos(67_108_864)));
    }

    #[test]
    fn rnr_table_matches_the_spec() {
        assert_eq!(rnr_delay(0), Duration::from_micros(655_360));
        assert_eq!(rnr_delay(12), Duration::from_micros(640));
        assert_eq!(rnr_delay(25), Duration::from_micros(61_440));
        assert_eq!(rnr_delay(31), Duration::from_micros(491_520));
    }
}
