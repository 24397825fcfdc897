//! Work requests: scatter/gather entries, send operations with their operands, and send
//! and receive work requests (`struct ibv_send_wr`, `struct ibv_recv_wr`).

use core::net::IpAddr;

use crate::Access;

/// A scatter/gather entry (`struct ibv_sge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Local virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

/// A remote buffer: address and R_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Remote {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// A send work request's operation (`enum ibv_wr_opcode` with its operands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendOp {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendWithImm(u32),
    /// SEND that invalidates the peer's R_Key.
    SendWithInv(u32),
    /// RDMA WRITE.
    Write(Remote),
    /// RDMA WRITE with immediate data.
    WriteWithImm(Remote, u32),
    /// RDMA READ into the local SGEs.
    Read(Remote),
    /// Atomic compare and swap of 8 bytes; the original lands in the local SGE.
    CompareSwap {
        /// Target.
        remote: Remote,
        /// Value compared with.
        compare: u64,
        /// Value stored when equal.
        swap: u64,
    },
    /// Atomic fetch and add of 8 bytes; the original lands in the local SGE.
    FetchAdd {
        /// Target.
        remote: Remote,
        /// Addend.
        add: u64,
    },
    /// ATOMIC WRITE of 8 bytes (IBTA 1.5).
    AtomicWrite {
        /// Target.
        remote: Remote,
        /// Value written: its 8 bytes in host order go on the wire and into the target
        /// unchanged, as `ibv_wr_atomic_write` sends the buffer it is given.
        value: u64,
    },
    /// FLUSH (IBTA 1.5): make a remote range visible or persistent.
    Flush {
        /// Start of the range.
        remote: Remote,
        /// Length of the range.
        len: u32,
        /// Placement type bits: [`PLACEMENT_GLOBAL_VISIBILITY`], [`PLACEMENT_PERSISTENCE`].
        placement: u8,
        /// Selectivity (0 the range, 1 the whole MR).
        selectivity: u8,
    },
}

/// FLUSH placement type bit: make the range globally visible (the FETH's placement type
/// field, IBTA 1.5).
pub const PLACEMENT_GLOBAL_VISIBILITY: u8 = 1;
/// FLUSH placement type bit: make the range persistent.
pub const PLACEMENT_PERSISTENCE: u8 = 2;

/// The rights a FLUSH with these placement type bits needs, of the responder's QP and of
/// its rkey alike: the flag of each type it asks for (rxe `check_qp_attr_access`,
/// `check_rkey`).
pub fn flush_access(placement: u8) -> Access {
    let mut need = Access::empty();
    if placement & PLACEMENT_GLOBAL_VISIBILITY != 0 {
        need |= Access::FLUSH_GLOBAL;
    }
    if placement & PLACEMENT_PERSISTENCE != 0 {
        need |= Access::FLUSH_PERSISTENT;
    }
    need
}

/// Send flags (`enum ibv_send_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendFlags {
    /// Wait for earlier READs and atomics before this request.
    pub fence: bool,
    /// Generate a completion on success.
    pub signaled: bool,
    /// Set the Solicited Event bit.
    pub solicited: bool,
}

/// The destination of a UD send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// Peer address.
    pub dest: IpAddr,
    /// Peer QP.
    pub remote_qpn: u32,
    /// Peer Q_Key.
    pub remote_qkey: u32,
}

/// A work request's scatter/gather list. Up to two entries (nearly every request) live
/// inline: posting allocates nothing.
pub type SgeList = smallvec::SmallVec<[Sge; 2]>;

/// Where a send's data comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SendData {
    /// Gathered from registered memory.
    Sges(SgeList),
    /// Copied at post time (`IBV_SEND_INLINE`).
    Inline(Vec<u8>),
}

/// A send work request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SendWr {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Operation.
    pub op: SendOp,
    /// Local data: the source of SEND and WRITE, the destination of READ and atomics.
    pub data: SendData,
    /// Flags.
    pub flags: SendFlags,
    /// UD destination.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled request with SGEs.
    pub fn new(wr_id: u64, op: SendOp, sges: impl IntoIterator<Item = Sge>) -> Self {
        Self {
            wr_id,
            op,
            data: SendData::Sges(sges.into_iter().collect()),
            flags: SendFlags {
                signaled: true,
                ..SendFlags::default()
            },
            ud: None,
        }
    }

    /// Bytes the request moves (for atomics, the 8 bytes of the result).
    pub fn length(&self) -> u64 {
        match &self.data {
            SendData::Sges(s) => s.iter().map(|s| u64::from(s.length)).sum(),
            SendData::Inline(d) => d.len() as u64,
        }
    }
}

/// A receive work request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecvWr {
    /// Caller's identifier.
    pub wr_id: u64,
    /// Where received data goes.
    pub sges: SgeList,
}

impl RecvWr {
    /// A receive into `sges`.
    pub fn new(wr_id: u64, sges: impl IntoIterator<Item = Sge>) -> Self {
        Self {
            wr_id,
            sges: sges.into_iter().collect(),
        }
    }
}
