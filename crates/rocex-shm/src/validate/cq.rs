//! Completions: the daemon writes them, the application reads and checks them.

use crate::desc::{Cqe, wc_flags, wc_opcode_from, wc_status_from};
use crate::ring::{Consumer, Producer, RingError};
use core::mem::size_of;
use rocex_verbs_types::WorkCompletion;
use zerocopy::{FromBytes, IntoBytes};

use super::error::copy_error;
use super::{DescError, ReadError};

/// Converts a CQE copied from a CQ into a completion (the application's check of the
/// daemon's output; a library must not trust a corrupted CQ either).
pub fn check_cqe(c: &Cqe) -> Result<WorkCompletion, DescError> {
    let status = wc_status_from(c.status).ok_or(DescError::BadStatus(c.status))?;
    let opcode = wc_opcode_from(c.opcode).ok_or(DescError::BadWcOpcode(c.opcode))?;
    let known = wc_flags::WITH_IMM | wc_flags::WITH_INV;
    if c.wc_flags & !known != 0 || c.wc_flags == known {
        return Err(DescError::BadWcFlags(c.wc_flags));
    }
    if c.vendor_err != 0 || c.reserved.iter().any(|&w| w != 0) {
        return Err(DescError::ReservedNonZero("cqe reserved"));
    }
    Ok(WorkCompletion {
        wr_id: c.wr_id,
        status,
        opcode,
        byte_len: c.byte_len,
        imm_data: (c.wc_flags & wc_flags::WITH_IMM != 0).then_some(c.imm_or_inv),
        invalidated_rkey: (c.wc_flags & wc_flags::WITH_INV != 0).then_some(c.imm_or_inv),
        qp_num: c.qp_num,
        src_qp: c.src_qp,
    })
}

/// The daemon's writer of one completion queue.
#[derive(Debug)]
pub struct CqWriter<'m> {
    ring: Producer<'m>,
}

impl<'m> CqWriter<'m> {
    /// A writer over a CQ ring producer.
    pub fn new(ring: Producer<'m>) -> Self {
        Self { ring }
    }

    /// Queues one completion; [`RingError::Full`] is a CQ overrun.
    pub fn push(&mut self, wc: &WorkCompletion) -> Result<(), RingError> {
        self.ring.push(Cqe::from(wc).as_bytes())
    }

    /// Publishes queued completions; true when the application armed the CQ and its
    /// completion-channel eventfd must be written.
    #[must_use = "when true the application waits on the CQ eventfd"]
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }
}

/// The application's reader of one completion queue.
#[derive(Debug)]
pub struct CqReader<'m> {
    ring: Consumer<'m>,
}

impl<'m> CqReader<'m> {
    /// A reader over a CQ ring consumer.
    pub fn new(ring: Consumer<'m>) -> Self {
        Self { ring }
    }

    /// The underlying consumer (release, arm with `prepare_sleep`).
    pub fn ring(&mut self) -> &mut Consumer<'m> {
        &mut self.ring
    }

    /// The next completion (`ibv_poll_cq` for one entry).
    pub fn poll(&mut self) -> Result<Option<WorkCompletion>, ReadError> {
        let mut b = [0u8; size_of::<Cqe>()];
        if !self.ring.pop_into(&mut b)? {
            return Ok(None);
        }
        let Ok(c) = Cqe::read_from_bytes(&b[..]) else {
            return Err(copy_error());
        };
        check_cqe(&c).map(Some).map_err(|error| ReadError::Desc {
            wr_id: c.wr_id,
            error,
        })
    }
}
