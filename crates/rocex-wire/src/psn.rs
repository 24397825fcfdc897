//! 24-bit packet sequence numbers.

use core::fmt;

/// A packet sequence number: 24 bits that wrap (IBTA §9.7.1).
///
/// PSNs are compared as rxe's `psn_compare` does: by the sign of their 24-bit difference,
/// so a PSN is "after" another when it lies less than 2^23 ahead of it. That order is not
/// transitive across the whole space, so `Psn` deliberately does not implement `Ord`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// The number of distinct PSNs.
    pub const MODULUS: u32 = 1 << 24;
    /// Mask of the 24 PSN bits.
    pub const MASK: u32 = Self::MODULUS - 1;

    /// The PSN of the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Self(v & Self::MASK)
    }

    /// The PSN as a number in `0..2^24`.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// The PSN `n` packets later, wrapping at 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// The PSN `n` packets earlier, wrapping at 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Self {
        Self::new(self.0.wrapping_sub(n))
    }

    /// The signed distance from `other` to `self`, in `-2^23..2^23`.
    pub const fn diff(self, other: Self) -> i32 {
        (self.0.wrapping_sub(other.0) << 8) as i32 >> 8
    }

    /// True when `self` comes after `other`.
    pub const fn is_after(self, other: Self) -> bool {
        self.diff(other) > 0
    }

    /// True when `self` comes before `other`.
    pub const fn is_before(self, other: Self) -> bool {
        self.diff(other) < 0
    }

    /// True when `self` lies in the `len` PSNs that start at `start`.
    pub const fn in_window(self, start: Self, len: u32) -> bool {
        self.0.wrapping_sub(start.0) & Self::MASK < len
    }
}

impl From<u32> for Psn {
    fn from(v: u32) -> Self {
        Self::new(v)
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_24_bits() {
        let p = Psn::new(0xff_fffe);
        assert_eq!(p.add(3).value(), 1);
        assert_eq!(Psn::new(1).sub(3).value(), 0xff_fffe);
        assert_eq!(Psn::new(0x1_000_005).value(), 5);
    }

    #[test]
    fn compares_across_the_wrap() {
        let before = Psn::new(0xff_fff0);
        let after = Psn::new(0x10);
        assert_eq!(after.diff(before), 0x20);
        assert_eq!(before.diff(after), -0x20);
        assert!(after.is_after(before));
        assert!(before.is_before(after));
        assert!(after.in_window(before, 0x21));
        assert!(!after.in_window(before, 0x20));
    }

    #[test]
    fn half_space_is_the_boundary() {
        let a = Psn::new(0);
        assert_eq!(Psn::new(0x7f_ffff).diff(a), 0x7f_ffff);
        assert_eq!(Psn::new(0x80_0000).diff(a), -0x80_0000);
    }

    proptest! {
        #[test]
        fn add_then_diff_is_identity(start in 0u32..Psn::MODULUS, n in 0u32..(1 << 23)) {
            let s = Psn::new(start);
            prop_assert_eq!(s.add(n).diff(s), n as i32);
            prop_assert_eq!(s.add(n).sub(n), s);
            prop_assert!(s.add(n).in_window(s, n + 1));
        }
    }
}
