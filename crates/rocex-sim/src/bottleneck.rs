//! A rate-limited output queue in front of a node, which marks ECN-capable packets CE
//! above a queue threshold and drops what does not fit: a switch port with ECN marking
//! (RED with one threshold, as DCQCN's evaluation configures its switches' `K_min` =
//! `K_max`), on virtual time.

use std::time::Duration;

use rocex_proto::{Ecn, Instant};

/// A bottleneck's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bottleneck {
    /// Rate the queue drains at, bits per second.
    pub rate: f64,
    /// An ECN-capable packet that finds more than this many bytes queued is marked CE.
    pub mark_above: usize,
    /// A packet that would take the queue past this many bytes is dropped.
    pub capacity: usize,
}

/// A bottleneck and its queue.
#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub(crate) config: Bottleneck,
    /// When the last packet queued has left.
    busy_until: Instant,
    /// Packets it marked CE.
    pub(crate) marked: u64,
    /// Packets it dropped.
    pub(crate) dropped: u64,
    /// The most bytes ever queued.
    pub(crate) max_queue: usize,
}

impl Port {
    pub(crate) fn new(config: Bottleneck) -> Self {
        Self {
            config,
            busy_until: Instant::ZERO,
            marked: 0,
            dropped: 0,
            max_queue: 0,
        }
    }

    /// Bytes queued at `now`.
    pub(crate) fn queued(&self, now: Instant) -> usize {
        (self.busy_until.since(now).as_secs_f64() * self.config.rate / 8.0) as usize
    }

    /// Queues a packet of `len` bytes arriving at `now` marked `ecn`. Returns when it has
    /// left and its ECN field then, or `None` when the queue drops it.
    pub(crate) fn enqueue(&mut self, now: Instant, len: usize, ecn: Ecn) -> Option<(Instant, Ecn)> {
        let rate = self.config.rate;
        let queued = self.queued(now);
        if queued + len > self.config.capacity {
            self.dropped += 1;
            return None;
        }
        self.max_queue = self.max_queue.max(queued + len);
        let ecn = if queued > self.config.mark_above && ecn.is_ect() {
            self.marked += 1;
            Ecn::Ce
        } else {
            ecn
        };
        let wire = Duration::from_secs_f64(len as f64 * 8.0 / rate);
        self.busy_until = self.busy_until.max(now) + wire;
        Some((self.busy_until, ecn))
    }
}

/// What a bottleneck did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BottleneckStats {
    /// Packets marked CE.
    pub marked: u64,
    /// Packets dropped for want of room.
    pub dropped: u64,
    /// The most bytes ever queued.
    pub max_queue: usize,
    /// Bytes queued now.
    pub queued: usize,
}
