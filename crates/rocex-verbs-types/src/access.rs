//! Access flags, with the bit values of libibverbs' `enum ibv_access_flags`.
//!
//! The values are the ones applications already pass to `ibv_reg_mr` and `ibv_bind_mw`, so
//! the verbs layer can hand them through unchanged.

use core::fmt;
use core::ops::{BitAnd, BitOr, BitOrAssign};

/// A set of access rights for a memory region or window, or the rights an access needs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// The local side may write (receive buffers, READ response targets, atomic results).
    pub const LOCAL_WRITE: Self = Self(1);
    /// A peer may RDMA WRITE.
    pub const REMOTE_WRITE: Self = Self(1 << 1);
    /// A peer may RDMA READ.
    pub const REMOTE_READ: Self = Self(1 << 2);
    /// A peer may run atomics (compare-and-swap, fetch-and-add, ATOMIC_WRITE).
    pub const REMOTE_ATOMIC: Self = Self(1 << 3);
    /// Memory windows may be bound to the region.
    pub const MW_BIND: Self = Self(1 << 4);
    /// Remote addresses count from 0 at the first byte instead of from the iova.
    pub const ZERO_BASED: Self = Self(1 << 5);
    /// A peer may FLUSH to global visibility.
    pub const FLUSH_GLOBAL: Self = Self(1 << 8);
    /// A peer may FLUSH to persistence; the backing region must be persistent.
    pub const FLUSH_PERSISTENT: Self = Self(1 << 9);

    /// Every right that lets a peer reach the memory through an rkey.
    pub const REMOTE: Self = Self(
        Self::REMOTE_WRITE.0
            | Self::REMOTE_READ.0
            | Self::REMOTE_ATOMIC.0
            | Self::FLUSH_GLOBAL.0
            | Self::FLUSH_PERSISTENT.0,
    );

    const NAMED: [(Self, &'static str); 8] = [
        (Self::LOCAL_WRITE, "LOCAL_WRITE"),
        (Self::REMOTE_WRITE, "REMOTE_WRITE"),
        (Self::REMOTE_READ, "REMOTE_READ"),
        (Self::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
        (Self::MW_BIND, "MW_BIND"),
        (Self::ZERO_BASED, "ZERO_BASED"),
        (Self::FLUSH_GLOBAL, "FLUSH_GLOBAL"),
        (Self::FLUSH_PERSISTENT, "FLUSH_PERSISTENT"),
    ];

    /// Every bit this crate knows.
    const KNOWN: u32 = 0x33f;

    /// No rights.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// Every known right.
    pub const fn all() -> Self {
        Self(Self::KNOWN)
    }

    /// The raw bits, as libibverbs spells them.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The known bits of `bits`; unknown bits are dropped.
    pub const fn from_bits_truncate(bits: u32) -> Self {
        Self(bits & Self::KNOWN)
    }

    /// The rights in `bits`, or `None` if it holds a bit this crate does not know.
    pub const fn from_bits(bits: u32) -> Option<Self> {
        if bits & !Self::KNOWN == 0 {
            Some(Self(bits))
        } else {
            None
        }
    }

    /// Whether no right is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every right in `other` is also in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a right.
    pub const fn intersects(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    /// The rights in either set.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The rights in both sets.
    #[must_use]
    pub const fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// The rights of `self` that are not in `other`.
    #[must_use]
    pub const fn difference(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
}

impl BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Self) {
        *self = self.union(rhs);
    }
}

impl BitAnd for Access {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        self.intersection(rhs)
    }
}

impl fmt::Display for Access {
    /// Prints the flag names joined by `|`, or `empty`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("empty");
        }
        let mut first = true;
        for (flag, name) in Self::NAMED {
            if self.contains(flag) {
                if !first {
                    f.write_str(" | ")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Access({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::Access;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
        assert_eq!(Access::REMOTE_WRITE.bits(), 2);
        assert_eq!(Access::REMOTE_READ.bits(), 4);
        assert_eq!(Access::REMOTE_ATOMIC.bits(), 8);
        assert_eq!(Access::MW_BIND.bits(), 16);
        assert_eq!(Access::ZERO_BASED.bits(), 32);
        assert_eq!(Access::FLUSH_GLOBAL.bits(), 256);
        assert_eq!(Access::FLUSH_PERSISTENT.bits(), 512);
        let all = Access::NAMED
            .iter()
            .fold(Access::empty(), |acc, (flag, _)| acc | *flag);
        assert_eq!(all, Access::all());
    }

    #[test]
    fn set_operations() {
        let rw = Access::LOCAL_WRITE | Access::REMOTE_READ;
        assert!(rw.contains(Access::REMOTE_READ));
        assert!(rw.contains(Access::empty()));
        assert!(!rw.contains(Access::REMOTE_READ | Access::REMOTE_WRITE));
        assert!(rw.intersects(Access::REMOTE));
        assert_eq!(rw.difference(Access::LOCAL_WRITE), Access::REMOTE_READ);
        assert_eq!(Access::from_bits_truncate(0xffff_ffff), Access::all());
        assert_eq!(Access::from_bits(1 << 6), None);
        assert_eq!(format!("{rw:?}"), "Access(LOCAL_WRITE | REMOTE_READ)");
        assert_eq!(Access::empty().to_string(), "empty");
    }
}
