//! One error type for every call: completion statuses, local checks, the device and the
//! connection, each as a variant that says what happened.

use std::fmt;
use std::io;

use rocex_verbs::verbs::WcStatus;

use crate::exchange::HandshakeError;

/// The operation an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// RDMA WRITE (with or without immediate data).
    Write,
    /// RDMA READ.
    Read,
    /// SEND (with or without immediate data).
    Send,
    /// A receive of the library's pool.
    Recv,
    /// Atomic fetch and add.
    FetchAdd,
    /// Atomic compare and swap.
    CompareSwap,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Write => "RDMA write",
            Self::Read => "RDMA read",
            Self::Send => "send",
            Self::Recv => "receive",
            Self::FetchAdd => "fetch-and-add",
            Self::CompareSwap => "compare-and-swap",
        })
    }
}

/// Which side of an operation a range check refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The local [`Buffer`](crate::Buffer).
    Local,
    /// The peer's [`RemoteBuffer`](crate::RemoteBuffer).
    Remote,
}

/// Why a call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The device (the `rocexd` behind it) failed or refused a request.
    Device(rocex_verbs::Error),
    /// The out-of-band TCP connection (or a wait on the device) failed.
    Io(io::Error),
    /// The peer's side of the out-of-band exchange was malformed or out of order.
    Handshake(HandshakeError),
    /// The peer refused access: the token's rkey is wrong or revoked, the range lies
    /// outside what it grants, or it lacks the right (`IBV_WC_REM_ACCESS_ERR`).
    RemoteAccess {
        /// The refused operation.
        op: Op,
    },
    /// The peer could not accept the request, e.g. a message longer than its receive
    /// buffer (`IBV_WC_REM_INV_REQ_ERR`).
    RemoteInvalidRequest {
        /// The refused operation.
        op: Op,
    },
    /// The peer failed to carry out the request (`IBV_WC_REM_OP_ERR`).
    RemoteOperation {
        /// The failed operation.
        op: Op,
    },
    /// The peer stopped answering: every retransmission timed out
    /// (`IBV_WC_RETRY_EXC_ERR`).
    RetryExceeded {
        /// The operation that was not acknowledged.
        op: Op,
    },
    /// The peer kept answering "receiver not ready" (`IBV_WC_RNR_RETRY_EXC_ERR`).
    ReceiverNotReady {
        /// The operation.
        op: Op,
    },
    /// The connection broke on an earlier error; this operation was flushed
    /// (`IBV_WC_WR_FLUSH_ERR`).
    Flushed {
        /// The flushed operation.
        op: Op,
    },
    /// Another completion error.
    Completion {
        /// The operation.
        op: Op,
        /// Its status.
        status: WcStatus,
    },
    /// The peer closed the connection (or its host stopped answering TCP keepalives).
    Disconnected,
    /// A range lies outside a buffer; nothing was sent.
    OutOfRange {
        /// Which buffer.
        side: Side,
        /// First byte asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The buffer's length.
        size: u64,
    },
    /// An atomic's target is not 8-byte aligned; nothing was sent.
    Misaligned {
        /// The remote address.
        addr: u64,
    },
    /// A message is longer than the peer's receive buffers (or 2^31 bytes).
    MessageTooLarge {
        /// The message's length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The next received message does not fit the buffer given; it stays queued.
    BufferTooSmall {
        /// The message's length.
        needed: usize,
        /// The buffer's length.
        have: usize,
    },
    /// The buffer belongs to another [`Device`](crate::Device) than the connection.
    WrongDevice,
    /// A [`RemoteBuffer`](crate::RemoteBuffer) token could not be decoded.
    BadToken(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Device(e) => write!(f, "rocex device: {e}"),
            Self::Io(e) => write!(f, "I/O error: {e}"),
            Self::Handshake(e) => write!(f, "connection setup: {e}"),
            Self::RemoteAccess { op } => write!(
                f,
                "the peer refused the {op}: the token's key, range or rights do not allow it"
            ),
            Self::RemoteInvalidRequest { op } => write!(
                f,
                "the peer could not accept the {op} (is the message longer than its receive buffers?)"
            ),
            Self::RemoteOperation { op } => write!(f, "the peer failed to carry out the {op}"),
            Self::RetryExceeded { op } => write!(
                f,
                "the peer stopped answering: the {op} was retransmitted until the retry count ran out"
            ),
            Self::ReceiverNotReady { op } => {
                write!(
                    f,
                    "the peer had no receive ready for the {op}, too many times"
                )
            }
            Self::Flushed { op } => write!(
                f,
                "the {op} was flushed: the connection broke on an earlier error"
            ),
            Self::Completion { op, status } => write!(f, "the {op} failed with {status:?}"),
            Self::Disconnected => f.write_str("the peer closed the connection"),
            Self::OutOfRange {
                side,
                offset,
                len,
                size,
            } => write!(
                f,
                "{len} bytes at offset {offset} lie outside the {} buffer of {size} bytes",
                match side {
                    Side::Local => "local",
                    Side::Remote => "remote",
                }
            ),
            Self::Misaligned { addr } => {
                write!(f, "atomic target {addr:#x} is not 8-byte aligned")
            }
            Self::MessageTooLarge { len, max } => {
                write!(f, "a {len}-byte message exceeds the limit of {max} bytes")
            }
            Self::BufferTooSmall { needed, have } => write!(
                f,
                "the next message has {needed} bytes but the buffer holds {have}"
            ),
            Self::WrongDevice => {
                f.write_str("the buffer was allocated on another device than the connection's")
            }
            Self::BadToken(why) => write!(f, "malformed remote buffer token: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Device(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::Handshake(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rocex_verbs::Error> for Error {
    fn from(e: rocex_verbs::Error) -> Self {
        Self::Device(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<HandshakeError> for Error {
    fn from(e: HandshakeError) -> Self {
        Self::Handshake(e)
    }
}

impl Error {
    /// The operation a completion error belongs to, if it is one.
    pub fn op(&self) -> Option<Op> {
        match self {
            Self::RemoteAccess { op }
            | Self::RemoteInvalidRequest { op }
            | Self::RemoteOperation { op }
            | Self::RetryExceeded { op }
            | Self::ReceiverNotReady { op }
            | Self::Flushed { op }
            | Self::Completion { op, .. } => Some(*op),
            _ => None,
        }
    }

    /// The error of a failed completion. Retries running out, or a flush, after the peer
    /// closed the connection is [`Error::Disconnected`]: that is the cause.
    pub(crate) fn of_status(status: WcStatus, op: Op, disconnected: bool) -> Self {
        match status {
            WcStatus::RemAccessErr => Self::RemoteAccess { op },
            WcStatus::RemInvReqErr => Self::RemoteInvalidRequest { op },
            WcStatus::RemOpErr => Self::RemoteOperation { op },
            WcStatus::RetryExcErr | WcStatus::WrFlushErr if disconnected => Self::Disconnected,
            WcStatus::RetryExcErr => Self::RetryExceeded { op },
            WcStatus::RnrRetryExcErr => Self::ReceiverNotReady { op },
            WcStatus::WrFlushErr => Self::Flushed { op },
            status => Self::Completion { op, status },
        }
    }
}

/// A result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
