//! Rings to engine and back: the daemon's side of each QP's SQ/RQ and each CQ.
//!
//! `rocex-shm`'s readers and writers borrow the mapping, so they cannot live next to it in
//! one struct; instead each pump keeps its own free-running index (private memory, the
//! only copy the daemon trusts) and builds a short-lived consumer or producer at that
//! index on every pass. Building one is a few bounds checks.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;

use rocex_proto::verbs::{
    AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion,
};
use rocex_proto::{Engine, Instant, VerbsError};
use rocex_shm::control::QpCreated;
use rocex_shm::desc::sge_capacity;
use rocex_shm::layout::RING_ALIGN;
use rocex_shm::{
    CqWriter, EventFd, ReadError, RegionHeader, Ring, RingKind, RingSpec, RqLimits, RqReader,
    SharedRegion, SleepCheck, SqLimits, SqReader,
};
use zerocopy::IntoBytes;

/// Counters of what the pumps refused.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PumpStats {
    /// Descriptors completed with an error status because they were malformed.
    pub(crate) bad_descriptors: u64,
    /// Rings whose indices were impossible (the queue went to error).
    pub(crate) broken_rings: u64,
    /// Work requests the engine refused (completed with an error status).
    pub(crate) refused: u64,
}

/// One send work request in this many is timed from its descriptor to the wire.
pub(crate) const WIRE_SAMPLE_EVERY: u32 = 64;

/// How long sampled send work requests took from the pass that read their descriptor to
/// the return of the send call that carried their first packet: a log-linear histogram
/// (8 buckets per power of two, so a quantile is within 1/16 of the value).
#[derive(Debug)]
pub(crate) struct WireLatency {
    buckets: Box<[u64; WIRE_BUCKETS]>,
    samples: u64,
}

/// Bucket count: up to 2^40 ns (18 minutes), the last bucket taking the rest.
const WIRE_BUCKETS: usize = 8 * 39;

impl Default for WireLatency {
    fn default() -> Self {
        Self {
            buckets: Box::new([0; WIRE_BUCKETS]),
            samples: 0,
        }
    }
}

impl WireLatency {
    pub(crate) fn record(&mut self, ns: u64) {
        self.buckets[bucket_of(ns).min(WIRE_BUCKETS - 1)] += 1;
        self.samples += 1;
    }

    pub(crate) fn samples(&self) -> u64 {
        self.samples
    }

    /// The `q` quantile (0..=1) in nanoseconds, the middle of its bucket; 0 with no samples.
    pub(crate) fn quantile_ns(&self, q: f64) -> u64 {
        if self.samples == 0 {
            return 0;
        }
        let rank = ((q * self.samples as f64).ceil() as u64).clamp(1, self.samples);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(i);
                return low + width / 2;
            }
        }
        u64::MAX
    }
}

/// Values below 8 have a bucket each; above, 8 buckets split each power of two.
fn bucket_of(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize;
    (e - 2) * 8 + ((ns >> (e - 3)) & 7) as usize
}

/// The lowest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    if i < 8 {
        return (i as u64, 1);
    }
    let (e, sub) = (i / 8 + 2, (i % 8) as u64);
    ((8 + sub) << (e - 3), 1 << (e - 3))
}

/// Largest SGE count a QP may ask for.
pub(crate) const MAX_SGE: u32 = 32;
/// Largest inline size a QP may ask for.
pub(crate) const MAX_INLINE: u32 = 1024;
/// Deepest queue.
pub(crate) const MAX_WR: u32 = 16384;

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

/// The SQ/RQ geometry for the caps asked: slots a power of two at least the depth, slots
/// big enough for the SGEs and inline data. Returns the caps granted.
pub(crate) fn qp_geometry(cap: &QpCap) -> io::Result<(RingSpec, RingSpec, QpCap)> {
    if cap.max_send_wr == 0
        || cap.max_send_wr > MAX_WR
        || cap.max_recv_wr == 0
        || cap.max_recv_wr > MAX_WR
    {
        return Err(bad("queue depth must be 1..=16384"));
    }
    if cap.max_send_sge > MAX_SGE || cap.max_recv_sge > MAX_SGE {
        return Err(bad("at most 32 SGEs per work request"));
    }
    if cap.max_inline_data > MAX_INLINE {
        return Err(bad("at most 1024 inline bytes"));
    }
    let sq_payload = (cap.max_send_sge.max(1) * 16).max(cap.max_inline_data.next_multiple_of(4));
    let sq_slot = (128 + sq_payload).next_power_of_two().max(256);
    let rq_slot = (16 + cap.max_recv_sge.max(1) * 16).next_power_of_two();
    let sq = RingSpec::new(RingKind::Sq, cap.max_send_wr.next_power_of_two(), sq_slot)
        .map_err(|e| bad(&e.to_string()))?;
    let rq = RingSpec::new(RingKind::Rq, cap.max_recv_wr.next_power_of_two(), rq_slot)
        .map_err(|e| bad(&e.to_string()))?;
    let granted = QpCap {
        max_send_wr: sq.slots(),
        max_recv_wr: rq.slots(),
        max_send_sge: cap.max_send_sge.max(1).min(sge_capacity(sq_slot, 128)),
        max_recv_sge: cap.max_recv_sge.max(1).min(sge_capacity(rq_slot, 16)),
        max_inline_data: cap.max_inline_data,
    };
    Ok((sq, rq, granted))
}

/// The ring of geometry `spec` at `off` of `map`, or `None` if it does not fit.
fn ring_at(map: &SharedRegion, off: usize, spec: RingSpec) -> Option<Ring<'_>> {
    let v = map.view().sub(off, spec.stride()).ok()?;
    Ring::new(v, spec).ok()
}

/// The daemon's side of one QP: its ring memfd, doorbell and private indices.
#[derive(Debug)]
pub(crate) struct QpPump {
    pub(crate) qpn: u32,
    map: SharedRegion,
    sq: RingSpec,
    sq_off: usize,
    rq: RingSpec,
    rq_off: usize,
    sq_head: u32,
    rq_head: u32,
    sq_limits: SqLimits,
    rq_limits: RqLimits,
    /// The doorbell the client writes when the daemon sleeps.
    pub(crate) doorbell: EventFd,
    /// A request the engine could not take yet (queue full, QP not ready): retried before
    /// anything else is read, which is what holds back the ring (back-pressure).
    stash_send: Option<SendWr>,
    stash_recv: Option<RecvWr>,
    /// The rings' indices were impossible: nothing more is read from them.
    pub(crate) broken: bool,
    /// The send CQ (engine id = client handle).
    pub(crate) send_cq: u32,
    /// The receive CQ.
    pub(crate) recv_cq: u32,
}

impl QpPump {
    /// Creates the ring memfd of a new QP; returns the pump and the response to send.
    pub(crate) fn create(
        qpn: u32,
        qp_type: QpType,
        sq: RingSpec,
        rq: RingSpec,
        cap: QpCap,
        cqs: (u32, u32),
    ) -> io::Result<(Self, QpCreated)> {
        let sq_off = RING_ALIGN;
        let rq_off = sq_off + sq.stride();
        let len = rq_off + rq.stride();
        let map = SharedRegion::create("rocex-qp", len)?;
        let v = map.view();
        v.write(0, RegionHeader::new(map.len() as u64).as_bytes())
            .map_err(io::Error::other)?;
        for (off, spec, sge, inline) in [
            (sq_off, sq, cap.max_send_sge, cap.max_inline_data),
            (rq_off, rq, cap.max_recv_sge, 0),
        ] {
            let ring = v
                .sub(off, spec.stride())
                .and_then(|s| Ring::new(s, spec))
                .map_err(io::Error::other)?;
            ring.init(sge, inline).map_err(io::Error::other)?;
        }
        let created = QpCreated {
            qpn,
            cap,
            sq_offset: sq_off as u64,
            sq_slots: sq.slots(),
            sq_slot_size: sq.slot_size(),
            rq_offset: rq_off as u64,
            rq_slots: rq.slots(),
            rq_slot_size: rq.slot_size(),
        };
        Ok((
            Self {
                qpn,
                map,
                sq,
                sq_off,
                rq,
                rq_off,
                sq_head: 0,
                rq_head: 0,
                sq_limits: SqLimits {
                    qp_type,
                    max_sge: cap.max_send_sge,
                    max_inline: cap.max_inline_data,
                },
                rq_limits: RqLimits {
                    max_sge: cap.max_recv_sge,
                },
                doorbell: EventFd::new()?,
                stash_send: None,
                stash_recv: None,
                broken: false,
                send_cq: cqs.0,
                recv_cq: cqs.1,
            },
            created,
        ))
    }

    /// The ring memfd, to pass to the client.
    pub(crate) fn region(&self) -> &SharedRegion {
        &self.map
    }

    /// Moves new descriptors from the SQ and RQ into the engine. Malformed ones complete
    /// with their error status on the QP's CQ and the QP goes to error. Returns whether
    /// anything moved.
    pub(crate) fn drain(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
    ) -> bool {
        if self.broken {
            return false;
        }
        let mut busy = false;
        // Receive first, so a SEND that races in finds its buffer.
        if let Some(wr) = self.stash_recv.take() {
            match engine.post_recv(now, self.qpn, wr.clone()) {
                Ok(()) => busy = true,
                Err(VerbsError::QueueFull | VerbsError::InvalidState(_)) => {
                    self.stash_recv = Some(wr)
                }
                Err(e) => self.refuse(engine, cqs, stats, wr.wr_id, false, &e),
            }
        }
        if self.stash_recv.is_none() {
            busy |= self.drain_rq(engine, now, cqs, stats);
        }
        if let Some(wr) = self.stash_send.take() {
            let id = wr.wr_id;
            match engine.post_send(now, self.qpn, wr.clone()) {
                Ok(()) => busy = true,
                Err(VerbsError::QueueFull | VerbsError::InvalidState(_)) => {
                    self.stash_send = Some(wr)
                }
                Err(e) => self.refuse(engine, cqs, stats, id, true, &e),
            }
        }
        if self.stash_send.is_none() {
            busy |= self.drain_sq(engine, now, cqs, stats);
        }
        busy
    }

    fn drain_rq(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
    ) -> bool {
        let Some(ring) = ring_at(&self.map, self.rq_off, self.rq) else {
            return false;
        };
        let mut reader = RqReader::new(ring.consumer_at(self.rq_head), self.rq_limits);
        let mut n = 0u32;
        let mut errors = Vec::new();
        let mut broken = false;
        loop {
            match reader.read_recv() {
                Ok(None) => break,
                Ok(Some(wr)) => {
                    n += 1;
                    match engine.post_recv(now, self.qpn, wr.clone()) {
                        Ok(()) => {}
                        Err(VerbsError::QueueFull | VerbsError::InvalidState(_)) => {
                            self.stash_recv = Some(wr);
                            break;
                        }
                        Err(e) => errors.push((wr.wr_id, WcStatus::LocQpOpErr, e.to_string())),
                    }
                }
                Err(ReadError::Desc { wr_id, error }) => {
                    n += 1;
                    stats.bad_descriptors += 1;
                    errors.push((wr_id, error.wc_status(), error.to_string()));
                }
                Err(ReadError::Ring(e)) => {
                    tracing::warn!(qpn = self.qpn, "RQ ring broken: {e}");
                    broken = true;
                    break;
                }
            }
        }
        reader.ring().release();
        self.rq_head = self.rq_head.wrapping_add(n);
        self.fail_all(engine, cqs, stats, errors, false, broken);
        n > 0
    }

    fn drain_sq(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
    ) -> bool {
        let Some(ring) = ring_at(&self.map, self.sq_off, self.sq) else {
            return false;
        };
        let mut reader = SqReader::new(ring.consumer_at(self.sq_head), self.sq_limits);
        let mut n = 0u32;
        let mut errors = Vec::new();
        let mut broken = false;
        loop {
            match reader.read_send() {
                Ok(None) => break,
                Ok(Some(wr)) => {
                    n += 1;
                    let id = wr.wr_id;
                    match engine.post_send(now, self.qpn, wr.clone()) {
                        Ok(()) => {}
                        Err(VerbsError::QueueFull | VerbsError::InvalidState(_)) => {
                            self.stash_send = Some(wr);
                            break;
                        }
                        Err(e) => {
                            let status = match e {
                                VerbsError::MessageTooLong => WcStatus::LocLenErr,
                                _ => WcStatus::LocQpOpErr,
                            };
                            errors.push((id, status, e.to_string()));
                        }
                    }
                }
                Err(ReadError::Desc { wr_id, error }) => {
                    n += 1;
                    stats.bad_descriptors += 1;
                    errors.push((wr_id, error.wc_status(), error.to_string()));
                }
                Err(ReadError::Ring(e)) => {
                    tracing::warn!(qpn = self.qpn, "SQ ring broken: {e}");
                    broken = true;
                    break;
                }
            }
        }
        reader.ring().release();
        self.sq_head = self.sq_head.wrapping_add(n);
        self.fail_all(engine, cqs, stats, errors, true, broken);
        n > 0
    }

    /// Completes refused requests with their status and moves the QP to error.
    fn fail_all(
        &mut self,
        engine: &mut Engine,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
        errors: Vec<(u64, WcStatus, String)>,
        send: bool,
        broken: bool,
    ) {
        if broken {
            stats.broken_rings += 1;
            self.broken = true;
        }
        let fail = broken || !errors.is_empty();
        let cq = if send { self.send_cq } else { self.recv_cq };
        for (wr_id, status, why) in errors {
            tracing::debug!(
                qpn = self.qpn,
                wr_id,
                ?status,
                "work request refused: {why}"
            );
            if let Some(c) = cqs.get_mut(&cq) {
                c.pending.push_back(WorkCompletion {
                    wr_id,
                    status,
                    opcode: if send { WcOpcode::Send } else { WcOpcode::Recv },
                    byte_len: 0,
                    imm_data: None,
                    invalidated_rkey: None,
                    qp_num: self.qpn,
                    src_qp: 0,
                });
            }
        }
        if fail {
            to_error(engine, self.qpn);
        }
    }

    fn refuse(
        &mut self,
        engine: &mut Engine,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
        wr_id: u64,
        send: bool,
        e: &VerbsError,
    ) {
        stats.refused += 1;
        let status = match e {
            VerbsError::MessageTooLong => WcStatus::LocLenErr,
            _ => WcStatus::LocQpOpErr,
        };
        self.fail_all(
            engine,
            cqs,
            stats,
            vec![(wr_id, status, e.to_string())],
            send,
            false,
        );
    }

    /// Arms both rings' doorbells before the daemon sleeps; true when work raced in (do
    /// not sleep).
    pub(crate) fn arm(&mut self) -> bool {
        if self.broken {
            return false;
        }
        let mut ready = false;
        for (off, spec, head) in [
            (self.sq_off, self.sq, self.sq_head),
            (self.rq_off, self.rq, self.rq_head),
        ] {
            if let Some(r) = ring_at(&self.map, off, spec) {
                match r.consumer_at(head).prepare_sleep(1) {
                    Ok(SleepCheck::Sleep) => {}
                    Ok(SleepCheck::Ready(_)) | Err(_) => ready = true,
                }
            }
        }
        ready
    }

    /// True while a request waits for the engine (QP not yet ready to send, or its queue
    /// full): the daemon then sleeps only briefly, since no doorbell announces the change.
    pub(crate) fn stalled(&self) -> bool {
        self.stash_send.is_some() || self.stash_recv.is_some()
    }

    /// Disarms after the sleep.
    pub(crate) fn disarm(&mut self) {
        let _ = self.doorbell.drain();
        for (off, spec, head) in [
            (self.sq_off, self.sq, self.sq_head),
            (self.rq_off, self.rq, self.rq_head),
        ] {
            if let Some(r) = ring_at(&self.map, off, spec) {
                r.consumer_at(head).finish_sleep();
            }
        }
    }
}

/// Moves a QP to the error state (its outstanding requests complete with flush errors).
pub(crate) fn to_error(engine: &mut Engine, qpn: u32) {
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    if let Err(e) = engine.modify_qp(qpn, &attr, AttrMask::STATE) {
        tracing::debug!(qpn, "cannot move QP to error: {e}");
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_bucket_that_holds_it() {
        for ns in (0..5000).chain([1 << 20, (1 << 20) + 12345, 999_999_999, 1 << 39]) {
            let (low, width) = bucket_range(bucket_of(ns));
            assert!(low <= ns && ns < low + width, "{ns} in {low}+{width}");
            assert!(width <= low.max(1) / 8 + 1, "{ns}: bucket {width} wide");
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_values() {
        let mut h = WireLatency::default();
        assert_eq!(h.quantile_ns(0.5), 0, "no samples");
        for ns in 1..=100u64 {
            h.record(ns * 100);
        }
        h.record(u64::MAX);
        assert_eq!(h.samples(), 101);
        let p50 = h.quantile_ns(0.5);
        assert!((4800..=5400).contains(&p50), "p50 {p50}");
        let p99 = h.quantile_ns(0.99);
        assert!((9400..=10600).contains(&p99), "p99 {p99}");
        assert!(
            h.quantile_ns(1.0) > 1 << 39,
            "the largest lands in the last bucket"
        );
    }

    #[test]
    fn geometry_grants_at_least_what_was_asked() {
        let cap = QpCap {
            max_send_wr: 100,
            max_recv_wr: 3,
            max_send_sge: 4,
            max_recv_sge: 2,
            max_inline_data: 200,
        };
        let (sq, rq, g) = qp_geometry(&cap).unwrap();
        assert_eq!((sq.slots(), rq.slots()), (128, 4));
        assert_eq!(sq.slot_size(), 512);
        assert_eq!(rq.slot_size(), 64);
        assert!(g.max_send_sge >= 4 && g.max_recv_sge >= 2 && g.max_inline_data == 200);
        assert!(
            qp_geometry(&QpCap {
                max_send_wr: 0,
                ..cap
            })
            .is_err()
        );
        assert!(
            qp_geometry(&QpCap {
                max_inline_data: 5000,
                ..cap
            })
            .is_err()
        );
        assert!(
            qp_geometry(&QpCap {
                max_recv_sge: 99,
                ..cap
            })
            .is_err()
        );
    }
}
