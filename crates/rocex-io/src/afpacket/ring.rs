//! The PACKET_MMAP rings of the packet socket (kernel `Documentation/networking/
//! packet_mmap.rst`), TPACKET_V3: a receive ring of blocks, each holding as many frames as
//! fit and handed over whole (when full, or when its timer fires), and a transmit ring of
//! fixed slots that one `sendto` sends together. Both share one mapping: receive first.
//!
//! Every frame, both ways, comes with a `virtio_net_hdr` (`PACKET_VNET_HDR`): on a
//! software link (veth, loopback) a UDP GSO burst from a local UDP socket arrives as one
//! frame, which only that header says how to cut.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys;

/// Receive blocks: 72 KiB each, 4.5 MiB in all. A block holds the largest frame, a
/// 64 KiB UDP GSO burst from a local socket (see above), or sixteen 4 KiB-MTU frames.
const RX_BLOCK: usize = 18 << 12;
const RX_BLOCKS: usize = 64;
/// The nominal frame size the kernel wants for a V3 receive ring (blocks hold any mix).
const RX_FRAME: usize = 1 << 11;
/// A block not yet full is handed over after this many milliseconds (at least one
/// kernel tick).
const RX_RETIRE_MS: u32 = 1;
/// Transmit slots: 16 KiB each (a 9000-byte jumbo frame fits), 256 of them.
const TX_SLOT: usize = 1 << 14;
const TX_BLOCK: usize = 1 << 16;
const TX_SLOTS: usize = 256;

/// Where a transmit slot's data starts: after the aligned `tpacket3_hdr`.
const TX_DATA: usize = 48;
/// The aligned `tpacket3_hdr` and the `sockaddr_ll` after it, before a received frame.
const RX_HDR: usize = TX_DATA + 20;
/// `struct virtio_net_hdr`, in front of every frame.
const VNET_HDR: usize = 10;
/// `virtio_net_hdr.gso_type` of a UDP GSO burst.
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
/// The ECN flag `virtio_net_hdr.gso_type` may carry besides the type.
const GSO_ECN: u8 = 0x80;
/// The biggest frame a transmit slot holds.
pub(super) const TX_MAX_FRAME: usize = TX_SLOT - TX_DATA - VNET_HDR;

/// Offsets in `tpacket_block_desc` (`hdr.bh1`) and `tpacket3_hdr`, and of the
/// `sockaddr_ll` that follows the latter.
mod field {
    pub(super) const BLOCK_STATUS: usize = 8;
    pub(super) const NUM_PKTS: usize = 12;
    pub(super) const FIRST_PKT: usize = 16;
    pub(super) const NEXT_OFFSET: usize = 0;
    pub(super) const SNAPLEN: usize = 12;
    pub(super) const LEN: usize = 16;
    pub(super) const STATUS: usize = 20;
    pub(super) const MAC: usize = 24;
    pub(super) const VLAN_TCI: usize = 32;
    pub(super) const PKTTYPE: usize = 48 + 10;
}

/// The two rings of one packet socket.
#[derive(Debug)]
pub(super) struct Rings {
    map: NonNull<u8>,
    len: usize,
    rx_next: usize,
    tx_next: usize,
    /// Slots marked for sending since the last [`Rings::kick`].
    tx_marked: usize,
    /// Frames the kernel refused to send (`TP_STATUS_WRONG_FORMAT`).
    pub(super) tx_rejected: u64,
}

// SAFETY: the mapping belongs to this value alone; nothing else in the process aliases it.
unsafe impl Send for Rings {}

/// One received frame in a block.
#[derive(Debug)]
pub(super) struct RxFrame<'a> {
    /// The frame from its Ethernet header on.
    pub(super) bytes: &'a [u8],
    /// The frame was sent by this host (`PACKET_OUTGOING`).
    pub(super) outgoing: bool,
    /// The 802.1Q tag the kernel took off the frame, if any.
    pub(super) vlan_tci: Option<u16>,
    /// The frame is a UDP GSO burst of datagrams of this many payload bytes (the last
    /// may be shorter), sent as one through a software link.
    pub(super) gso_size: Option<u16>,
}

impl Rings {
    /// Sets up and maps both rings of `fd`, a TPACKET_V3 packet socket not yet bound.
    pub(super) fn map(fd: &OwnedFd) -> io::Result<Self> {
        sys::set_option(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            &(1 as libc::c_int),
        )
        .map_err(|e| context("PACKET_VNET_HDR", e))?;
        sys::set_option(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )
        .map_err(|e| context("PACKET_VERSION TPACKET_V3", e))?;
        // A frame the kernel cannot send is marked and skipped rather than stalling the
        // ring (set before the rings, as the kernel requires).
        sys::set_option(fd, libc::SOL_PACKET, libc::PACKET_LOSS, &(1 as libc::c_int))
            .map_err(|e| context("PACKET_LOSS", e))?;
        let rx = libc::tpacket_req3 {
            tp_block_size: RX_BLOCK as u32,
            tp_block_nr: RX_BLOCKS as u32,
            tp_frame_size: RX_FRAME as u32,
            tp_frame_nr: (RX_BLOCK / RX_FRAME * RX_BLOCKS) as u32,
            tp_retire_blk_tov: RX_RETIRE_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::set_option(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx)
            .map_err(|e| context("PACKET_RX_RING", e))?;
        let tx = libc::tpacket_req3 {
            tp_block_size: TX_BLOCK as u32,
            tp_block_nr: (TX_SLOTS * TX_SLOT / TX_BLOCK) as u32,
            tp_frame_size: TX_SLOT as u32,
            tp_frame_nr: TX_SLOTS as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::set_option(fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &tx)
            .map_err(|e| context("PACKET_TX_RING", e))?;
        let len = RX_BLOCK * RX_BLOCKS + TX_SLOT * TX_SLOTS;
        // SAFETY: maps the socket's rings, whose total size is `len`; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(context("mmap of the rings", io::Error::last_os_error()));
        }
        Ok(Self {
            map: NonNull::new(p.cast()).expect("mmap returned a non-null mapping"),
            len,
            rx_next: 0,
            tx_next: 0,
            tx_marked: 0,
            tx_rejected: 0,
        })
    }

    /// The status word at `offset` of the mapping, shared with the kernel.
    fn status(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset + 4 <= self.len && offset % 4 == 0);
        // SAFETY: `offset` lies in the mapping and is 4-aligned (blocks and slots are
        // 16-aligned and the fields are at fixed aligned offsets); the kernel and this
        // process access the word atomically.
        unsafe { AtomicU32::from_ptr(self.map.as_ptr().add(offset).cast()) }
    }

    /// Bytes `offset..offset + len` of the mapping, which the kernel has handed over (its
    /// status word said so, read with Acquire) and does not touch until it is handed back.
    fn owned(&mut self, offset: usize, len: usize) -> &mut [u8] {
        debug_assert!(offset + len <= self.len);
        // SAFETY: the range lies in the mapping; the caller holds it from the kernel, and
        // `&mut self` keeps any other view of it from existing meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(offset), len) }
    }

    /// Hands the frames of the next filled receive block to `f`, then gives the block
    /// back to the kernel. Returns false when no block is ready.
    pub(super) fn rx_block(&mut self, mut f: impl FnMut(RxFrame<'_>)) -> bool {
        let at = self.rx_next * RX_BLOCK;
        let status = self.status(at + field::BLOCK_STATUS);
        if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return false;
        }
        let block = self.owned(at, RX_BLOCK);
        let num = u32_at(block, field::NUM_PKTS);
        let mut p = u32_at(block, field::FIRST_PKT) as usize;
        for _ in 0..num {
            let Some(hdr) = block.get(p..p + RX_HDR) else {
                break;
            };
            let status = u32_at(hdr, field::STATUS);
            let mac = u16_at(hdr, field::MAC) as usize;
            let snap = u32_at(hdr, field::SNAPLEN) as usize;
            let next = u32_at(hdr, field::NEXT_OFFSET) as usize;
            let outgoing = hdr[field::PKTTYPE] == libc::PACKET_OUTGOING;
            let vlan_tci = (status & libc::TP_STATUS_VLAN_VALID != 0)
                .then(|| u32_at(hdr, field::VLAN_TCI) as u16);
            // A frame cut short (snapshot below its length) fails to parse later on.
            let vnet = block.get(p + mac - VNET_HDR.min(mac)..p + mac);
            if let (Some(bytes), Some(vnet)) = (block.get(p + mac..p + mac + snap), vnet) {
                let gso_size = (vnet.len() == VNET_HDR
                    && vnet[1] & !GSO_ECN == VIRTIO_NET_HDR_GSO_UDP_L4)
                    .then(|| u16::from_ne_bytes([vnet[4], vnet[5]]));
                f(RxFrame {
                    bytes,
                    outgoing,
                    vlan_tci,
                    gso_size,
                });
            }
            if next == 0 {
                break;
            }
            p += next;
        }
        self.status(at + field::BLOCK_STATUS)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.rx_next = (self.rx_next + 1) % RX_BLOCKS;
        true
    }

    /// Offset of transmit slot `i`.
    fn tx_at(i: usize) -> usize {
        RX_BLOCK * RX_BLOCKS + i * TX_SLOT
    }

    /// The next free transmit slot's frame area, if the kernel is done with it.
    pub(super) fn tx_slot(&mut self) -> Option<&mut [u8]> {
        let at = Self::tx_at(self.tx_next);
        let status = self.status(at + field::STATUS);
        match status.load(Ordering::Acquire) {
            libc::TP_STATUS_AVAILABLE => {}
            libc::TP_STATUS_WRONG_FORMAT => {
                status.store(libc::TP_STATUS_AVAILABLE, Ordering::Relaxed);
                self.tx_rejected += 1;
            }
            _ => return None,
        }
        Some(&mut self.owned(at, TX_SLOT)[TX_DATA + VNET_HDR..])
    }

    /// Marks the slot [`Rings::tx_slot`] returned, holding a frame of `len` bytes, for
    /// sending.
    pub(super) fn tx_commit(&mut self, len: usize) {
        let at = Self::tx_at(self.tx_next);
        let hdr = self.owned(at, TX_DATA + VNET_HDR);
        // No offloads asked of the kernel: checksums and segments are all done.
        hdr[TX_DATA..].fill(0);
        let len = (VNET_HDR + len) as u32;
        hdr[field::NEXT_OFFSET..field::NEXT_OFFSET + 4].fill(0);
        hdr[field::LEN..field::LEN + 4].copy_from_slice(&len.to_ne_bytes());
        hdr[field::SNAPLEN..field::SNAPLEN + 4].copy_from_slice(&len.to_ne_bytes());
        self.status(at + field::STATUS)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.tx_next = (self.tx_next + 1) % TX_SLOTS;
        self.tx_marked += 1;
    }

    /// Frames marked for sending since the last kick.
    pub(super) fn tx_marked(&self) -> usize {
        self.tx_marked
    }

    /// Sends every marked frame with one system call. A full device queue is not an
    /// error: the frames stay marked and go with the next kick.
    pub(super) fn kick(&mut self, fd: &OwnedFd) -> io::Result<()> {
        self.tx_marked = 0;
        match sys::kick_tx(fd) {
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.raw_os_error() == Some(libc::ENOBUFS) =>
            {
                Ok(())
            }
            r => r,
        }
    }
}

impl Drop for Rings {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `map` with this length and is unmapped once.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
    }
}

fn context(what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("afpacket {what}: {e}"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(b[at..at + 2].try_into().expect("two bytes"))
}
