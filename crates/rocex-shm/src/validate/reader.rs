//! The daemon's readers of a send and a receive queue: each descriptor copied once, only
//! the bytes its header asks for.

use crate::desc::{RecvDesc, SendDesc, SgeDesc};
use crate::ring::{Consumer, Slot};
use core::mem::size_of;
use rocex_verbs_types::{RecvWr, SendData, SendWr};
use zerocopy::{FromBytes, IntoBytes};

use super::descriptor::{Payload, check_recv_header, check_send_header, send_wr, sges_from};
use super::{QueueLimits, ReadError, RqLimits, SqLimits};

/// The daemon's reader of one send or receive queue ([`SqReader`], [`RqReader`]).
#[derive(Debug)]
pub struct QueueReader<'m, L> {
    ring: Consumer<'m>,
    limits: L,
    buf: Vec<u8>,
}

/// The daemon's reader of one send queue.
pub type SqReader<'m> = QueueReader<'m, SqLimits>;

/// The daemon's reader of one receive queue.
pub type RqReader<'m> = QueueReader<'m, RqLimits>;

impl<'m, L: QueueLimits> QueueReader<'m, L> {
    /// A reader over a ring consumer of `L`'s queue with the QP's limits.
    pub fn new(ring: Consumer<'m>, limits: L) -> Self {
        debug_assert_eq!(ring.spec().kind(), L::KIND);
        Self {
            // Grown to what descriptors need: a reader is made per pass that finds work,
            // and most read one small descriptor.
            buf: Vec::new(),
            ring,
            limits,
        }
    }

    /// The underlying consumer (release, sleep).
    pub fn ring(&mut self) -> &mut Consumer<'m> {
        &mut self.ring
    }

    /// The next slot and its descriptor's fixed part, copied once out of the slot's start;
    /// `None` when the ring is empty.
    fn next_desc<D: FromBytes + IntoBytes>(&mut self) -> Result<Option<(Slot<'m>, D)>, ReadError> {
        let Some(slot) = self.ring.next_slot()? else {
            return Ok(None);
        };
        let mut d = D::new_zeroed();
        slot.view.read(0, d.as_mut_bytes())?;
        Ok(Some((slot, d)))
    }
}

impl SqReader<'_> {
    /// The next send request, validated; `Ok(None)` when the ring is empty. Each shared
    /// byte is read once: the 128-byte header, then exactly the payload the private copy
    /// of the header describes.
    pub fn read_send(&mut self) -> Result<Option<SendWr>, ReadError> {
        let Some((slot, d)) = self.next_desc::<SendDesc>()? else {
            return Ok(None);
        };
        let fail = ReadError::of_desc(d.wr_id);
        let payload =
            check_send_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let data = match payload {
            // Straight into the request's own buffer, which the engine copies into the
            // packet: one copy out of shared memory, one into the packet.
            Payload::Inline(n) => {
                let mut data = vec![0; payload.bytes()];
                slot.view.read(size_of::<SendDesc>(), &mut data)?;
                data.truncate(n as usize);
                SendData::Inline(data)
            }
            Payload::Sges(n) => {
                let buf = scratch(&mut self.buf, payload.bytes());
                slot.view.read(size_of::<SendDesc>(), buf)?;
                SendData::Sges(sges_from(buf, n as usize))
            }
        };
        send_wr(&d, data).map(Some).map_err(fail)
    }
}

impl RqReader<'_> {
    /// The next receive request, validated; `Ok(None)` when the ring is empty.
    pub fn read_recv(&mut self) -> Result<Option<RecvWr>, ReadError> {
        let Some((slot, d)) = self.next_desc::<RecvDesc>()? else {
            return Ok(None);
        };
        let fail = ReadError::of_desc(d.wr_id);
        let n = check_recv_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let buf = scratch(&mut self.buf, n as usize * size_of::<SgeDesc>());
        slot.view.read(size_of::<RecvDesc>(), buf)?;
        let sges = sges_from(buf, n as usize);
        rocex_verbs_types::message_len(&sges).map_err(|e| fail(super::DescError::of_rule(e, 0)))?;
        Ok(Some(RecvWr {
            wr_id: d.wr_id,
            sges,
        }))
    }
}

/// The first `n` bytes of `buf`, grown to hold them: a reader's copy of a payload.
fn scratch(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}
