//! The fixed-size descriptors that travel through the rings, and the client-side encoders
//! that turn the engine's verbs types into them.
//!
//! An SQ slot is a [`SendDesc`] (128 bytes) followed by its payload: `num_sge` [`SgeDesc`]s,
//! or `inline_len` bytes of inline data. An RQ slot is a [`RecvDesc`] (16 bytes) followed by
//! `num_sge` [`SgeDesc`]s. A CQ slot is one [`Cqe`] (64 bytes). All fields are in the host's
//! byte order; opcodes, flags and statuses use libibverbs' numbers.

use core::mem::{align_of, size_of};
use core::net::IpAddr;
use rocex_verbs_types::{
    RecvWr, SendData, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// `enum ibv_wr_opcode` values accepted in [`SendDesc::opcode`].
pub mod opcode {
    /// `IBV_WR_RDMA_WRITE`.
    pub const RDMA_WRITE: u8 = 0;
    /// `IBV_WR_RDMA_WRITE_WITH_IMM`.
    pub const RDMA_WRITE_WITH_IMM: u8 = 1;
    /// `IBV_WR_SEND`.
    pub const SEND: u8 = 2;
    /// `IBV_WR_SEND_WITH_IMM`.
    pub const SEND_WITH_IMM: u8 = 3;
    /// `IBV_WR_RDMA_READ`.
    pub const RDMA_READ: u8 = 4;
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`.
    pub const ATOMIC_CMP_AND_SWP: u8 = 5;
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
    pub const ATOMIC_FETCH_AND_ADD: u8 = 6;
    /// `IBV_WR_LOCAL_INV` (not supported yet: refused).
    pub const LOCAL_INV: u8 = 7;
    /// `IBV_WR_BIND_MW` (not supported yet: refused).
    pub const BIND_MW: u8 = 8;
    /// `IBV_WR_SEND_WITH_INV`.
    pub const SEND_WITH_INV: u8 = 9;
    /// `IBV_WR_FLUSH`.
    pub const FLUSH: u8 = 14;
    /// `IBV_WR_ATOMIC_WRITE`.
    pub const ATOMIC_WRITE: u8 = 15;
}

/// Bits of [`SendDesc::flags`]; every other bit is reserved and must be 0.
pub mod send_flags {
    /// `IBV_SEND_FENCE`.
    pub const FENCE: u16 = 1 << 0;
    /// `IBV_SEND_SIGNALED`.
    pub const SIGNALED: u16 = 1 << 1;
    /// `IBV_SEND_SOLICITED`.
    pub const SOLICITED: u16 = 1 << 2;
    /// `IBV_SEND_INLINE`: the payload is `inline_len` bytes of data, not SGEs.
    pub const INLINE: u16 = 1 << 3;
    /// All defined bits.
    pub const ALL: u16 = FENCE | SIGNALED | SOLICITED | INLINE;
}

/// Bits of [`Cqe::wc_flags`] (`enum ibv_wc_flags`).
pub mod wc_flags {
    /// `IBV_WC_WITH_IMM`: `imm_or_inv` holds immediate data.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `IBV_WC_WITH_INV`: `imm_or_inv` holds the invalidated R_Key.
    pub const WITH_INV: u32 = 1 << 3;
}

/// [`SendDesc::ud_family`] values.
pub mod family {
    /// No UD destination.
    pub const NONE: u8 = 0;
    /// IPv4: the address is in the first 4 bytes of `ud_addr`, the rest zero.
    pub const V4: u8 = 4;
    /// IPv6: all 16 bytes of `ud_addr`.
    pub const V6: u8 = 6;
}

/// A scatter/gather entry (`struct ibv_sge`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, Immutable, KnownLayout,
)]
pub struct SgeDesc {
    /// Local virtual address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// The fixed part of an SQ slot.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SendDesc {
    /// Returned in the completion.
    pub wr_id: u64,
    /// An [`opcode`] value.
    pub opcode: u8,
    /// SGEs after the descriptor (0 when INLINE).
    pub num_sge: u8,
    /// [`send_flags`] bits.
    pub flags: u16,
    /// Inline bytes after the descriptor (0 unless INLINE).
    pub inline_len: u32,
    /// Immediate data (`*_WITH_IMM`) or the R_Key to invalidate (`SEND_WITH_INV`).
    pub imm_or_inv: u32,
    /// Remote key (RDMA, atomics, FLUSH).
    pub rkey: u32,
    /// Remote address (RDMA, atomics, FLUSH).
    pub remote_addr: u64,
    /// Compare value (CMP_AND_SWP), addend (FETCH_AND_ADD) or value (ATOMIC_WRITE).
    pub compare_add: u64,
    /// Swap value (CMP_AND_SWP).
    pub swap: u64,
    /// FLUSH length.
    pub flush_len: u32,
    /// FLUSH placement type bits (1 global visibility, 2 persistence).
    pub flush_type: u8,
    /// FLUSH selectivity level (0 range, 1 whole MR).
    pub flush_level: u8,
    /// A [`family`] value: whether a UD destination follows.
    pub ud_family: u8,
    /// Zero.
    pub reserved0: u8,
    /// UD destination address (IPv4 in the first 4 bytes).
    pub ud_addr: [u8; 16],
    /// UD destination QP number (24 bits).
    pub ud_qpn: u32,
    /// UD destination Q_Key.
    pub ud_qkey: u32,
    /// Zero.
    pub reserved: [u32; 12],
}

/// The fixed part of an RQ slot.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RecvDesc {
    /// Returned in the completion.
    pub wr_id: u64,
    /// SGEs after the descriptor.
    pub num_sge: u32,
    /// Zero.
    pub reserved: u32,
}

/// A CQ slot (`struct ibv_wc` in fixed form).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Cqe {
    /// The work request's identifier.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    /// Bytes moved or received.
    pub byte_len: u32,
    /// Immediate data or invalidated R_Key, as `wc_flags` says.
    pub imm_or_inv: u32,
    /// Local QP number.
    pub qp_num: u32,
    /// Source QP (UD receives).
    pub src_qp: u32,
    /// [`wc_flags`] bits.
    pub wc_flags: u32,
    /// Zero.
    pub vendor_err: u32,
    /// Zero.
    pub reserved: [u32; 6],
}

const _: () = {
    assert!(size_of::<SgeDesc>() == 16 && align_of::<SgeDesc>() == 8);
    assert!(size_of::<SendDesc>() == 128 && align_of::<SendDesc>() == 8);
    assert!(size_of::<RecvDesc>() == 16 && align_of::<RecvDesc>() == 8);
    assert!(size_of::<Cqe>() == 64 && align_of::<Cqe>() == 8);
    assert!(core::mem::offset_of!(SendDesc, remote_addr) == 24);
    assert!(core::mem::offset_of!(SendDesc, ud_addr) == 56);
    assert!(core::mem::offset_of!(SendDesc, reserved) == 80);
};

/// SGEs a slot of `slot_size` bytes holds after a fixed descriptor of `fixed` bytes.
pub const fn sge_capacity(slot_size: u32, fixed: usize) -> u32 {
    (slot_size as usize).saturating_sub(fixed) as u32 / size_of::<SgeDesc>() as u32
}

/// Why a client-side encoder refused a work request: the same limits the daemon enforces,
/// caught before the request reaches the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// More SGEs than the slot or the descriptor's u8 count holds.
    TooManySges(usize),
    /// More inline bytes than the slot holds.
    InlineTooLong(usize),
    /// The slot buffer is smaller than the fixed descriptor.
    SlotTooSmall(usize),
}

impl core::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooManySges(n) => write!(f, "{n} SGEs do not fit the slot"),
            Self::InlineTooLong(n) => write!(f, "{n} inline bytes do not fit the slot"),
            Self::SlotTooSmall(n) => write!(f, "a {n}-byte slot cannot hold the descriptor"),
        }
    }
}

impl std::error::Error for EncodeError {}

fn put_sges(slot: &mut [u8], fixed: usize, sges: &[Sge]) -> Result<u8, EncodeError> {
    let room = (slot.len() - fixed) / size_of::<SgeDesc>();
    if sges.len() > room || sges.len() > usize::from(u8::MAX) {
        return Err(EncodeError::TooManySges(sges.len()));
    }
    for (s, out) in sges
        .iter()
        .zip(slot[fixed..].chunks_exact_mut(size_of::<SgeDesc>()))
    {
        let d = SgeDesc {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
        out.copy_from_slice(d.as_bytes());
    }
    Ok(sges.len() as u8)
}

/// Writes `wr` into an SQ slot (`slot.len()` is the ring's slot size). Bytes after the used
/// payload are left as they were.
pub fn encode_send(wr: &SendWr, slot: &mut [u8]) -> Result<(), EncodeError> {
    let fixed = size_of::<SendDesc>();
    if slot.len() < fixed {
        return Err(EncodeError::SlotTooSmall(slot.len()));
    }
    let mut d = SendDesc::new_zeroed();
    d.wr_id = wr.wr_id;
    let mut flags = 0;
    if wr.flags.fence {
        flags |= send_flags::FENCE;
    }
    if wr.flags.signaled {
        flags |= send_flags::SIGNALED;
    }
    if wr.flags.solicited {
        flags |= send_flags::SOLICITED;
    }
    let remote = |d: &mut SendDesc, r: rocex_verbs_types::Remote| {
        d.remote_addr = r.addr;
        d.rkey = r.rkey;
    };
    d.opcode = match wr.op {
        SendOp::Send => opcode::SEND,
        SendOp::SendWithImm(imm) => {
            d.imm_or_inv = imm;
            opcode::SEND_WITH_IMM
        }
        SendOp::SendWithInv(rkey) => {
            d.imm_or_inv = rkey;
            opcode::SEND_WITH_INV
        }
        SendOp::Write(r) => {
            remote(&mut d, r);
            opcode::RDMA_WRITE
        }
        SendOp::WriteWithImm(r, imm) => {
            remote(&mut d, r);
            d.imm_or_inv = imm;
            opcode::RDMA_WRITE_WITH_IMM
        }
        SendOp::Read(r) => {
            remote(&mut d, r);
            opcode::RDMA_READ
        }
        SendOp::CompareSwap {
            remote: r,
            compare,
            swap,
        } => {
            remote(&mut d, r);
            d.compare_add = compare;
            d.swap = swap;
            opcode::ATOMIC_CMP_AND_SWP
        }
        SendOp::FetchAdd { remote: r, add } => {
            remote(&mut d, r);
            d.compare_add = add;
            opcode::ATOMIC_FETCH_AND_ADD
        }
        SendOp::AtomicWrite { remote: r, value } => {
            remote(&mut d, r);
            d.compare_add = value;
            opcode::ATOMIC_WRITE
        }
        SendOp::Flush {
            remote: r,
            len,
            placement,
            selectivity,
        } => {
            remote(&mut d, r);
            d.flush_len = len;
            d.flush_type = placement;
            d.flush_level = selectivity;
            opcode::FLUSH
        }
    };
    if let Some(ud) = wr.ud {
        match ud.dest {
            IpAddr::V4(a) => {
                d.ud_family = family::V4;
                d.ud_addr[..4].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                d.ud_family = family::V6;
                d.ud_addr = a.octets();
            }
        }
        d.ud_qpn = ud.remote_qpn;
        d.ud_qkey = ud.remote_qkey;
    }
    match &wr.data {
        SendData::Sges(sges) => d.num_sge = put_sges(slot, fixed, sges)?,
        SendData::Inline(data) => {
            if data.len() > slot.len() - fixed {
                return Err(EncodeError::InlineTooLong(data.len()));
            }
            flags |= send_flags::INLINE;
            d.inline_len = data.len() as u32;
            slot[fixed..fixed + data.len()].copy_from_slice(data);
            // Pad to the next word so the copy into the ring moves whole words.
            let padded = data.len().next_multiple_of(4).min(slot.len() - fixed);
            slot[fixed + data.len()..fixed + padded].fill(0);
        }
    }
    d.flags = flags;
    slot[..fixed].copy_from_slice(d.as_bytes());
    Ok(())
}

/// Writes `wr` into an RQ slot.
pub fn encode_recv(wr: &RecvWr, slot: &mut [u8]) -> Result<(), EncodeError> {
    let fixed = size_of::<RecvDesc>();
    if slot.len() < fixed {
        return Err(EncodeError::SlotTooSmall(slot.len()));
    }
    let n = put_sges(slot, fixed, &wr.sges)?;
    let d = RecvDesc {
        wr_id: wr.wr_id,
        num_sge: u32::from(n),
        reserved: 0,
    };
    slot[..fixed].copy_from_slice(d.as_bytes());
    Ok(())
}

impl From<&WorkCompletion> for Cqe {
    fn from(wc: &WorkCompletion) -> Self {
        let (imm_or_inv, wc_flags) = match (wc.imm_data, wc.invalidated_rkey) {
            (Some(imm), _) => (imm, wc_flags::WITH_IMM),
            (None, Some(rkey)) => (rkey, wc_flags::WITH_INV),
            (None, None) => (0, 0),
        };
        Self {
            wr_id: wc.wr_id,
            status: wc.status as u32,
            opcode: wc.opcode as u32,
            byte_len: wc.byte_len,
            imm_or_inv,
            qp_num: wc.qp_num,
            src_qp: wc.src_qp,
            wc_flags,
            vendor_err: 0,
            reserved: [0; 6],
        }
    }
}

/// The [`WcStatus`] with libibverbs' number `v`.
pub fn wc_status_from(v: u32) -> Option<WcStatus> {
    use WcStatus::*;
    const ALL: [WcStatus; 22] = [
        Success,
        LocLenErr,
        LocQpOpErr,
        LocEecOpErr,
        LocProtErr,
        WrFlushErr,
        MwBindErr,
        BadRespErr,
        LocAccessErr,
        RemInvReqErr,
        RemAccessErr,
        RemOpErr,
        RetryExcErr,
        RnrRetryExcErr,
        LocRddViolErr,
        RemInvRdReqErr,
        RemAbortErr,
        InvEecnErr,
        InvEecStateErr,
        FatalErr,
        RespTimeoutErr,
        GeneralErr,
    ];
    ALL.get(v as usize).copied()
}

/// The [`WcOpcode`] with libibverbs' number `v`.
pub fn wc_opcode_from(v: u32) -> Option<WcOpcode> {
    use WcOpcode::*;
    Some(match v {
        0 => Send,
        1 => RdmaWrite,
        2 => RdmaRead,
        3 => CompSwap,
        4 => FetchAdd,
        5 => BindMw,
        6 => LocalInv,
        8 => Flush,
        9 => AtomicWrite,
        128 => Recv,
        129 => RecvRdmaWithImm,
        _ => return None,
    })
}
