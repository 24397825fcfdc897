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
    Consumer, CqWriter, EventFd, ReadError, RegionHeader, Ring, RingKind, RingSpec, RqLimits,
    RqReader, SharedRegion, SleepCheck, SqLimits, SqReader,
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
/// a point of the send call that carried their first packet: a log-linear histogram
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
    sq: WorkQueue<SendWr>,
    rq: WorkQueue<RecvWr>,
    /// The doorbell the client writes when the daemon sleeps.
    pub(crate) doorbell: EventFd,
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
                sq: WorkQueue::new(
                    sq_off,
                    sq,
                    SqLimits {
                        qp_type,
                        max_sge: cap.max_send_sge,
                        max_inline: cap.max_inline_data,
                    },
                ),
                rq: WorkQueue::new(
                    rq_off,
                    rq,
                    RqLimits {
                        max_sge: cap.max_recv_sge,
                    },
                ),
                doorbell: EventFd::new()?,
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
        // Receive first, so a SEND that races in finds its buffer.
        let busy = self.drain_queue::<RecvWr>(engine, now, cqs, stats);
        self.drain_queue::<SendWr>(engine, now, cqs, stats) | busy
    }

    /// Retries the request the engine could not take, then, once it is in, moves new
    /// descriptors from the queue's ring into the engine.
    fn drain_queue<W: Pumped>(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
    ) -> bool {
        let qpn = self.qpn;
        let mut busy = false;
        let (_, queue) = W::queue(self);
        if let Some(wr) = queue.stash.take() {
            match wr.post(engine, now, qpn) {
                Ok(()) => busy = true,
                Err((wr, e)) if must_wait(&e) => queue.stash = Some(wr),
                Err((wr, e)) => {
                    stats.refused += 1;
                    let refused = vec![refusal(wr.wr_id(), &e)];
                    self.fail_all(engine, cqs, stats, refused, W::SEND, false);
                }
            }
        }
        let (map, queue) = W::queue(self);
        if queue.stash.is_some() {
            return busy;
        }
        let pass = queue.drain_ring(map, engine, now, qpn, stats);
        self.fail_all(engine, cqs, stats, pass.refused, W::SEND, pass.broken);
        busy | (pass.consumed > 0)
    }

    /// Completes refused requests with their status and moves the QP to error.
    fn fail_all(
        &mut self,
        engine: &mut Engine,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
        errors: Vec<Refusal>,
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

    /// Arms both rings' doorbells before the daemon sleeps; true when work raced in (do
    /// not sleep).
    pub(crate) fn arm(&mut self) -> bool {
        if self.broken {
            return false;
        }
        let mut ready = false;
        for (off, spec, head) in [self.sq.ring(), self.rq.ring()] {
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
        self.sq.stash.is_some() || self.rq.stash.is_some()
    }

    /// Disarms after the sleep.
    pub(crate) fn disarm(&mut self) {
        let _ = self.doorbell.drain();
        for (off, spec, head) in [self.sq.ring(), self.rq.ring()] {
            if let Some(r) = ring_at(&self.map, off, spec) {
                r.consumer_at(head).finish_sleep();
            }
        }
    }
}

/// A request refused for good: its `wr_id`, the status it completes with, and why.
type Refusal = (u64, WcStatus, String);

/// True when the engine refused a request only for now (its queue full, the QP not ready
/// yet): the request waits in the stash instead of failing.
fn must_wait(e: &VerbsError) -> bool {
    matches!(e, VerbsError::QueueFull | VerbsError::InvalidState(_))
}

/// The completion of a request the engine refused for good.
fn refusal(wr_id: u64, e: &VerbsError) -> Refusal {
    let status = match e {
        VerbsError::MessageTooLong => WcStatus::LocLenErr,
        _ => WcStatus::LocQpOpErr,
    };
    (wr_id, status, e.to_string())
}

/// The daemon's side of one work queue (SQ or RQ) of a QP.
#[derive(Debug)]
struct WorkQueue<W: Pumped> {
    /// Where the ring lies in the QP's memfd.
    off: usize,
    spec: RingSpec,
    /// The next descriptor to read (private: the only index the daemon trusts).
    head: u32,
    limits: W::Limits,
    /// A request the engine could not take yet (queue full, QP not ready): retried before
    /// anything else is read, which is what holds back the ring (back-pressure).
    stash: Option<W>,
}

/// What one pass over a ring did.
#[derive(Default)]
struct Pass {
    /// Descriptors taken off the ring (posted, stashed or refused).
    consumed: u32,
    /// Requests to complete with an error status.
    refused: Vec<Refusal>,
    /// The ring's indices were impossible.
    broken: bool,
}

impl<W: Pumped> WorkQueue<W> {
    fn new(off: usize, spec: RingSpec, limits: W::Limits) -> Self {
        Self {
            off,
            spec,
            head: 0,
            limits,
            stash: None,
        }
    }

    /// The ring's offset, geometry and the daemon's index in it.
    fn ring(&self) -> (usize, RingSpec, u32) {
        (self.off, self.spec, self.head)
    }

    /// Posts descriptors from the ring in `map` until it is empty, broken, or the engine
    /// cannot take one yet (which then waits in the stash), and releases what was read.
    fn drain_ring(
        &mut self,
        map: &SharedRegion,
        engine: &mut Engine,
        now: Instant,
        qpn: u32,
        stats: &mut PumpStats,
    ) -> Pass {
        let mut pass = Pass::default();
        let Some(ring) = ring_at(map, self.off, self.spec) else {
            return pass;
        };
        let mut consumer = ring.consumer_at(self.head);
        // Nearly every pass finds the ring empty: that costs no reader (and its buffer).
        if matches!(consumer.available(), Ok(0)) {
            return pass;
        }
        let mut reader = W::reader(consumer, self.limits);
        loop {
            match W::next(&mut reader) {
                Ok(None) => break,
                Ok(Some(wr)) => {
                    pass.consumed += 1;
                    match wr.post(engine, now, qpn) {
                        Ok(()) => {}
                        Err((wr, e)) if must_wait(&e) => {
                            self.stash = Some(wr);
                            break;
                        }
                        Err((wr, e)) => {
                            stats.refused += 1;
                            pass.refused.push(refusal(wr.wr_id(), &e));
                        }
                    }
                }
                Err(ReadError::Desc { wr_id, error }) => {
                    pass.consumed += 1;
                    stats.bad_descriptors += 1;
                    pass.refused
                        .push((wr_id, error.wc_status(), error.to_string()));
                }
                Err(ReadError::Ring(e)) => {
                    tracing::warn!(qpn, "{} ring broken: {e}", W::QUEUE);
                    pass.broken = true;
                    break;
                }
            }
        }
        W::release(&mut reader);
        self.head = self.head.wrapping_add(pass.consumed);
        pass
    }
}

/// A work request as the pump moves it: which queue of the QP it comes from, how its
/// ring is read, and how the engine takes it.
trait Pumped: Sized + std::fmt::Debug {
    /// The QP's limits its descriptors are checked against.
    type Limits: Copy + std::fmt::Debug;
    /// The validating reader of its ring.
    type Reader<'m>;
    /// The queue's name, for logs.
    const QUEUE: &'static str;
    /// True for sends: refusals complete on the send CQ.
    const SEND: bool;

    /// The queue of `pump` and the memory its ring lies in.
    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>);
    fn reader(ring: Consumer<'_>, limits: Self::Limits) -> Self::Reader<'_>;
    /// The next request on the ring, validated; `Ok(None)` when the ring is empty.
    fn next(reader: &mut Self::Reader<'_>) -> Result<Option<Self>, ReadError>;
    /// Hands what `reader` read back to the client.
    fn release(reader: &mut Self::Reader<'_>);
    fn wr_id(&self) -> u64;
    /// Hands the request to the engine; a refused one comes back with the reason.
    fn post(self, engine: &mut Engine, now: Instant, qpn: u32) -> Result<(), (Self, VerbsError)>;
}

impl Pumped for SendWr {
    type Limits = SqLimits;
    type Reader<'m> = SqReader<'m>;
    const QUEUE: &'static str = "SQ";
    const SEND: bool = true;

    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>) {
        (&pump.map, &mut pump.sq)
    }
    fn reader(ring: Consumer<'_>, limits: SqLimits) -> SqReader<'_> {
        SqReader::new(ring, limits)
    }
    fn next(reader: &mut SqReader<'_>) -> Result<Option<Self>, ReadError> {
        reader.read_send()
    }
    fn release(reader: &mut SqReader<'_>) {
        reader.ring().release();
    }
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    fn post(self, engine: &mut Engine, now: Instant, qpn: u32) -> Result<(), (Self, VerbsError)> {
        engine.try_post_send(now, qpn, self)
    }
}

impl Pumped for RecvWr {
    type Limits = RqLimits;
    type Reader<'m> = RqReader<'m>;
    const QUEUE: &'static str = "RQ";
    const SEND: bool = false;

    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>) {
        (&pump.map, &mut pump.rq)
    }
    fn reader(ring: Consumer<'_>, limits: RqLimits) -> RqReader<'_> {
        RqReader::new(ring, limits)
    }
    fn next(reader: &mut RqReader<'_>) -> Result<Option<Self>, ReadError> {
        reader.read_recv()
    }
    fn release(reader: &mut RqReader<'_>) {
        reader.ring().release();
    }
    fn wr_id(&self) -> u64 {
        self.wr_id
    }
    fn post(self, engine: &mut Engine, now: Instant, qpn: u32) -> Result<(), (Self, VerbsError)> {
        engine.try_post_recv(now, qpn, self)
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
