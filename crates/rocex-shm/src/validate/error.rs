//! The faults a descriptor or a ring can have.

use crate::ring::RingError;
use core::fmt;
use rocex_verbs_types::WcStatus;

/// One malformed descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DescError {
    /// An opcode libibverbs does not define.
    BadOpcode(u8),
    /// A defined opcode rocex does not implement (LOCAL_INV, BIND_MW, ...).
    UnsupportedOpcode(u8),
    /// The opcode is not valid on this QP type (e.g. READ on UD).
    OpcodeNotOnQpType(u8),
    /// Undefined flag bits.
    ReservedFlags(u16),
    /// A reserved field is not zero.
    ReservedNonZero(&'static str),
    /// More SGEs than the QP's cap or the slot allows.
    TooManySges {
        /// SGEs in the descriptor.
        num: u32,
        /// The limit.
        max: u32,
    },
    /// More inline bytes than the slot holds.
    InlineOverSlot {
        /// Inline bytes in the descriptor.
        len: u32,
        /// Bytes after the descriptor in a slot.
        max: u32,
    },
    /// More inline bytes than the QP's `max_inline_data`.
    InlineOverQpMax {
        /// Inline bytes in the descriptor.
        len: u32,
        /// The QP's cap.
        max: u32,
    },
    /// INLINE on an operation whose local data is a destination (READ, atomics, FLUSH).
    InlineNotAllowed(u8),
    /// `inline_len` set without the INLINE flag.
    InlineLenWithoutFlag(u32),
    /// INLINE with `num_sge` set.
    SgesWithInline(u8),
    /// A UD send without a destination.
    UdWithoutDest,
    /// A destination on a connected QP.
    DestOnConnectedQp,
    /// `ud_family` is not 0, 4 or 6.
    BadAddressFamily(u8),
    /// A destination QP number over 24 bits.
    QpnOutOfRange(u32),
    /// An atomic needs exactly one 8-byte SGE.
    AtomicSge {
        /// SGEs in the descriptor.
        num: u32,
        /// Length of the first.
        len: u32,
    },
    /// An atomic's remote address is not 8-byte aligned.
    MisalignedAtomic(u64),
    /// FLUSH with a placement type outside 1..=3 or a level over 1.
    BadFlush {
        /// Placement type bits.
        placement: u8,
        /// Selectivity level.
        level: u8,
    },
    /// The SGE lengths add up to more than 2^31 bytes.
    LengthOverflow(u64),
    /// A CQE status libibverbs does not define.
    BadStatus(u32),
    /// A CQE opcode libibverbs does not define.
    BadWcOpcode(u32),
    /// Undefined or contradictory CQE flags.
    BadWcFlags(u32),
}

impl DescError {
    /// The status the daemon completes the bad request with.
    pub const fn wc_status(&self) -> WcStatus {
        match self {
            Self::TooManySges { .. }
            | Self::InlineOverSlot { .. }
            | Self::InlineOverQpMax { .. }
            | Self::AtomicSge { .. }
            | Self::LengthOverflow(_) => WcStatus::LocLenErr,
            _ => WcStatus::LocQpOpErr,
        }
    }
}

impl fmt::Display for DescError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadOpcode(o) => write!(f, "opcode {o} is not defined"),
            Self::UnsupportedOpcode(o) => write!(f, "opcode {o} is not supported"),
            Self::OpcodeNotOnQpType(o) => write!(f, "opcode {o} is not valid on this QP type"),
            Self::ReservedFlags(b) => write!(f, "reserved send flag bits {b:#x} are set"),
            Self::ReservedNonZero(n) => write!(f, "reserved field {n} is not zero"),
            Self::TooManySges { num, max } => write!(f, "{num} SGEs, at most {max} allowed"),
            Self::InlineOverSlot { len, max } => {
                write!(f, "{len} inline bytes exceed the slot's {max}")
            }
            Self::InlineOverQpMax { len, max } => {
                write!(
                    f,
                    "{len} inline bytes exceed the QP's max_inline_data {max}"
                )
            }
            Self::InlineNotAllowed(o) => write!(f, "opcode {o} cannot carry inline data"),
            Self::InlineLenWithoutFlag(n) => write!(f, "inline_len {n} without the INLINE flag"),
            Self::SgesWithInline(n) => write!(f, "{n} SGEs on an INLINE request"),
            Self::UdWithoutDest => f.write_str("UD send without a destination"),
            Self::DestOnConnectedQp => f.write_str("UD destination on a connected QP"),
            Self::BadAddressFamily(a) => write!(f, "address family {a} is not 0, 4 or 6"),
            Self::QpnOutOfRange(q) => write!(f, "destination QPN {q:#x} exceeds 24 bits"),
            Self::AtomicSge { num, len } => {
                write!(
                    f,
                    "atomic with {num} SGEs (first {len} bytes); needs one of 8 bytes"
                )
            }
            Self::MisalignedAtomic(a) => write!(f, "atomic address {a:#x} is not 8-byte aligned"),
            Self::BadFlush { placement, level } => {
                write!(f, "FLUSH placement {placement} / level {level} is invalid")
            }
            Self::LengthOverflow(n) => write!(f, "message of {n} bytes exceeds 2^31"),
            Self::BadStatus(s) => write!(f, "completion status {s} is not defined"),
            Self::BadWcOpcode(o) => write!(f, "completion opcode {o} is not defined"),
            Self::BadWcFlags(b) => write!(f, "completion flags {b:#x} are invalid"),
        }
    }
}

impl std::error::Error for DescError {}

/// Why the next entry could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The ring is broken: nothing consumed. Move the queue to the error state.
    Ring(RingError),
    /// One descriptor is malformed. It was consumed: complete `wr_id` with
    /// `error.wc_status()`.
    Desc {
        /// The descriptor's `wr_id`, as read (the only field reported back as is).
        wr_id: u64,
        /// The fault.
        error: DescError,
    },
}

impl ReadError {
    /// The fault of the descriptor of `wr_id`, for `map_err`.
    pub(super) fn of_desc(wr_id: u64) -> impl Fn(DescError) -> Self + Copy {
        move |error| Self::Desc { wr_id, error }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ring(e) => write!(f, "{e}"),
            Self::Desc { wr_id, error } => write!(f, "work request {wr_id:#x}: {error}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<RingError> for ReadError {
    fn from(e: RingError) -> Self {
        Self::Ring(e)
    }
}

impl From<crate::mem::MemError> for ReadError {
    fn from(e: crate::mem::MemError) -> Self {
        Self::Ring(RingError::Mem(e))
    }
}

/// A conversion that cannot fail on a correctly sized buffer, reported instead of unwrapped.
pub(super) fn copy_error() -> ReadError {
    ReadError::Ring(RingError::TooLarge {
        len: 0,
        slot_size: 0,
    })
}
