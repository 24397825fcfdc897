//! The 16-byte completion queue entry (the response capsule) and its status field.
//!
//! Layout: NVMe Base Specification, "Common Completion Queue Entry Layout" (DW0-DW3) and
//! "Completion Queue Entry: Status Field"; Linux's `struct nvme_completion`
//! (include/linux/nvme.h). Over fabrics the phase tag (status bit 0) is reserved: the
//! host learns of a completion from the RDMA receive, not from a phase flip.

use core::fmt;

use zerocopy::little_endian::{U16, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Bytes of a completion queue entry.
pub const CQE_LEN: usize = 16;

/// A completion queue entry.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Cqe {
    /// Bytes 0-7: command-specific result (DW0 and DW1); a Property Get's value, a
    /// Connect's controller ID (bytes 0-1).
    pub result: U64,
    /// Bytes 8-9: the submission queue head pointer.
    pub sq_head: U16,
    /// Bytes 10-11: the submission queue the command came from.
    pub sq_id: U16,
    /// Bytes 12-13: the command identifier.
    pub cid: U16,
    /// Bytes 14-15: phase tag (bit 0) and status (bits 15:1).
    pub status: U16,
}

const _: () = assert!(size_of::<Cqe>() == CQE_LEN);

impl Cqe {
    /// The status field without the phase tag.
    pub fn status(&self) -> Status {
        Status(self.status.get() >> 1)
    }
}

/// A completion status: the 15 bits above the phase tag.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub u16);

/// Status code types (SCT).
pub mod sct {
    /// Generic command status.
    pub const GENERIC: u8 = 0;
    /// Command-specific status.
    pub const COMMAND_SPECIFIC: u8 = 1;
    /// Media and data integrity errors.
    pub const MEDIA: u8 = 2;
    /// Path-related status.
    pub const PATH: u8 = 3;
}

impl Status {
    /// Successful completion.
    pub const SUCCESS: Self = Self(0);

    /// Status Code (bits 7:0 above the phase tag).
    pub fn sc(self) -> u8 {
        self.0 as u8
    }
    /// Status Code Type (bits 10:8).
    pub fn sct(self) -> u8 {
        (self.0 >> 8) as u8 & 0x7
    }
    /// Do Not Retry (bit 14).
    pub fn dnr(self) -> bool {
        self.0 & 1 << 14 != 0
    }
    /// True for a successful completion (SCT 0, SC 0).
    pub fn is_success(self) -> bool {
        self.sct() == sct::GENERIC && self.sc() == 0
    }

    /// The specification's name for the status codes this host is likely to meet.
    pub fn name(self) -> &'static str {
        match (self.sct(), self.sc()) {
            (sct::GENERIC, 0x00) => "successful completion",
            (sct::GENERIC, 0x01) => "invalid command opcode",
            (sct::GENERIC, 0x02) => "invalid field in command",
            (sct::GENERIC, 0x03) => "command ID conflict",
            (sct::GENERIC, 0x04) => "data transfer error",
            (sct::GENERIC, 0x06) => "internal error",
            (sct::GENERIC, 0x07) => "command abort requested",
            (sct::GENERIC, 0x0b) => "invalid namespace or format",
            (sct::GENERIC, 0x0c) => "command sequence error",
            (sct::GENERIC, 0x0d) => "invalid SGL segment descriptor",
            (sct::GENERIC, 0x0f) => "data SGL length invalid",
            (sct::GENERIC, 0x11) => "SGL descriptor type invalid",
            (sct::GENERIC, 0x80) => "LBA out of range",
            (sct::GENERIC, 0x81) => "capacity exceeded",
            (sct::GENERIC, 0x82) => "namespace not ready",
            (sct::COMMAND_SPECIFIC, 0x80) => "connect: incompatible format",
            (sct::COMMAND_SPECIFIC, 0x81) => "connect: controller busy",
            (sct::COMMAND_SPECIFIC, 0x82) => "connect: invalid parameters",
            (sct::COMMAND_SPECIFIC, 0x83) => "connect: restart discovery",
            (sct::COMMAND_SPECIFIC, 0x84) => "connect: invalid host",
            (sct::MEDIA, 0x80) => "write fault",
            (sct::MEDIA, 0x81) => "unrecovered read error",
            (sct::MEDIA, 0x86) => "access denied",
            _ => "unrecognised status",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (SCT {:#x}, SC {:#04x}{})",
            self.name(),
            self.sct(),
            self.sc(),
            if self.dnr() { ", do not retry" } else { "" }
        )
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
