//! The 64-byte submission queue entry (the command capsule's SQE) and the keyed SGL data
//! block descriptor in its data pointer.
//!
//! Layouts: NVMe Base Specification, "Submission Queue Entry - Command Format" (common
//! command dwords 0-15) and "SGL Data Block descriptor" / "Keyed SGL Data Block
//! descriptor"; NVMe over Fabrics, "Fabrics Command" (opcode 7Fh, FCTYPE at byte 4) and
//! each fabrics command's layout. The Linux names are `struct nvme_common_command`,
//! `struct nvme_keyed_sgl_desc`, `struct nvmf_connect_command`,
//! `struct nvmf_property_{get,set}_command` and `struct nvme_rw_command`
//! (include/linux/nvme.h). `docs/nvmeof.md` has every offset.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of a submission queue entry.
pub const SQE_LEN: usize = 64;
/// Bytes of an SGL descriptor.
pub const SGL_LEN: usize = 16;

/// Admin and I/O opcodes this host sends.
pub mod opcode {
    /// NVM command set: Flush.
    pub const FLUSH: u8 = 0x00;
    /// NVM command set: Write.
    pub const WRITE: u8 = 0x01;
    /// NVM command set: Read.
    pub const READ: u8 = 0x02;
    /// Admin: Identify.
    pub const IDENTIFY: u8 = 0x06;
    /// Fabrics commands (the type is in FCTYPE, byte 4).
    pub const FABRICS: u8 = 0x7f;
}

/// Fabrics command types (FCTYPE).
pub mod fctype {
    /// Property Set.
    pub const PROPERTY_SET: u8 = 0x00;
    /// Connect.
    pub const CONNECT: u8 = 0x01;
    /// Property Get.
    pub const PROPERTY_GET: u8 = 0x04;
}

/// Identify's Controller or Namespace Structure (CNS, CDW10 bits 7:0).
pub mod cns {
    /// The namespace data structure of NSID.
    pub const NAMESPACE: u8 = 0x00;
    /// The controller data structure.
    pub const CONTROLLER: u8 = 0x01;
}

/// PSDT 01b in flags bits 7:6: the data pointer is an SGL (fabrics allow no PRPs), and
/// the metadata pointer a single buffer (`NVME_CMD_SGL_METABUF`).
pub const FLAGS_SGL: u8 = 0b01 << 6;

/// SGL descriptor type (bits 7:4 of byte 15): Keyed SGL Data Block.
pub const SGL_TYPE_KEYED_DATA_BLOCK: u8 = 0x4;
/// SGL descriptor subtype (bits 3:0 of byte 15): Address (the remote end does not
/// invalidate the key; 0xF would ask it to with SEND with Invalidate).
pub const SGL_SUBTYPE_ADDRESS: u8 = 0x0;
/// The largest length a keyed descriptor can carry (a 24-bit field).
pub const KEYED_SGL_MAX_LEN: u32 = (1 << 24) - 1;

/// A Keyed SGL Data Block descriptor: where the target moves the data with RDMA READ
/// (host to controller) or RDMA WRITE (controller to host).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct KeyedSgl {
    /// Bytes 0-7: the host's address of the data.
    pub addr: U64,
    /// Bytes 8-10: the length, 24 bits little-endian.
    pub len: [u8; 3],
    /// Bytes 11-14: the R_Key of the host's memory region.
    pub key: U32,
    /// Byte 15: type (bits 7:4) and subtype (bits 3:0).
    pub id: u8,
}

impl KeyedSgl {
    /// A descriptor for `len` bytes at `addr` under `key`, subtype Address; `None` when
    /// `len` does not fit 24 bits.
    pub fn new(addr: u64, len: u32, key: u32) -> Option<Self> {
        if len > KEYED_SGL_MAX_LEN {
            return None;
        }
        let b = len.to_le_bytes();
        Some(Self {
            addr: addr.into(),
            len: [b[0], b[1], b[2]],
            key: key.into(),
            id: SGL_TYPE_KEYED_DATA_BLOCK << 4 | SGL_SUBTYPE_ADDRESS,
        })
    }

    /// The descriptor's length.
    pub fn length(&self) -> u32 {
        u32::from_le_bytes([self.len[0], self.len[1], self.len[2], 0])
    }

    /// An all-zero descriptor: no data (keyed, length 0, as the Linux host sends for
    /// commands without data).
    pub fn none() -> Self {
        Self {
            addr: 0.into(),
            len: [0; 3],
            key: 0.into(),
            id: SGL_TYPE_KEYED_DATA_BLOCK << 4 | SGL_SUBTYPE_ADDRESS,
        }
    }
}

/// A submission queue entry. Fabrics commands reuse the common layout: FCTYPE is byte 4,
/// the low byte of what an NVMe command calls the namespace ID.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Sqe {
    /// Byte 0: opcode.
    pub opcode: u8,
    /// Byte 1: fused operation (bits 1:0) and PSDT (bits 7:6).
    pub flags: u8,
    /// Bytes 2-3: command identifier, echoed in the completion.
    pub cid: U16,
    /// Bytes 4-7: namespace ID (NVMe commands); FCTYPE in byte 4 (fabrics commands).
    pub nsid: U32,
    /// Bytes 8-15: command dwords 2 and 3.
    pub cdw2_3: [U32; 2],
    /// Bytes 16-23: metadata pointer.
    pub mptr: U64,
    /// Bytes 24-39: data pointer, one SGL descriptor.
    pub dptr: KeyedSgl,
    /// Bytes 40-63: command dwords 10 to 15.
    pub cdw: [U32; 6],
}

const _: () = assert!(size_of::<Sqe>() == SQE_LEN && size_of::<KeyedSgl>() == SGL_LEN);

impl Sqe {
    fn new(opcode: u8, nsid: u32, dptr: KeyedSgl) -> Self {
        Self {
            opcode,
            flags: FLAGS_SGL,
            cid: 0.into(),
            nsid: nsid.into(),
            cdw2_3: [0.into(); 2],
            mptr: 0.into(),
            dptr,
            cdw: [0.into(); 6],
        }
    }

    fn fabrics(fctype: u8, dptr: KeyedSgl) -> Self {
        Self::new(opcode::FABRICS, u32::from(fctype), dptr)
    }

    /// The fabrics command type (byte 4).
    pub fn fctype(&self) -> u8 {
        self.nsid.get() as u8
    }

    /// Connect (FCTYPE 01h) for queue `qid` with `sqsize` (0's based) entries and a
    /// keep-alive timeout of `kato_ms`; the 1024-byte Connect data is at `data`.
    /// CDW10: RECFMT (bytes 40-41, 0) and QID (42-43); CDW11: SQSIZE (44-45), CATTR
    /// (46); CDW12: KATO (48-51).
    pub fn connect(qid: u16, sqsize: u16, kato_ms: u32, data: KeyedSgl) -> Self {
        let mut s = Self::fabrics(fctype::CONNECT, data);
        s.cdw[0] = (u32::from(qid) << 16).into();
        s.cdw[1] = u32::from(sqsize).into();
        s.cdw[2] = kato_ms.into();
        s
    }

    /// Property Get (FCTYPE 04h) of the property at `offset`, 8 bytes wide when `wide`.
    /// ATTRIB is byte 40 (bit 0: 0 = 4 bytes, 1 = 8 bytes), OFFSET bytes 44-47.
    pub fn property_get(offset: u32, wide: bool) -> Self {
        let mut s = Self::fabrics(fctype::PROPERTY_GET, KeyedSgl::none());
        s.cdw[0] = u32::from(wide).into();
        s.cdw[1] = offset.into();
        s
    }

    /// Property Set (FCTYPE 00h) of the 4-byte property at `offset` to `value`
    /// (VALUE is bytes 48-55).
    pub fn property_set(offset: u32, value: u32) -> Self {
        let mut s = Self::fabrics(fctype::PROPERTY_SET, KeyedSgl::none());
        s.cdw[1] = offset.into();
        s.cdw[2] = value.into();
        s
    }

    /// Identify with `cns` for `nsid`, the 4096-byte structure written to `data`.
    pub fn identify(cns: u8, nsid: u32, data: KeyedSgl) -> Self {
        let mut s = Self::new(opcode::IDENTIFY, nsid, data);
        s.cdw[0] = u32::from(cns).into();
        s
    }

    /// Read or Write (`opcode`) of `blocks` logical blocks from `slba` of `nsid`:
    /// SLBA is CDW10-11 (bytes 40-47), NLB (0's based) CDW12 bits 15:0.
    pub fn rw(opcode: u8, nsid: u32, slba: u64, blocks: u16, data: KeyedSgl) -> Self {
        let mut s = Self::new(opcode, nsid, data);
        s.cdw[0] = (slba as u32).into();
        s.cdw[1] = ((slba >> 32) as u32).into();
        s.cdw[2] = u32::from(blocks.saturating_sub(1)).into();
        s
    }

    /// Flush of `nsid`'s volatile write cache.
    pub fn flush(nsid: u32) -> Self {
        Self::new(opcode::FLUSH, nsid, KeyedSgl::none())
    }
}
