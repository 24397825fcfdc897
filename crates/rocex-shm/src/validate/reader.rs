//! The daemon's readers of a send and a receive queue: each descriptor copied once, only
//! the bytes its header asks for.

use crate::desc::{RecvDesc, SendDesc, SgeDesc};
use crate::layout::RingKind;
use crate::ring::Consumer;
use core::mem::size_of;
use rocex_proto::verbs::{RecvWr, SendWr};
use zerocopy::FromBytes;

use super::descriptor::{build_send, check_recv_header, check_send_header, sges_from, total_len};
use super::error::copy_error;
use super::{ReadError, RqLimits, SqLimits};

/// The daemon's reader of one send queue.
#[derive(Debug)]
pub struct SqReader<'m> {
    ring: Consumer<'m>,
    limits: SqLimits,
    buf: Vec<u8>,
}

impl<'m> SqReader<'m> {
    /// A reader over an SQ ring consumer with the QP's limits.
    pub fn new(ring: Consumer<'m>, limits: SqLimits) -> Self {
        debug_assert_eq!(ring.spec().kind(), RingKind::Sq);
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

    /// The next send request, validated; `Ok(None)` when the ring is empty. Each shared
    /// byte is read once: the 128-byte header, then exactly the payload the private copy
    /// of the header describes.
    pub fn read_send(&mut self) -> Result<Option<SendWr>, ReadError> {
        let Some(slot) = self.ring.next_slot()? else {
            return Ok(None);
        };
        let fixed = size_of::<SendDesc>();
        let mut head = [0u8; size_of::<SendDesc>()];
        slot.view.read(0, &mut head)?;
        let Ok(d) = SendDesc::read_from_bytes(&head[..]) else {
            return Err(copy_error());
        };
        let fail = |error| ReadError::Desc {
            wr_id: d.wr_id,
            error,
        };
        let payload =
            check_send_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let n = payload.bytes();
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        let buf = &mut self.buf[..n];
        slot.view.read(fixed, buf)?;
        build_send(&d, payload, buf).map(Some).map_err(fail)
    }
}

/// The daemon's reader of one receive queue.
#[derive(Debug)]
pub struct RqReader<'m> {
    ring: Consumer<'m>,
    limits: RqLimits,
    buf: Vec<u8>,
}

impl<'m> RqReader<'m> {
    /// A reader over an RQ ring consumer with the QP's limits.
    pub fn new(ring: Consumer<'m>, limits: RqLimits) -> Self {
        debug_assert_eq!(ring.spec().kind(), RingKind::Rq);
        Self {
            buf: Vec::new(),
            ring,
            limits,
        }
    }

    /// The underlying consumer.
    pub fn ring(&mut self) -> &mut Consumer<'m> {
        &mut self.ring
    }

    /// The next receive request, validated; `Ok(None)` when the ring is empty.
    pub fn read_recv(&mut self) -> Result<Option<RecvWr>, ReadError> {
        let Some(slot) = self.ring.next_slot()? else {
            return Ok(None);
        };
        let mut head = [0u8; size_of::<RecvDesc>()];
        slot.view.read(0, &mut head)?;
        let Ok(d) = RecvDesc::read_from_bytes(&head[..]) else {
            return Err(copy_error());
        };
        let fail = |error| ReadError::Desc {
            wr_id: d.wr_id,
            error,
        };
        let n = check_recv_header(&d, &self.limits, self.ring.spec().slot_size()).map_err(fail)?;
        let len = n as usize * size_of::<SgeDesc>();
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let buf = &mut self.buf[..len];
        slot.view.read(size_of::<RecvDesc>(), buf)?;
        let sges = sges_from(buf, n as usize);
        total_len(&sges).map_err(fail)?;
        Ok(Some(RecvWr {
            wr_id: d.wr_id,
            sges,
        }))
    }
}
