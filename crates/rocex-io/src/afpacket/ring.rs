//! The packet socket's PACKET_MMAP receive ring (kernel `Documentation/networking/
//! packet_mmap.rst`), TPACKET_V2: fixed frames, each handed over as soon as the kernel has
//! filled it (no block timer: a lone packet is readable at once). Sending needs no ring
//! (`tx.rs`).
//!
//! Every frame, both ways, comes with a `virtio_net_hdr` (`PACKET_VNET_HDR`): on a
//! software link (veth, loopback) a UDP GSO burst from a local UDP socket arrives as one
//! frame, which only that header says how to cut.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::tx::VNET_HDR;
use crate::sockopt;

/// Receive frames: 72 KiB each (one per block), 9 MiB in all. A frame holds the largest
/// there is, a 64 KiB UDP GSO burst from a local socket (see above), with its headers.
const RX_FRAME: usize = 18 << 12;
const RX_FRAMES: usize = 128;

/// The aligned `tpacket2_hdr` and the `sockaddr_ll` after it, before a received frame.
const RX_HDR: usize = 32 + 20;
/// `virtio_net_hdr.gso_type` of a UDP GSO burst.
const VIRTIO_NET_HDR_GSO_UDP_L4: u8 = 5;
/// The ECN flag `virtio_net_hdr.gso_type` may carry besides the type.
const GSO_ECN: u8 = 0x80;

/// Offsets in `tpacket2_hdr`, and of the `sockaddr_ll` field that follows it.
mod field {
    pub(super) const STATUS: usize = 0;
    pub(super) const SNAPLEN: usize = 8;
    pub(super) const MAC: usize = 12;
    pub(super) const VLAN_TCI: usize = 24;
    pub(super) const PKTTYPE: usize = 32 + 10;
}

/// The receive ring of one packet socket.
#[derive(Debug)]
pub(super) struct Rings {
    map: NonNull<u8>,
    len: usize,
    rx_next: usize,
}

// SAFETY: the mapping belongs to this value alone; nothing else in the process aliases it.
unsafe impl Send for Rings {}

/// One received frame.
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
    /// Sets up and maps the receive ring of `fd`, a packet socket not yet bound.
    pub(super) fn map(fd: &OwnedFd) -> io::Result<Self> {
        sockopt::set(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            &(1 as libc::c_int),
        )
        .map_err(|e| context("PACKET_VNET_HDR", e))?;
        sockopt::set(
            fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as libc::c_int),
        )
        .map_err(|e| context("PACKET_VERSION TPACKET_V2", e))?;
        let rx = libc::tpacket_req {
            tp_block_size: RX_FRAME as u32,
            tp_block_nr: RX_FRAMES as u32,
            tp_frame_size: RX_FRAME as u32,
            tp_frame_nr: RX_FRAMES as u32,
        };
        sockopt::set(fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &rx)
            .map_err(|e| context("PACKET_RX_RING", e))?;
        let len = RX_FRAME * RX_FRAMES;
        // SAFETY: maps the socket's ring, whose size is `len`; checked below.
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
            return Err(context("mmap of the ring", io::Error::last_os_error()));
        }
        Ok(Self {
            map: NonNull::new(p.cast()).expect("mmap returned a non-null mapping"),
            len,
            rx_next: 0,
        })
    }

    /// The status word at `offset` of the mapping, shared with the kernel.
    fn status(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset + 4 <= self.len && offset % 4 == 0);
        // SAFETY: `offset` lies in the mapping and is 4-aligned (frames are 16-aligned and
        // the status word starts them); the kernel and this process access the word
        // atomically.
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

    /// Hands every received frame the kernel has filled, in order, to `f`, giving each
    /// back as soon as `f` returns; returns how many there were.
    pub(super) fn rx_frames(&mut self, mut f: impl FnMut(RxFrame<'_>)) -> usize {
        let mut n = 0;
        // At most one lap: a frame the kernel fills meanwhile waits for the next call.
        while n < RX_FRAMES {
            let at = self.rx_next * RX_FRAME;
            if self.status(at + field::STATUS).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            let frame = self.owned(at, RX_FRAME);
            let status = u32_at(frame, field::STATUS);
            let mac = u16_at(frame, field::MAC) as usize;
            let snap = u32_at(frame, field::SNAPLEN) as usize;
            let outgoing = frame[field::PKTTYPE] == libc::PACKET_OUTGOING;
            let vlan_tci =
                (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| u16_at(frame, field::VLAN_TCI));
            // A frame cut short (snapshot below its length) fails to parse later on; a
            // header that points outside the frame is skipped.
            let vnet = (mac >= RX_HDR + VNET_HDR).then(|| frame.get(mac - VNET_HDR..mac));
            if let (Some(bytes), Some(Some(vnet))) = (frame.get(mac..mac + snap), vnet) {
                let gso_size = (vnet[1] & !GSO_ECN == VIRTIO_NET_HDR_GSO_UDP_L4)
                    .then(|| u16::from_ne_bytes([vnet[4], vnet[5]]));
                f(RxFrame {
                    bytes,
                    outgoing,
                    vlan_tci,
                    gso_size,
                });
            }
            self.status(at + field::STATUS)
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx_next = (self.rx_next + 1) % RX_FRAMES;
            n += 1;
        }
        n
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
