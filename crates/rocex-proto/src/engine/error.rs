//! Why a verbs call failed.

use rocex_mem::MemError;

use crate::qp::state::TransitionError;
use crate::verbs::QpState;

/// Why a verbs call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerbsError {
    /// No QP has this number.
    NoSuchQp(u32),
    /// No CQ has this number.
    NoSuchCq(u32),
    /// A CQ still has QPs attached.
    CqBusy(u32),
    /// The memory layer refused.
    Mem(MemError),
    /// The QP cannot make this transition.
    Transition(TransitionError),
    /// The QP's state does not allow the call.
    InvalidState(QpState),
    /// The queue is full.
    QueueFull,
    /// More SGEs than the QP was created for.
    TooManySge,
    /// More inline data than the QP was created for.
    InlineTooLong,
    /// The operation is not available on this QP type, or its operands are wrong.
    BadRequest(&'static str),
    /// The message exceeds what the transport can carry.
    MessageTooLong,
    /// A device limit (QPs, CQ depth) is reached.
    Limit(&'static str),
    /// An attribute value is out of range.
    BadAttribute(&'static str),
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchQp(q) => write!(f, "no QP has number {q:#x}"),
            Self::NoSuchCq(c) => write!(f, "no CQ has number {c}"),
            Self::CqBusy(c) => write!(f, "CQ {c} still has QPs attached"),
            Self::Mem(e) => write!(f, "{e}"),
            Self::Transition(e) => write!(f, "{e}"),
            Self::InvalidState(s) => {
                write!(f, "the QP is in state {s:?}, which does not allow this")
            }
            Self::QueueFull => write!(f, "the work queue is full"),
            Self::TooManySge => write!(f, "the work request has more SGEs than the QP allows"),
            Self::InlineTooLong => write!(f, "the inline data is longer than the QP allows"),
            Self::BadRequest(why) => write!(f, "bad work request: {why}"),
            Self::MessageTooLong => write!(f, "the message is longer than the transport carries"),
            Self::Limit(what) => write!(f, "device limit reached: {what}"),
            Self::BadAttribute(what) => write!(f, "bad attribute: {what}"),
        }
    }
}

impl std::error::Error for VerbsError {}

impl From<MemError> for VerbsError {
    fn from(e: MemError) -> Self {
        Self::Mem(e)
    }
}
