//! The application's writer of a send or receive queue.

use crate::desc::{RecvDesc, SendDesc, SgeDesc};
use crate::layout::RingSpec;
use crate::ring::{Producer, RingError};
use core::fmt;
use core::mem::size_of;
use rocex_verbs_types::{RecvWr, SendData, SendWr};

/// The application's writer of a send or receive queue: encodes into a private slot, then
/// pushes the bytes the descriptor uses.
#[derive(Debug)]
pub struct WqWriter<'m> {
    ring: Producer<'m>,
    buf: Vec<u8>,
}

/// Why a post failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// The request does not fit a slot.
    Encode(crate::desc::EncodeError),
    /// The ring is full or broken.
    Ring(RingError),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Encode(e) => write!(f, "{e}"),
            Self::Ring(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PostError {}

impl<'m> WqWriter<'m> {
    /// A writer over an SQ or RQ producer of geometry `spec`.
    pub fn new(ring: Producer<'m>, spec: RingSpec) -> Self {
        Self {
            ring,
            buf: vec![0; spec.slot_size() as usize],
        }
    }

    /// The underlying producer.
    pub fn ring(&mut self) -> &mut Producer<'m> {
        &mut self.ring
    }

    /// Queues a send request (published by [`publish`](Self::publish)).
    pub fn post_send(&mut self, wr: &SendWr) -> Result<(), PostError> {
        crate::desc::encode_send(wr, &mut self.buf).map_err(PostError::Encode)?;
        let used = size_of::<SendDesc>()
            + match &wr.data {
                SendData::Sges(s) => s.len() * size_of::<SgeDesc>(),
                SendData::Inline(d) => d.len().next_multiple_of(4),
            };
        self.ring
            .push(&self.buf[..used.min(self.buf.len())])
            .map_err(PostError::Ring)
    }

    /// Queues a receive request.
    pub fn post_recv(&mut self, wr: &RecvWr) -> Result<(), PostError> {
        crate::desc::encode_recv(wr, &mut self.buf).map_err(PostError::Encode)?;
        let used = size_of::<RecvDesc>() + wr.sges.len() * size_of::<SgeDesc>();
        self.ring
            .push(&self.buf[..used.min(self.buf.len())])
            .map_err(PostError::Ring)
    }

    /// Rings the doorbell; true when the daemon sleeps and the eventfd must be written.
    #[must_use = "when true the daemon sleeps until the eventfd is written"]
    pub fn publish(&mut self) -> bool {
        self.ring.publish()
    }
}
