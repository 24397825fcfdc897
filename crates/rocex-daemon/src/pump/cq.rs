//! The daemon's side of a CQ: the shared ring it produces completions into.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use rocex_proto::Engine;
use rocex_proto::verbs::WorkCompletion;
use rocex_shm::layout::RING_ALIGN;
use rocex_shm::{CqWriter, EventFd, RegionHeader, Ring, RingKind, RingSpec, SharedRegion};
use zerocopy::IntoBytes;

use super::geometry::bad;

/// The daemon's side of one CQ: the ring it produces into.
#[derive(Debug)]
pub(crate) struct CqPump {
    map: SharedRegion,
    spec: RingSpec,
    tail: u32,
    /// The completion channel to signal when the client armed the CQ.
    pub(crate) channel: Option<Arc<EventFd>>,
    /// Completions the daemon made itself (refused descriptors), delivered first.
    pub(crate) pending: VecDeque<WorkCompletion>,
    /// The client's consumer index was impossible, or the ring overran.
    pub(crate) broken: bool,
}

/// Byte offset of the CQ ring in its memfd.
pub(crate) const CQ_RING_OFFSET: usize = RING_ALIGN;

impl CqPump {
    /// A CQ ring of `slots` entries.
    pub(crate) fn create(slots: u32, channel: Option<Arc<EventFd>>) -> io::Result<Self> {
        let spec = RingSpec::new(RingKind::Cq, slots, 64).map_err(|e| bad(&e.to_string()))?;
        let map = SharedRegion::create("rocex-cq", CQ_RING_OFFSET + spec.stride())?;
        let v = map.view();
        v.write(0, RegionHeader::new(map.len() as u64).as_bytes())
            .map_err(io::Error::other)?;
        let ring = v
            .sub(CQ_RING_OFFSET, spec.stride())
            .and_then(|s| Ring::new(s, spec))
            .map_err(io::Error::other)?;
        ring.init(0, 0).map_err(io::Error::other)?;
        Ok(Self {
            map,
            spec,
            tail: 0,
            channel,
            pending: VecDeque::new(),
            broken: false,
        })
    }

    /// The ring memfd.
    pub(crate) fn region(&self) -> &SharedRegion {
        &self.map
    }

    /// Slots in the ring.
    pub(crate) fn slots(&self) -> u32 {
        self.spec.slots()
    }

    /// Moves completions (the daemon's own, then the engine's CQ `cq`) into the ring as
    /// far as it has room, publishes them and signals the channel if the client armed it.
    pub(crate) fn fill(&mut self, engine: &mut Engine, cq: u32) -> bool {
        if self.broken {
            // Keep the engine's CQ from overflowing; the client sees nothing more.
            while engine.poll_cq(cq).is_some() {}
            self.pending.clear();
            return false;
        }
        if self.pending.is_empty() && engine.cq_len(cq) == 0 {
            return false;
        }
        let Some(ring) = self
            .map
            .view()
            .sub(CQ_RING_OFFSET, self.spec.stride())
            .ok()
            .and_then(|v| Ring::new(v, self.spec).ok())
        else {
            return false;
        };
        let mut p = ring.producer_at(self.tail);
        let free = match p.free() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(cq, "CQ ring broken: {e}");
                self.broken = true;
                return false;
            }
        };
        let mut w = CqWriter::new(p);
        let mut n = 0;
        while n < free {
            let Some(wc) = self.pending.pop_front().or_else(|| engine.poll_cq(cq)) else {
                break;
            };
            if w.push(&wc).is_err() {
                break;
            }
            n += 1;
        }
        self.tail = self.tail.wrapping_add(n);
        if w.publish()
            && let Some(ch) = &self.channel
        {
            let _ = ch.signal();
        }
        n > 0
    }
}
