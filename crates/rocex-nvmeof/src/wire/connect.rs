//! The Connect command's 1024-byte data (who the host is, which subsystem and
//! controller it wants) and the controller properties the host reads and sets.
//!
//! Layouts: NVMe over Fabrics, "Connect Command Data" and the property map ("Property
//! Definitions": CAP, VS, CC, CSTS); Linux's `struct nvmf_connect_data` and the
//! `NVME_REG_*` / `NVME_CC_*` / `NVME_CSTS_*` constants (include/linux/nvme.h).

use zerocopy::little_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of the Connect data.
pub const CONNECT_DATA_LEN: usize = 1024;
/// Bytes of an NQN field (NUL-padded; an NQN is at most 223 bytes).
pub const NQN_LEN: usize = 256;
/// The controller ID that asks for a new controller (dynamic controller model).
pub const CNTLID_DYNAMIC: u16 = 0xffff;

/// Connect command data.
#[derive(Debug, Clone, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct ConnectData {
    /// Bytes 0-15: the host identifier (a UUID), the same on every queue.
    pub hostid: [u8; 16],
    /// Bytes 16-17: the controller: [`CNTLID_DYNAMIC`] on the admin queue, the ID the
    /// admin Connect returned on I/O queues.
    pub cntlid: U16,
    /// Bytes 18-255: reserved.
    pub rsvd1: [u8; 238],
    /// Bytes 256-511: the subsystem's NQN.
    pub subnqn: [u8; NQN_LEN],
    /// Bytes 512-767: the host's NQN.
    pub hostnqn: [u8; NQN_LEN],
    /// Bytes 768-1023: reserved.
    pub rsvd2: [u8; 256],
}

const _: () = assert!(size_of::<ConnectData>() == CONNECT_DATA_LEN);

impl ConnectData {
    /// The data for `cntlid`; `None` when an NQN is empty, too long (over 223 bytes) or
    /// holds a NUL.
    pub fn new(hostid: [u8; 16], cntlid: u16, subnqn: &str, hostnqn: &str) -> Option<Self> {
        Some(Self {
            hostid,
            cntlid: cntlid.into(),
            rsvd1: [0; 238],
            subnqn: nqn(subnqn)?,
            hostnqn: nqn(hostnqn)?,
            rsvd2: [0; 256],
        })
    }
}

fn nqn(s: &str) -> Option<[u8; NQN_LEN]> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 223 || b.contains(&0) {
        return None;
    }
    let mut out = [0u8; NQN_LEN];
    out[..b.len()].copy_from_slice(b);
    Some(out)
}

/// Property offsets and fields.
pub mod prop {
    /// Controller Capabilities (8 bytes).
    pub const CAP: u32 = 0x00;
    /// Version (4 bytes).
    pub const VS: u32 = 0x08;
    /// Controller Configuration (4 bytes).
    pub const CC: u32 = 0x14;
    /// Controller Status (4 bytes).
    pub const CSTS: u32 = 0x1c;

    /// CC.EN (bit 0): enable.
    pub const CC_EN: u32 = 1;
    /// CC.CSS (bits 6:4) 000b: the NVM command set.
    pub const CC_CSS_NVM: u32 = 0 << 4;
    /// CC.MPS (bits 10:7): memory page size 2^(12 + MPS); 0 is 4 KiB.
    pub const CC_MPS_4K: u32 = 0 << 7;
    /// CC.AMS (bits 13:11) 000b: round robin arbitration.
    pub const CC_AMS_RR: u32 = 0 << 11;
    /// CC.SHN (bits 15:14) 01b: normal shutdown notification.
    pub const CC_SHN_NORMAL: u32 = 1 << 14;
    /// CC.IOSQES (bits 19:16): I/O SQ entry size 2^6 = 64 bytes.
    pub const CC_IOSQES: u32 = 6 << 16;
    /// CC.IOCQES (bits 23:20): I/O CQ entry size 2^4 = 16 bytes.
    pub const CC_IOCQES: u32 = 4 << 20;

    /// CSTS.RDY (bit 0): ready.
    pub const CSTS_RDY: u32 = 1;
    /// CSTS.CFS (bit 1): controller fatal status.
    pub const CSTS_CFS: u32 = 1 << 1;
    /// CSTS.SHST (bits 3:2) mask.
    pub const CSTS_SHST_MASK: u32 = 3 << 2;
    /// CSTS.SHST 10b: shutdown processing complete.
    pub const CSTS_SHST_CMPLT: u32 = 2 << 2;

    /// CAP.MQES (bits 15:0): the deepest queue, 0's based.
    pub fn cap_mqes(cap: u64) -> u16 {
        cap as u16
    }
    /// CAP.TO (bits 31:24): the worst-case time to become ready, in 500 ms units.
    pub fn cap_timeout_ms(cap: u64) -> u64 {
        (cap >> 24 & 0xff) * 500
    }
}
