//! The RDMA transport binding's rdma_cm private data: what the host's connect request
//! carries (which queue, how deep), what the controller's accept and reject answer.
//!
//! Layout: NVMe over Fabrics, RDMA transport binding, "RDMA_CM_REQUEST", "RDMA_CM_ACCEPT"
//! and "RDMA_CM_REJECT" private data; Linux's `struct nvme_rdma_cm_req`, `_rep`, `_rej`
//! (include/linux/nvme-rdma.h). All fields little-endian.

use zerocopy::little_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The only record format defined (RECFMT 0, version 1.0).
pub const RECFMT_1_0: u16 = 0;
/// Bytes of the request's private data.
pub const REQ_LEN: usize = 32;
/// Bytes of the accept's private data.
pub const REP_LEN: usize = 32;
/// Bytes of the reject's private data.
pub const REJ_LEN: usize = 4;
/// The TCP port (rdma_cm port space TCP) NVMe-oF RDMA targets listen on.
pub const NVME_RDMA_PORT: u16 = 4420;
/// The deepest queue a Linux target accepts (`NVME_RDMA_MAX_QUEUE_SIZE`).
pub const MAX_QUEUE_SIZE: u16 = 128;
/// The admin queue's depth (`NVME_AQ_DEPTH`): a deeper admin queue is refused.
pub const ADMIN_QUEUE_DEPTH: u16 = 32;

/// RDMA_CM_REQUEST private data.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct CmReq {
    /// Bytes 0-1: record format, 0.
    pub recfmt: U16,
    /// Bytes 2-3: the queue this connection carries (0: admin).
    pub qid: U16,
    /// Bytes 4-5: host receive queue size: how many response capsules the host can take
    /// at once (receives it keeps posted).
    pub hrqsize: U16,
    /// Bytes 6-7: host send queue size, 0's based: the SQSIZE the Connect command will
    /// give.
    pub hsqsize: U16,
    /// Bytes 8-31: reserved, 0.
    pub rsvd: [u8; 24],
}

/// RDMA_CM_ACCEPT private data.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct CmRep {
    /// Bytes 0-1: record format, 0.
    pub recfmt: U16,
    /// Bytes 2-3: controller receive queue size: command capsules the controller can
    /// take at once.
    pub crqsize: U16,
    /// Bytes 4-31: reserved.
    pub rsvd: [u8; 28],
}

/// RDMA_CM_REJECT private data.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct CmRej {
    /// Bytes 0-1: record format, 0.
    pub recfmt: U16,
    /// Bytes 2-3: why ([`rej_status_name`]).
    pub sts: U16,
}

const _: () = assert!(
    size_of::<CmReq>() == REQ_LEN && size_of::<CmRep>() == REP_LEN && size_of::<CmRej>() == REJ_LEN
);

impl CmReq {
    /// The request for queue `qid` of `depth` entries: the host takes `depth` responses
    /// and submits at most `depth` commands (HSQSIZE is 0's based).
    pub fn new(qid: u16, depth: u16) -> Self {
        Self {
            recfmt: RECFMT_1_0.into(),
            qid: qid.into(),
            hrqsize: depth.into(),
            hsqsize: depth.saturating_sub(1).into(),
            rsvd: [0; 24],
        }
    }
}

/// The name of a reject's STS (`enum nvme_rdma_cm_status`).
pub fn rej_status_name(sts: u16) -> &'static str {
    match sts {
        0x01 => "invalid private data length",
        0x02 => "invalid record format",
        0x03 => "invalid queue ID",
        0x04 => "invalid host SQ size",
        0x05 => "invalid host RQ size",
        0x06 => "no resources",
        0x07 => "invalid IRD",
        0x08 => "invalid ORD",
        _ => "unrecognised status",
    }
}
