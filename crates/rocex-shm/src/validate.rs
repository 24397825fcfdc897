//! The daemon's side of SQ and RQ, and the application's side of CQ: every descriptor is
//! copied once out of shared memory and checked into the engine's types.
//!
//! Each fault has its own [`DescError`]. A bad descriptor is consumed, so the daemon can
//! complete it with [`DescError::wc_status`] (carrying its `wr_id`) and go on; a broken ring
//! ([`RingError`]) consumes nothing and moves the QP to the error state. No input panics.

use crate::desc::{
    Cqe, RecvDesc, SendDesc, SgeDesc, family, opcode, send_flags, wc_flags, wc_opcode_from,
    wc_status_from,
};
use crate::layout::{RingKind, RingSpec};
use crate::ring::{Consumer, Producer, RingError};
use core::fmt;
use core::mem::size_of;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rocex_proto::verbs::{
    QpType, RecvWr, Remote, SendData, SendFlags, SendOp, SendWr, Sge, SgeList, UdDest, WcStatus,
    WorkCompletion,
};
use zerocopy::{FromBytes, IntoBytes};

/// Largest message (IBTA: 2^31 bytes).
pub const MAX_MESSAGE: u64 = 1 << 31;

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

fn sges_from(payload: &[u8], num: usize) -> SgeList {
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

fn total_len(sges: &[Sge]) -> Result<(), DescError> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total > MAX_MESSAGE {
        return Err(DescError::LengthOverflow(total));
    }
    Ok(())
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
    let allowed = match limits.qp_type {
        QpType::Rc => true,
        QpType::Uc => matches!(
            op,
            opcode::SEND | opcode::SEND_WITH_IMM | opcode::RDMA_WRITE | opcode::RDMA_WRITE_WITH_IMM
        ),
        QpType::Ud => matches!(op, opcode::SEND | opcode::SEND_WITH_IMM),
    };
    if !allowed {
        return Err(DescError::OpcodeNotOnQpType(op));
    }
    match (limits.qp_type, d.ud_family) {
        (_, f) if !matches!(f, family::NONE | family::V4 | family::V6) => {
            return Err(DescError::BadAddressFamily(f));
        }
        (QpType::Ud, family::NONE) => return Err(DescError::UdWithoutDest),
        (QpType::Ud, _) => {
            if d.ud_qpn >> 24 != 0 {
                return Err(DescError::QpnOutOfRange(d.ud_qpn));
            }
            if d.ud_family == family::V4 && d.ud_addr[4..].iter().any(|&b| b != 0) {
                return Err(DescError::ReservedNonZero("ud_addr[4..16]"));
            }
        }
        (_, family::NONE) => {}
        _ => return Err(DescError::DestOnConnectedQp),
    }
    let room = slot_size.saturating_sub(size_of::<SendDesc>() as u32);
    let atomic = matches!(
        op,
        opcode::ATOMIC_CMP_AND_SWP | opcode::ATOMIC_FETCH_AND_ADD
    );
    if d.flags & send_flags::INLINE != 0 {
        if matches!(op, opcode::RDMA_READ | opcode::FLUSH) || atomic {
            return Err(DescError::InlineNotAllowed(op));
        }
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
    if (atomic || op == opcode::ATOMIC_WRITE) && d.remote_addr % 8 != 0 {
        return Err(DescError::MisalignedAtomic(d.remote_addr));
    }
    if atomic && num != 1 {
        return Err(DescError::AtomicSge { num, len: 0 });
    }
    Ok(Payload::Sges(num))
}

/// Builds the work request from a checked header and its copied payload.
pub fn build_send(d: &SendDesc, payload: Payload, bytes: &[u8]) -> Result<SendWr, DescError> {
    let remote = Remote {
        addr: d.remote_addr,
        rkey: d.rkey,
    };
    let op = match d.opcode {
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
    };
    let data = match payload {
        Payload::Inline(n) => SendData::Inline(bytes.get(..n as usize).unwrap_or(&[]).to_vec()),
        Payload::Sges(n) => {
            let sges = sges_from(bytes, n as usize);
            total_len(&sges)?;
            if matches!(op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. })
                && sges.first().is_none_or(|s| s.length != 8)
            {
                return Err(DescError::AtomicSge {
                    num: n,
                    len: sges.first().map_or(0, |s| s.length),
                });
            }
            SendData::Sges(sges)
        }
    };
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

/// The daemon's reader of one send queue.
#[derive(Debug)]
pub struct SqReader<'m> {
    ring: Consumer<'m>,
    limits: SqLimits,
    buf: Vec<u8>,
}

impl<'m> SqReader<'m> {
    /// A reader over an SQ ring consumer with the QP's limits.
    pub fn new(ring: Consumer<'m>, limits: SqLimits) -> Self {
        debug_assert_eq!(ring.spec().kind(), RingKind::Sq);
        Self {
            // Grown to what descriptors need: a reader is made per pass that finds work,
            // and most read one small descriptor.
            buf: Vec::new(),
            ring,
            limits,
        }
    }

    /// The underlying consumer (release, sleep).
    pub fn ring(&mut self) -> &mut Consumer<'m> {
        &mut self.ring
    }

    /// The next send request, validated; `Ok(None)` when the ring is empty. Each shared
    /// byte is read once: the 128-byte header, then exactly the payload the private copy
    /// of the header describes.
    pub fn read_send(&mut self) -> Result<Option<SendWr>, ReadError> {
        let Some(slot) = self.ring.next_slot()? else {
            return Ok(None);
        };
        let fixed = size_of::<SendDesc>();
        let mut head = [0u8; size_of::<SendDesc>()];
        slot.view.read(0, &mut head)?;
        let Ok(d) = SendDesc::read_from_bytes(&head[..]) else {
            return Err(copy_error());
        };
        let fail = |error| ReadError::Desc {
            wr_id: d.wr_id,
            error,
        };
        let payload =
            check_send_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let n = payload.bytes();
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        let buf = &mut self.buf[..n];
        slot.view.read(fixed, buf)?;
        build_send(&d, payload, buf).map(Some).map_err(fail)
    }
}

/// A conversion that cannot fail on a correctly sized buffer, reported instead of unwrapped.
fn copy_error() -> ReadError {
    ReadError::Ring(RingError::TooLarge {
        len: 0,
        slot_size: 0,
    })
}

/// The daemon's reader of one receive queue.
#[derive(Debug)]
pub struct RqReader<'m> {
    ring: Consumer<'m>,
    limits: RqLimits,
    buf: Vec<u8>,
}

impl<'m> RqReader<'m> {
    /// A reader over an RQ ring consumer with the QP's limits.
    pub fn new(ring: Consumer<'m>, limits: RqLimits) -> Self {
        debug_assert_eq!(ring.spec().kind(), RingKind::Rq);
        Self {
            buf: Vec::new(),
            ring,
            limits,
        }
    }

    /// The underlying consumer.
    pub fn ring(&mut self) -> &mut Consumer<'m> {
        &mut self.ring
    }

    /// The next receive request, validated; `Ok(None)` when the ring is empty.
    pub fn read_recv(&mut self) -> Result<Option<RecvWr>, ReadError> {
        let Some(slot) = self.ring.next_slot()? else {
            return Ok(None);
        };
        let mut head = [0u8; size_of::<RecvDesc>()];
        slot.view.read(0, &mut head)?;
        let Ok(d) = RecvDesc::read_from_bytes(&head[..]) else {
            return Err(copy_error());
        };
        let fail = |error| ReadError::Desc {
            wr_id: d.wr_id,
            error,
        };
        let n = check_recv_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let len = n as usize * size_of::<SgeDesc>();
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let buf = &mut self.buf[..len];
        slot.view.read(size_of::<RecvDesc>(), buf)?;
        let sges = sges_from(buf, n as usize);
        total_len(&sges).map_err(fail)?;
        Ok(Some(RecvWr {
            wr_id: d.wr_id,
            sges,
        }))
    }
}

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

/// The application's writer of a send or receive queue: encodes into a private slot, then
/// pushes the bytes the descriptor uses.
#[derive(Debug)]
pub struct WqWriter<'m> {
    ring: Producer<'m>,
    buf: Vec<u8>,
}

/// Why a post failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// The request does not fit a slot.
    Encode(crate::desc::EncodeError),
    /// The ring is full or broken.
    Ring(RingError),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Encode(e) => write!(f, "{e}"),
            Self::Ring(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PostError {}

impl<'m> WqWriter<'m> {
    /// A writer over an SQ or RQ producer of geometry `spec`.
    pub fn new(ring: Producer<'m>, spec: RingSpec) -> Self {
        Self {
            ring,
            buf: vec![0; spec.slot_size() as usize],
        }
    }

    /// The underlying producer.
    pub fn ring(&mut self) -> &mut Producer<'m> {
        &mut self.ring
    }

    /// Queues a send request (published by [`publish`](Self::publish)).
    pub fn post_send(&mut self, wr: &SendWr) -> Result<(), PostError> {
        crate::desc::encode_send(wr, &mut self.buf).map_err(PostError::Encode)?;
        let used = size_of::<SendDesc>()
            + match &wr.data {
                SendData::Sges(s) => s.len() * size_of::<SgeDesc>(),
                SendData::Inline(d) => d.len().next_multiple_of(4),
            };
        self.ring
            .push(&self.buf[..used.min(self.buf.len())])
            .map_err(PostError::Ring)
    }

    /// Queues a receive request.
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<(), PostError> {
        crate::desc::encode_recv(wr, &mut self.buf).map_err(PostError::Encode)?;
        let used = size_of::<RecvDesc>() + wr.sges.len() * size_of::<SgeDesc>();
        self.ring
            .push(&self.buf[..used.min(self.buf.len())])
            .map_err(PostError::Ring)
    }

    /// Rings the doorbell; true when the daemon sleeps and the eventfd must be written.
    #[must_use = "when true the daemon sleeps until the eventfd is written"]
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }
}
