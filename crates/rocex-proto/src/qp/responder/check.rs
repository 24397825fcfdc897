//! The checks an in-sequence request passes before it executes, in rxe's order
//! (`check_op_seq`, `check_op_valid`, then `check_length`; the READ/atomic resources,
//! `check_rd_atomic`, and the receive queue, in `rc_execute`, are checked between the last
//! two). Each refusal is an invalid request (NAK 0x61).

use rocex_mem::Access;
use rocex_wire::opcode::{Operation, Position};
use rocex_wire::{OpcodeInfo, PacketRepr};

use super::{INVALID, InMsg, Refusal};
use crate::qp::Qp;
use crate::verbs::flush_access;

/// The largest DMA length a RETH may carry (rxe `check_length`).
const MAX_DMA_LEN: u32 = 1 << 31;

impl Qp {
    /// Opcode sequence (C9-91..C9-94): a message in progress continues, otherwise one starts.
    pub(super) fn check_sequence(&self, info: &OpcodeInfo) -> Result<(), Refusal> {
        let continuing = matches!(info.position, Position::Middle | Position::Last);
        let ok = match &self.resp.msg {
            Some(InMsg::Send { .. }) => continuing && info.operation == Operation::Send,
            Some(InMsg::Write { .. }) => continuing && info.operation == Operation::Write,
            None => !continuing,
        };
        if ok { Ok(()) } else { Err(INVALID) }
    }

    /// The QP's access flags allow the operation (C9-35): a FLUSH needs the flag of each
    /// placement type it asks for, before its rkey is looked at (rxe
    /// `check_qp_attr_access`, an invalid request).
    pub(super) fn check_access(
        &self,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Refusal> {
        let flags = self.attr.qp_access_flags;
        let need = match info.operation {
            Operation::Write | Operation::AtomicWrite => Access::REMOTE_WRITE,
            Operation::ReadRequest => Access::REMOTE_READ,
            Operation::CompareSwap | Operation::FetchAdd => Access::REMOTE_ATOMIC,
            Operation::Flush => flush_access(pkt.feth.map_or(0, |f| f.placement)),
            _ => return Ok(()),
        };
        if flags.contains(need) {
            Ok(())
        } else {
            Err(INVALID)
        }
    }

    /// A READ or atomic takes a responder resource: refused when the QP offers none
    /// (`max_dest_rd_atomic` 0).
    pub(super) fn check_rd_atomic(&self, info: &OpcodeInfo) -> Result<(), Refusal> {
        let needs = matches!(
            info.operation,
            Operation::ReadRequest | Operation::CompareSwap | Operation::FetchAdd
        );
        if needs && self.attr.max_dest_rd_atomic == 0 {
            Err(INVALID)
        } else {
            Ok(())
        }
    }

    /// Payload lengths against the path MTU (C9-100..C9-101) and the RETH length limit.
    pub(super) fn check_length(
        &self,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Refusal> {
        let mtu = self.mtu() as usize;
        let n = pkt.payload.len();
        let ok = match info.position {
            Position::Only => n <= mtu,
            Position::First | Position::Middle => n == mtu,
            Position::Last => n > 0 && n <= mtu,
        };
        let reth_ok = pkt.reth.is_none_or(|r| r.dma_len <= MAX_DMA_LEN);
        if (ok || !info.payload) && reth_ok {
            Ok(())
        } else {
            Err(INVALID)
        }
    }
}
