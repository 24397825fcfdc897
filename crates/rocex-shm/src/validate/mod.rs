//! The daemon's side of SQ and RQ, and the application's side of CQ: every descriptor is
//! copied once out of shared memory and checked into the engine's types.
//!
//! Each fault has its own [`DescError`]. A bad descriptor is consumed, so the daemon can
//! complete it with [`DescError::wc_status`] (carrying its `wr_id`) and go on; a broken ring
//! ([`RingError`](crate::RingError)) consumes nothing and moves the QP to the error state.
//! No input panics.
//!
//! By what they do: `error` (the faults), `descriptor` (checking one send or receive
//! descriptor into a work request), `reader` (the daemon's SQ and RQ readers), `cq`
//! (completions both ways) and `writer` (the application's SQ and RQ writer).

mod cq;
mod descriptor;
mod error;
mod reader;
mod writer;

pub use cq::{CqReader, CqWriter, check_cqe};
pub use descriptor::{Payload, build_send, check_recv_header, check_send_header, validate_send};
pub use error::{DescError, ReadError};
pub use reader::{QueueReader, RqReader, SqReader};
pub use writer::{PostError, WqWriter};

use rocex_verbs_types::QpType;

use crate::layout::RingKind;

pub use rocex_verbs_types::MAX_MESSAGE;
/// What the daemon allows on one send queue: the QP's type and caps, from its own records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqLimits {
    /// The QP's transport.
    pub qp_type: QpType,
    /// `max_send_sge`.
    pub max_sge: u32,
    /// `max_inline_data`.
    pub max_inline: u32,
}

/// What the daemon allows on one receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RqLimits {
    /// `max_recv_sge`.
    pub max_sge: u32,
}

/// The limits of one kind of queue, which its [`QueueReader`] checks descriptors against.
pub trait QueueLimits: Copy {
    /// The kind of ring the queue is.
    const KIND: RingKind;
}

impl QueueLimits for SqLimits {
    const KIND: RingKind = RingKind::Sq;
}

impl QueueLimits for RqLimits {
    const KIND: RingKind = RingKind::Rq;
}
