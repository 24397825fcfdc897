//! The versioned ABI: region header, ring header and ring geometry.
//!
//! One memfd holds every ring of a queue pair or CQ. Its first bytes are a [`RegionHeader`],
//! then each ring at a 4096-byte aligned offset the daemon chose and told the client over the
//! control channel. A ring is a [`RingHeader`] (four 128-byte lines, as rxe's
//! `rxe_queue_buf` keeps its producer and consumer indices on separate lines) followed by
//! `slot_count` slots of `slot_size` bytes, both powers of two.
//!
//! The headers are written once by the daemon, for the client's benefit. The daemon never
//! reads geometry back: it keeps its own [`RingSpec`], and a client that rewrites a header
//! changes nothing but its own view.

use core::mem::{align_of, offset_of, size_of};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

/// Version of the ring and descriptor layout. Any change to a struct in this crate or to the
/// protocol in `docs/abi.md` bumps it; the control channel refuses a client that differs.
pub const ABI_VERSION: u32 = 7;

/// `b"ROCEXSHM"` as a native-endian u64 at offset 0 of every region.
pub const REGION_MAGIC: u64 = u64::from_le_bytes(*b"ROCEXSHM");

/// `b"RING"` at offset 0 of every ring header.
pub const RING_MAGIC: u32 = u32::from_le_bytes(*b"RING");

/// The cache-line size the indices are padded to (two x86 lines, one line on arm64 servers,
/// as rxe uses).
pub const LINE: usize = 128;

/// Rings start at multiples of this inside a region.
pub const RING_ALIGN: usize = 4096;

/// Largest slot count the daemon accepts (free-running u32 indices allow up to 2^31).
pub const MAX_SLOTS: u32 = 1 << 16;

/// The header at offset 0 of a shared region.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RegionHeader {
    /// [`REGION_MAGIC`].
    pub magic: u64,
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// `size_of::<RegionHeader>()`.
    pub header_size: u32,
    /// Bytes in the region.
    pub region_len: u64,
    /// `size_of::<RingHeader>()`.
    pub ring_header_size: u32,
    /// `size_of::<SendDesc>()`, the fixed part of an SQ slot.
    pub send_desc_size: u32,
    /// `size_of::<RecvDesc>()`, the fixed part of an RQ slot.
    pub recv_desc_size: u32,
    /// `size_of::<Cqe>()`, a CQ slot.
    pub cqe_size: u32,
    /// `size_of::<SgeDesc>()`.
    pub sge_size: u32,
    /// Zero.
    pub reserved: [u32; 21],
}

/// The kind of ring, stored in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingKind {
    /// Send queue: the application produces [`SendDesc`](crate::SendDesc) slots.
    Sq = 1,
    /// Receive queue: the application produces [`RecvDesc`](crate::RecvDesc) slots.
    Rq = 2,
    /// Completion queue: the daemon produces [`Cqe`](crate::Cqe) slots.
    Cq = 3,
}

/// The header of one ring: four 128-byte lines, then the slots.
///
/// | line | offset | written by | fields |
/// |---|---|---|---|
/// | 0 | 0 | daemon, once | magic, kind, geometry |
/// | 1 | 128 | producer | `producer_index` (the doorbell word) |
/// | 2 | 256 | consumer | `consumer_index`, `responder_msn` (SQ) |
/// | 3 | 384 | consumer | `need_wakeup`, `event_index` |
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RingHeader {
    /// [`RING_MAGIC`].
    pub magic: u32,
    /// [`RingKind`] as a number.
    pub kind: u32,
    /// log2 of `slot_size`.
    pub log2_slot_size: u32,
    /// Slots in the ring (a power of two).
    pub slot_count: u32,
    /// `slot_count - 1`.
    pub index_mask: u32,
    /// Bytes from the ring header to slot 0 (`size_of::<RingHeader>()`).
    pub data_offset: u32,
    /// Maximum SGEs or inline bytes the daemon accepts per slot on this queue (SQ: SGEs,
    /// RQ: SGEs, CQ: 0).
    pub max_sge: u32,
    /// Maximum inline bytes per SQ descriptor (0 for RQ and CQ).
    pub max_inline: u32,
    _pad0: [u32; 24],
    /// Free-running count of slots the producer has published. Storing it is the doorbell.
    pub producer_index: u32,
    _pad1: [u32; 31],
    /// Free-running count of slots the consumer has finished with.
    pub consumer_index: u32,
    /// SQ only: the request messages the QP's responder has completed (its MSN, 24 bits),
    /// stored by the daemon as soon as it has handled a request packet that ends a
    /// message. A client waiting for its peer's answer (a WRITE into its memory) learns
    /// here, with no system call, that the answer has landed (`rocex-verbs`' ring-path
    /// lingering).
    pub responder_msn: u32,
    _pad2: [u32; 30],
    /// Nonzero while the consumer is asleep, or about to sleep, and wants the eventfd.
    pub need_wakeup: u32,
    /// The consumer wants the eventfd once the producer index passes this value
    /// (virtio's `used_event`).
    pub event_index: u32,
    _pad3: [u32; 30],
}

/// Byte offsets of the shared words inside a [`RingHeader`].
pub mod ring_off {
    use super::*;
    /// `magic`.
    pub const MAGIC: usize = offset_of!(RingHeader, magic);
    /// `producer_index`.
    pub const PRODUCER: usize = offset_of!(RingHeader, producer_index);
    /// `consumer_index`.
    pub const CONSUMER: usize = offset_of!(RingHeader, consumer_index);
    /// `responder_msn`.
    pub const RESPONDER_MSN: usize = offset_of!(RingHeader, responder_msn);
    /// `need_wakeup`.
    pub const NEED_WAKEUP: usize = offset_of!(RingHeader, need_wakeup);
    /// `event_index`.
    pub const EVENT_INDEX: usize = offset_of!(RingHeader, event_index);
    /// First slot.
    pub const DATA: usize = size_of::<RingHeader>();
}

const _: () = {
    assert!(size_of::<RegionHeader>() == 128);
    assert!(align_of::<RegionHeader>() == 8);
    assert!(size_of::<RingHeader>() == 4 * LINE);
    assert!(align_of::<RingHeader>() == 4);
    assert!(ring_off::PRODUCER == LINE);
    assert!(ring_off::CONSUMER == 2 * LINE);
    assert!(ring_off::RESPONDER_MSN == 2 * LINE + 4);
    assert!(ring_off::NEED_WAKEUP == 3 * LINE);
    assert!(ring_off::EVENT_INDEX == 3 * LINE + 4);
    assert!(ring_off::DATA == 4 * LINE);
};

/// Why a ring geometry was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecError {
    /// The slot count is 0, not a power of two or over [`MAX_SLOTS`].
    SlotCount(u32),
    /// The slot size is not a power of two, or smaller than the kind's fixed descriptor.
    SlotSize(u32),
}

impl core::fmt::Display for SpecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::SlotCount(n) => write!(
                f,
                "ring slot count {n} is not a power of two in 1..={MAX_SLOTS}"
            ),
            Self::SlotSize(n) => write!(
                f,
                "ring slot size {n} is not a power of two large enough for its descriptor"
            ),
        }
    }
}

impl std::error::Error for SpecError {}

/// The geometry of one ring, as its owner knows it. The daemon builds this from the sizes it
/// chose and never from shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSpec {
    kind: RingKind,
    slots: u32,
    slot_size: u32,
}

impl RingSpec {
    /// A checked geometry: `slots` and `slot_size` powers of two, the slot at least the
    /// kind's fixed descriptor.
    pub const fn new(kind: RingKind, slots: u32, slot_size: u32) -> Result<Self, SpecError> {
        if slots == 0 || !slots.is_power_of_two() || slots > MAX_SLOTS {
            return Err(SpecError::SlotCount(slots));
        }
        let min = match kind {
            RingKind::Sq => size_of::<crate::SendDesc>(),
            RingKind::Rq => size_of::<crate::RecvDesc>(),
            RingKind::Cq => size_of::<crate::Cqe>(),
        } as u32;
        if !slot_size.is_power_of_two() || slot_size < min || slot_size > 1 << 16 {
            return Err(SpecError::SlotSize(slot_size));
        }
        Ok(Self {
            kind,
            slots,
            slot_size,
        })
    }

    /// The kind.
    pub const fn kind(&self) -> RingKind {
        self.kind
    }

    /// Slots.
    pub const fn slots(&self) -> u32 {
        self.slots
    }

    /// `slots - 1`.
    pub const fn mask(&self) -> u32 {
        self.slots - 1
    }

    /// Bytes per slot.
    pub const fn slot_size(&self) -> u32 {
        self.slot_size
    }

    /// Bytes of the whole ring, header included.
    pub const fn bytes(&self) -> usize {
        ring_off::DATA + self.slots as usize * self.slot_size as usize
    }

    /// Bytes of the ring rounded up to [`RING_ALIGN`], the stride between rings.
    pub const fn stride(&self) -> usize {
        self.bytes().div_ceil(RING_ALIGN) * RING_ALIGN
    }

    /// The header the daemon writes at the start of the ring.
    pub fn header(&self, max_sge: u32, max_inline: u32) -> RingHeader {
        RingHeader {
            magic: RING_MAGIC,
            kind: self.kind as u32,
            log2_slot_size: self.slot_size.trailing_zeros(),
            slot_count: self.slots,
            index_mask: self.mask(),
            data_offset: ring_off::DATA as u32,
            max_sge,
            max_inline,
            ..RingHeader::new_zeroed()
        }
    }
}

impl RegionHeader {
    /// The header of a region of `region_len` bytes for this ABI.
    pub fn new(region_len: u64) -> Self {
        Self {
            magic: REGION_MAGIC,
            abi_version: ABI_VERSION,
            header_size: size_of::<Self>() as u32,
            region_len,
            ring_header_size: size_of::<RingHeader>() as u32,
            send_desc_size: size_of::<crate::SendDesc>() as u32,
            recv_desc_size: size_of::<crate::RecvDesc>() as u32,
            cqe_size: size_of::<crate::Cqe>() as u32,
            sge_size: size_of::<crate::SgeDesc>() as u32,
            reserved: [0; 21],
        }
    }

    /// True when a client built for this crate can use the region.
    pub fn compatible(&self) -> bool {
        *self == Self::new(self.region_len)
    }
}
