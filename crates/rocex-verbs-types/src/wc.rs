//! Work completions (`struct ibv_wc`) with their statuses and opcodes.

use crate::SendOp;

/// Completion status (`enum ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum WcStatus {
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

/// Completion opcode (`enum ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum WcOpcode {
    Send = 0,
    RdmaWrite = 1,
    RdmaRead = 2,
    CompSwap = 3,
    FetchAdd = 4,
    BindMw = 5,
    LocalInv = 6,
    Flush = 8,
    AtomicWrite = 9,
    Recv = 128,
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// The completion opcode of a send operation.
    pub const fn of(op: &SendOp) -> Self {
        match op {
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_) => Self::Send,
            SendOp::Write(_) | SendOp::WriteWithImm(..) => Self::RdmaWrite,
            SendOp::Read(_) => Self::RdmaRead,
            SendOp::CompareSwap { .. } => Self::CompSwap,
            SendOp::FetchAdd { .. } => Self::FetchAdd,
            SendOp::AtomicWrite { .. } => Self::AtomicWrite,
            SendOp::Flush { .. } => Self::Flush,
        }
    }
}

/// A work completion (`struct ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkCompletion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (receive completions) or moved.
    pub byte_len: u32,
    /// Immediate data of the message, if any.
    pub imm_data: Option<u32>,
    /// The R_Key a SEND_WITH_INV invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The local QP.
    pub qp_num: u32,
    /// The sender's QP (UD receives).
    pub src_qp: u32,
}
