//! The fields this host reads from the 4096-byte Identify data structures.
//!
//! Offsets: NVMe Base Specification, "Identify Controller Data Structure" and NVM Command
//! Set Specification, "Identify Namespace Data Structure"; Linux's `struct nvme_id_ctrl`
//! and `struct nvme_id_ns` (include/linux/nvme.h). The structures are far larger than
//! what a block host needs, so the parsers read fields by offset rather than mapping
//! 4096-byte structs.

use core::fmt;

/// Bytes of an Identify data structure.
pub const IDENTIFY_LEN: usize = 4096;

/// Why an Identify structure cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifyError(pub String);

impl fmt::Display for IdentifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
/// An ASCII field, space-padded (serial, model, firmware) or NUL-padded (NQN).
fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).trim_end().to_owned()
}

fn whole(b: &[u8], what: &str) -> Result<(), IdentifyError> {
    if b.len() < IDENTIFY_LEN {
        return Err(IdentifyError(format!(
            "identify {what}: {} bytes, the structure has {IDENTIFY_LEN}",
            b.len()
        )));
    }
    Ok(())
}

/// The controller data structure (CNS 01h), the fields a host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// PCI vendor ID (bytes 0-1).
    pub vid: u16,
    /// Serial number (bytes 4-23).
    pub serial: String,
    /// Model number (bytes 24-63).
    pub model: String,
    /// Firmware revision (bytes 64-71).
    pub firmware: String,
    /// Maximum data transfer size, a power of two in units of CAP.MPSMIN (byte 77; 0:
    /// no limit).
    pub mdts: u8,
    /// Controller ID (bytes 78-79).
    pub cntlid: u16,
    /// Version (bytes 80-83).
    pub version: u32,
    /// Maximum outstanding commands (bytes 514-515; 0: not reported).
    pub maxcmd: u16,
    /// Number of namespaces, the largest valid NSID (bytes 516-519).
    pub nn: u32,
    /// The subsystem's NQN (bytes 768-1023).
    pub subnqn: String,
    /// I/O queue command capsule size in 16-byte units (bytes 1792-1795).
    pub ioccsz: u32,
    /// I/O queue response capsule size in 16-byte units (bytes 1796-1799).
    pub iorcsz: u32,
    /// Maximum SGL data block descriptors per command (byte 1803).
    pub msdbd: u8,
}

impl Controller {
    /// Reads the fields from the structure's bytes.
    pub fn parse(b: &[u8]) -> Result<Self, IdentifyError> {
        whole(b, "controller")?;
        Ok(Self {
            vid: le16(b, 0),
            serial: text(&b[4..24]),
            model: text(&b[24..64]),
            firmware: text(&b[64..72]),
            mdts: b[77],
            cntlid: le16(b, 78),
            version: le32(b, 80),
            maxcmd: le16(b, 514),
            nn: le32(b, 516),
            subnqn: text(&b[768..1024]),
            ioccsz: le32(b, 1792),
            iorcsz: le32(b, 1796),
            msdbd: b[1803],
        })
    }

    /// The largest transfer in bytes for a minimum page of `page` bytes, if limited.
    pub fn max_transfer(&self, page: u64) -> Option<u64> {
        (self.mdts != 0).then(|| page << self.mdts.min(32))
    }
}

/// The namespace data structure (CNS 00h), the fields a host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Namespace size in logical blocks (bytes 0-7).
    pub nsze: u64,
    /// Namespace capacity in logical blocks (bytes 8-15).
    pub ncap: u64,
    /// The LBA format in use (FLBAS bits 3:0, byte 26).
    pub flbas: u8,
    /// Its logical block size in bytes (LBADS of that LBA format, byte 2 of the 4-byte
    /// entry at 128 + 4 * index).
    pub block_size: u32,
    /// Metadata bytes per block of that format (bytes 0-1 of the entry).
    pub metadata: u16,
}

impl Namespace {
    /// Reads the fields from the structure's bytes. A namespace whose format has
    /// metadata, or whose block size is not 512 bytes to 64 KiB, is refused: this host
    /// moves whole data blocks only.
    pub fn parse(b: &[u8]) -> Result<Self, IdentifyError> {
        whole(b, "namespace")?;
        let flbas = b[26] & 0xf;
        let nlbaf = b[25];
        if flbas > nlbaf {
            return Err(IdentifyError(format!(
                "identify namespace: format {flbas} in use, only {} defined",
                u16::from(nlbaf) + 1
            )));
        }
        let entry = 128 + 4 * usize::from(flbas);
        let lbads = b[entry + 2];
        let metadata = le16(b, entry);
        if !(9..=16).contains(&lbads) {
            return Err(IdentifyError(format!(
                "identify namespace: block size 2^{lbads} is outside 512 B to 64 KiB"
            )));
        }
        if metadata != 0 {
            return Err(IdentifyError(format!(
                "identify namespace: {metadata} bytes of metadata per block"
            )));
        }
        Ok(Self {
            nsze: le64(b, 0),
            ncap: le64(b, 8),
            flbas,
            block_size: 1 << lbads,
            metadata,
        })
    }

    /// The namespace's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.nsze.saturating_mul(u64::from(self.block_size))
    }
}
