//! One error per way a memory operation or access check can fail.
//!
//! The engine maps these to wire outcomes: a failed rkey check becomes a remote access
//! error NAK, a failed lkey check a local protection error completion, and
//! [`MemError::NotInvalidatable`] on SEND_WITH_INV moves the responder QP to error.

use core::fmt;

use crate::{Access, AccessFault, FlushError, PdId};

/// Why a memory operation or access check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemError {
    /// No live protection domain has this id.
    UnknownPd {
        /// The id asked for.
        pd: PdId,
    },
    /// No live region or window has this key (in the role the call needs: an lkey, an rkey,
    /// or a window's rkey).
    UnknownKey {
        /// The key asked for.
        key: u32,
    },
    /// The key belongs to another protection domain.
    WrongPd,
    /// The region or window does not grant the rights the access needs.
    AccessDenied {
        /// Rights the access needs.
        need: Access,
        /// Rights the region or window grants.
        have: Access,
    },
    /// The range does not lie inside the region, window or target.
    OutOfBounds {
        /// First address (or offset) of the range.
        addr: u64,
        /// Length of the range.
        len: u64,
    },
    /// The range's end does not fit in 64 bits.
    Overflow,
    /// The object is still in use: a PD with regions or windows, a region with bound windows.
    Busy,
    /// The access flags are not a valid combination for the operation.
    InvalidAccess(&'static str),
    /// The rkey names a memory region or a type-1 memory window, which SEND_WITH_INV and
    /// LOCAL_INV cannot invalidate.
    NotInvalidatable,
    /// The rkey names a type-2 memory window that is not bound (never bound, or invalidated).
    Invalidated,
    /// A type-2 window can only be bound after it has been invalidated.
    MwBound,
    /// The region is asked to cover more bytes than its backing memory has.
    RegionTooShort {
        /// Bytes asked for.
        len: u64,
        /// Bytes the backing memory has.
        available: u64,
    },
    /// An 8-byte atomic was asked at an offset that is not 8-aligned.
    Misaligned {
        /// The offending offset in the backing region.
        offset: u64,
    },
    /// The backing region could not flush.
    Flush(FlushError),
    /// The backing region's memory could not be reached (its owner unmapped it or exited).
    Fault(AccessFault),
    /// No unused key could be drawn; the key space is (nearly) full.
    KeysExhausted,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPd { pd } => write!(f, "No protection domain {pd} exists."),
            Self::UnknownKey { key } => write!(f, "No live region or window has key {key:#010x}."),
            Self::WrongPd => f.write_str("The key belongs to another protection domain."),
            Self::AccessDenied { need, have } => {
                write!(f, "The access needs {need} but only {have} is granted.")
            }
            Self::OutOfBounds { addr, len } => write!(
                f,
                "The {len} bytes at {addr:#x} do not lie inside the registered range."
            ),
            Self::Overflow => f.write_str("The address plus the length overflows 64 bits."),
            Self::Busy => f.write_str("The object is still referenced and cannot be freed."),
            Self::InvalidAccess(why) => write!(f, "The access flags are invalid: {why}."),
            Self::NotInvalidatable => f.write_str(
                "The key names a memory region or a type-1 window, which cannot be invalidated.",
            ),
            Self::Invalidated => f.write_str("The memory window is not bound or was invalidated."),
            Self::MwBound => f.write_str(
                "The type-2 memory window is still bound and must be invalidated first.",
            ),
            Self::RegionTooShort { len, available } => write!(
                f,
                "The region asks for {len} bytes but its memory has only {available}."
            ),
            Self::Misaligned { offset } => {
                write!(f, "The atomic at offset {offset:#x} is not 8-byte aligned.")
            }
            Self::Flush(e) => fmt::Display::fmt(e, f),
            Self::Fault(e) => fmt::Display::fmt(e, f),
            Self::KeysExhausted => f.write_str("No unused memory key could be drawn."),
        }
    }
}

impl std::error::Error for MemError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Flush(e) => Some(e),
            Self::Fault(e) => Some(e),
            _ => None,
        }
    }
}

impl From<AccessFault> for MemError {
    fn from(e: AccessFault) -> Self {
        Self::Fault(e)
    }
}

impl From<FlushError> for MemError {
    fn from(e: FlushError) -> Self {
        Self::Flush(e)
    }
}
