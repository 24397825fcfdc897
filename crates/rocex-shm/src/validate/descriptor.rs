//! Checking one send or receive descriptor, copied out of shared memory, into the
//! engine's work request.

use crate::desc::{RecvDesc, SendDesc, SgeDesc, family, opcode, send_flags};
use crate::ring::RingError;
use core::mem::size_of;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rocex_verbs_types::{
    QpType, Remote, SendData, SendFlags, SendOp, SendWr, Sge, SgeList, UdDest, WrError, check_data,
    check_op,
};
use zerocopy::FromBytes;

use super::{DescError, ReadError, RqLimits, SqLimits};

pub(super) fn sges_from(payload: &[u8], num: usize) -> SgeList {
    payload
        .chunks_exact(size_of::<SgeDesc>())
        .take(num)
        .filter_map(|c| SgeDesc::read_from_bytes(c).ok())
        .map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
        .collect()
}

impl DescError {
    /// A work request rule broken by the descriptor of opcode `op`
    /// ([`rocex_verbs_types::check_op`], the engine's rules too).
    pub(super) fn of_rule(e: WrError, op: u8) -> Self {
        match e {
            WrError::NotOnQpType => Self::OpcodeNotOnQpType(op),
            WrError::UdWithoutDest => Self::UdWithoutDest,
            WrError::DestOnConnectedQp => Self::DestOnConnectedQp,
            WrError::InlineNotAllowed => Self::InlineNotAllowed(op),
            WrError::MisalignedAtomic(a) => Self::MisalignedAtomic(a),
            WrError::AtomicSge { num, len } => Self::AtomicSge { num, len },
            WrError::TooLong(n) => Self::LengthOverflow(n),
        }
    }
}

/// What follows a [`SendDesc`] in its slot, as its (already copied) header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// This many SGEs.
    Sges(u32),
    /// This many inline bytes.
    Inline(u32),
}

impl Payload {
    /// Bytes to copy after the descriptor, rounded up to whole words.
    pub const fn bytes(&self) -> usize {
        match *self {
            Self::Sges(n) => n as usize * size_of::<SgeDesc>(),
            Self::Inline(n) => (n as usize).next_multiple_of(4),
        }
    }
}

/// Checks the fixed part of a send descriptor; returns what payload to copy. `slot_size`
/// is the daemon's own.
pub fn check_send_header(
    d: &SendDesc,
    limits: &SqLimits,
    slot_size: u32,
) -> Result<Payload, DescError> {
    let op = d.opcode;
    match op {
        opcode::RDMA_WRITE
        | opcode::RDMA_WRITE_WITH_IMM
        | opcode::SEND
        | opcode::SEND_WITH_IMM
        | opcode::RDMA_READ
        | opcode::ATOMIC_CMP_AND_SWP
        | opcode::ATOMIC_FETCH_AND_ADD
        | opcode::SEND_WITH_INV
        | opcode::FLUSH
        | opcode::ATOMIC_WRITE => {}
        opcode::LOCAL_INV | opcode::BIND_MW | 10 | 11 => {
            return Err(DescError::UnsupportedOpcode(op));
        }
        _ => return Err(DescError::BadOpcode(op)),
    }
    if d.flags & !send_flags::ALL != 0 {
        return Err(DescError::ReservedFlags(d.flags & !send_flags::ALL));
    }
    if d.reserved0 != 0 {
        return Err(DescError::ReservedNonZero("reserved0"));
    }
    if d.reserved.iter().any(|&w| w != 0) {
        return Err(DescError::ReservedNonZero("reserved"));
    }
    if !matches!(d.ud_family, family::NONE | family::V4 | family::V6) {
        return Err(DescError::BadAddressFamily(d.ud_family));
    }
    let inline = d.flags & send_flags::INLINE != 0;
    check_op(
        limits.qp_type,
        &op_of(d)?,
        inline,
        d.ud_family != family::NONE,
    )
    .map_err(|e| DescError::of_rule(e, op))?;
    if limits.qp_type == QpType::Ud {
        if d.ud_qpn >> 24 != 0 {
            return Err(DescError::QpnOutOfRange(d.ud_qpn));
        }
        if d.ud_family == family::V4 && d.ud_addr[4..].iter().any(|&b| b != 0) {
            return Err(DescError::ReservedNonZero("ud_addr[4..16]"));
        }
    }
    let room = slot_size.saturating_sub(size_of::<SendDesc>() as u32);
    if inline {
        if d.num_sge != 0 {
            return Err(DescError::SgesWithInline(d.num_sge));
        }
        if d.inline_len > room {
            return Err(DescError::InlineOverSlot {
                len: d.inline_len,
                max: room,
            });
        }
        if d.inline_len > limits.max_inline {
            return Err(DescError::InlineOverQpMax {
                len: d.inline_len,
                max: limits.max_inline,
            });
        }
        return Ok(Payload::Inline(d.inline_len));
    }
    if d.inline_len != 0 {
        return Err(DescError::InlineLenWithoutFlag(d.inline_len));
    }
    let max = limits.max_sge.min(room / size_of::<SgeDesc>() as u32);
    let num = u32::from(d.num_sge);
    if num > max {
        return Err(DescError::TooManySges { num, max });
    }
    if op == opcode::FLUSH && (!(1..=3).contains(&d.flush_type) || d.flush_level > 1) {
        return Err(DescError::BadFlush {
            placement: d.flush_type,
            level: d.flush_level,
        });
    }
    Ok(Payload::Sges(num))
}

/// The operation a send descriptor names, with its operands.
fn op_of(d: &SendDesc) -> Result<SendOp, DescError> {
    let remote = Remote {
        addr: d.remote_addr,
        rkey: d.rkey,
    };
    Ok(match d.opcode {
        opcode::RDMA_WRITE => SendOp::Write(remote),
        opcode::RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm(remote, d.imm_or_inv),
        opcode::SEND => SendOp::Send,
        opcode::SEND_WITH_IMM => SendOp::SendWithImm(d.imm_or_inv),
        opcode::SEND_WITH_INV => SendOp::SendWithInv(d.imm_or_inv),
        opcode::RDMA_READ => SendOp::Read(remote),
        opcode::ATOMIC_CMP_AND_SWP => SendOp::CompareSwap {
            remote,
            compare: d.compare_add,
            swap: d.swap,
        },
        opcode::ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd {
            remote,
            add: d.compare_add,
        },
        opcode::ATOMIC_WRITE => SendOp::AtomicWrite {
            remote,
            value: d.compare_add,
        },
        opcode::FLUSH => SendOp::Flush {
            remote,
            len: d.flush_len,
            placement: d.flush_type,
            selectivity: d.flush_level,
        },
        o => return Err(DescError::BadOpcode(o)),
    })
}

/// Builds the work request from a checked header and its copied payload.
pub fn build_send(d: &SendDesc, payload: Payload, bytes: &[u8]) -> Result<SendWr, DescError> {
    let data = match payload {
        Payload::Inline(n) => SendData::Inline(bytes.get(..n as usize).unwrap_or(&[]).to_vec()),
        Payload::Sges(n) => SendData::Sges(sges_from(bytes, n as usize)),
    };
    send_wr(d, data)
}

/// The work request of a checked header and the data its payload gave.
pub(super) fn send_wr(d: &SendDesc, data: SendData) -> Result<SendWr, DescError> {
    let op = op_of(d)?;
    check_data(&op, &data).map_err(|e| DescError::of_rule(e, d.opcode))?;
    let ud = match d.ud_family {
        family::V4 => Some(IpAddr::V4(Ipv4Addr::new(
            d.ud_addr[0],
            d.ud_addr[1],
            d.ud_addr[2],
            d.ud_addr[3],
        ))),
        family::V6 => Some(IpAddr::V6(Ipv6Addr::from(d.ud_addr))),
        _ => None,
    }
    .map(|dest| UdDest {
        dest,
        remote_qpn: d.ud_qpn,
        remote_qkey: d.ud_qkey,
    });
    Ok(SendWr {
        wr_id: d.wr_id,
        op,
        data,
        flags: SendFlags {
            fence: d.flags & send_flags::FENCE != 0,
            signaled: d.flags & send_flags::SIGNALED != 0,
            solicited: d.flags & send_flags::SOLICITED != 0,
        },
        ud,
    })
}

/// Checks a whole SQ slot already copied to private memory (for tests and fuzzing; the
/// ring reader copies only the bytes the header asks for).
pub fn validate_send(slot: &[u8], limits: &SqLimits) -> Result<SendWr, ReadError> {
    let d = SendDesc::read_from_prefix(slot)
        .map_err(|_| {
            ReadError::Ring(RingError::TooLarge {
                len: slot.len(),
                slot_size: size_of::<SendDesc>() as u32,
            })
        })?
        .0;
    let fail = |error| ReadError::Desc {
        wr_id: d.wr_id,
        error,
    };
    let payload = check_send_header(&d, limits, slot.len() as u32).map_err(fail)?;
    let rest = &slot[size_of::<SendDesc>()..];
    build_send(&d, payload, rest.get(..payload.bytes()).unwrap_or(rest)).map_err(fail)
}

/// Checks an RQ descriptor and its copied SGEs.
pub fn check_recv_header(
    d: &RecvDesc,
    limits: &RqLimits,
    slot_size: u32,
) -> Result<u32, DescError> {
    if d.reserved != 0 {
        return Err(DescError::ReservedNonZero("reserved"));
    }
    let room = slot_size.saturating_sub(size_of::<RecvDesc>() as u32) / size_of::<SgeDesc>() as u32;
    let max = limits.max_sge.min(room);
    if d.num_sge > max {
        return Err(DescError::TooManySges {
            num: d.num_sge,
            max,
        });
    }
    Ok(d.num_sge)
}
