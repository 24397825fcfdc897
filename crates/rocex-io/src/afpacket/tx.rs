//! Sending: the frames of a flush gather in one buffer, each behind the zeroed
//! `virtio_net_hdr` that `PACKET_VNET_HDR` puts in front of every frame (no offloads asked:
//! checksums and segments are all done), and one `sendmmsg` sends them all.
//!
//! No transmit ring: on a veth pair a frame sent from a TX_RING reaches the peer's stack
//! later than a plain send's. The ring's frame travels as zero-copy pages that the link
//! copies anyway, and its slot is handed back under a lock; a plain send copies the frame
//! once into its buffer. Measured side by side, an 8-byte WRITE's round trip fell from
//! 6.0 us to 5.1 us (`docs/performance.md`).

use std::io;
use std::os::fd::OwnedFd;

use super::sys;

/// `struct virtio_net_hdr`, in front of every frame both ways.
pub(super) const VNET_HDR: usize = 10;
/// The biggest frame sent (a 9000-byte jumbo frame fits).
pub(super) const MAX_FRAME: usize = (16 << 10) - VNET_HDR;
/// Frames a flush sends at most in one system call; more wait for the next.
pub(super) const MAX_FRAMES: usize = 64;

/// The frames waiting for the next flush.
#[derive(Debug)]
pub(super) struct TxBatch {
    buf: Vec<u8>,
    /// Where each frame (with its header) lies in `buf`.
    frames: Vec<(usize, usize)>,
    used: usize,
}

impl TxBatch {
    pub(super) fn new() -> Self {
        Self {
            buf: vec![0; MAX_FRAMES * (VNET_HDR + MAX_FRAME)],
            frames: Vec::with_capacity(MAX_FRAMES),
            used: 0,
        }
    }

    /// Frames waiting.
    pub(super) fn len(&self) -> usize {
        self.frames.len()
    }

    /// Room for a frame of up to [`MAX_FRAME`] bytes, unless the batch is full (then
    /// [`TxBatch::send`] first).
    pub(super) fn slot(&mut self) -> Option<&mut [u8]> {
        if self.frames.len() == MAX_FRAMES {
            return None;
        }
        let at = self.used;
        let room = &mut self.buf[at..at + VNET_HDR + MAX_FRAME];
        room[..VNET_HDR].fill(0);
        Some(&mut room[VNET_HDR..])
    }

    /// Queues the `len`-byte frame written into the last [`TxBatch::slot`].
    pub(super) fn commit(&mut self, len: usize) {
        self.frames.push((self.used, VNET_HDR + len));
        self.used += VNET_HDR + len;
    }

    /// Sends every waiting frame on `fd`; returns how many the kernel refused (a full
    /// device queue: the transport retransmits).
    pub(super) fn send(&mut self, fd: &OwnedFd) -> io::Result<usize> {
        let mut sent = 0;
        while sent < self.frames.len() {
            match sys::send_frames(fd, &self.buf, &self.frames[sent..]) {
                Ok(n) => sent += n,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.raw_os_error() == Some(libc::ENOBUFS) =>
                {
                    break;
                }
                Err(e) => {
                    self.clear();
                    return Err(e);
                }
            }
        }
        let refused = self.frames.len() - sent;
        self.clear();
        Ok(refused)
    }

    fn clear(&mut self) {
        self.frames.clear();
        self.used = 0;
    }
}
