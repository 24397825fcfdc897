//! Rings to engine and back: the daemon's side of each QP's SQ/RQ (here) and each CQ
//! (`cq.rs`), and the rings' geometry (`geometry.rs`).
//!
//! `rocex-shm`'s readers and writers borrow the mapping, so they cannot live next to it in
//! one struct; instead each pump keeps its own free-running index (private memory, the
//! only copy the daemon trusts) and builds a short-lived consumer or producer at that
//! index on every pass. Building one is a few bounds checks.
//!
//! A posted request has one owner at a time: the ring until the engine has room for it
//! ([`Engine::send_room`]), then the engine. The pump reads no more descriptors than the
//! engine takes, so the rest wait in the client's ring (back-pressure) and nothing is
//! held between the two.

use std::collections::HashMap;

use rocex_proto::verbs::{
    AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion,
};
use rocex_proto::{Engine, Instant, VerbsError};
use rocex_shm::control::QpCreated;
use rocex_shm::layout::RING_ALIGN;
use rocex_shm::{
    EventFd, QueueLimits, QueueReader, ReadError, RegionHeader, Ring, RingSpec, RqLimits, RqReader,
    SharedRegion, SleepCheck, SqLimits, SqReader,
};
use zerocopy::IntoBytes;

mod cq;
mod geometry;

pub(crate) use cq::{CQ_RING_OFFSET, CqPump};
pub(crate) use geometry::{MAX_INLINE, MAX_SGE, MAX_WR, qp_geometry};

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
    ) -> std::io::Result<(Self, QpCreated)> {
        let sq_off = RING_ALIGN;
        let rq_off = sq_off + sq.stride();
        let len = rq_off + rq.stride();
        let map = SharedRegion::create("rocex-qp", len)?;
        let v = map.view();
        v.write(0, RegionHeader::new(map.len() as u64).as_bytes())
            .map_err(std::io::Error::other)?;
        for (off, spec, sge, inline) in [
            (sq_off, sq, cap.max_send_sge, cap.max_inline_data),
            (rq_off, rq, cap.max_recv_sge, 0),
        ] {
            let ring = v
                .sub(off, spec.stride())
                .and_then(|s| Ring::new(s, spec))
                .map_err(std::io::Error::other)?;
            ring.init(sge, inline).map_err(std::io::Error::other)?;
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

    /// Moves new descriptors from the queue's ring into the engine, as many as it has
    /// room for.
    fn drain_queue<W: Pumped>(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        cqs: &mut HashMap<u32, CqPump>,
        stats: &mut PumpStats,
    ) -> bool {
        let qpn = self.qpn;
        let room = W::room(engine, qpn);
        let (map, queue) = W::queue(self);
        let pass = queue.drain_ring(map, engine, now, qpn, room, stats);
        self.fail_all(engine, cqs, stats, pass.refused, W::SEND, pass.broken);
        pass.consumed > 0
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

    /// Tells the client, in its SQ ring's header, how many request messages the QP's
    /// responder has completed: after a request packet that ended a message, so that a
    /// client waiting for its peer's WRITE sees it land without a system call.
    pub(crate) fn publish_msn(&self, engine: &Engine) {
        let (Ok(st), Some(r)) = (
            engine.qp_status(self.qpn),
            ring_at(&self.map, self.sq.off, self.sq.spec),
        ) else {
            return;
        };
        let _ = r.publish_responder_msn(st.msn);
    }

    /// Arms the doorbells of both rings before the daemon sleeps; true when work raced in
    /// (do not sleep). A ring whose descriptors wait for room in the engine is not armed:
    /// what frees the room is the engine's, which no doorbell announces ([`Self::stalled`]).
    pub(crate) fn arm(&mut self) -> bool {
        if self.broken {
            return false;
        }
        let mut ready = false;
        for (off, spec, head) in [self.sq.ring(), self.rq.ring()]
            .into_iter()
            .zip([self.sq.blocked, self.rq.blocked])
            .filter_map(|(r, blocked)| (!blocked).then_some(r))
        {
            if let Some(r) = ring_at(&self.map, off, spec) {
                match r.consumer_at(head).prepare_sleep(1) {
                    Ok(SleepCheck::Sleep) => {}
                    Ok(SleepCheck::Ready(_)) | Err(_) => ready = true,
                }
            }
        }
        ready
    }

    /// True while descriptors wait in a ring for the engine (QP not yet ready to send, or
    /// its queue full): the daemon then sleeps only briefly, since no doorbell announces
    /// the change.
    pub(crate) fn stalled(&self) -> bool {
        self.sq.blocked || self.rq.blocked
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
    /// Descriptors wait in the ring because the engine had no room for them.
    blocked: bool,
}

/// What one pass over a ring did.
#[derive(Default)]
struct Pass {
    /// Descriptors taken off the ring (posted or refused).
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
            blocked: false,
        }
    }

    /// The ring's offset, geometry and the daemon's index in it.
    fn ring(&self) -> (usize, RingSpec, u32) {
        (self.off, self.spec, self.head)
    }

    /// Posts descriptors from the ring in `map` until it is empty, broken, or `room` (what
    /// the engine takes now) are taken, and releases what was read.
    fn drain_ring(
        &mut self,
        map: &SharedRegion,
        engine: &mut Engine,
        now: Instant,
        qpn: u32,
        room: usize,
        stats: &mut PumpStats,
    ) -> Pass {
        let mut pass = Pass::default();
        let Some(ring) = ring_at(map, self.off, self.spec) else {
            return pass;
        };
        let mut consumer = ring.consumer_at(self.head);
        // Nearly every pass finds the ring empty: that costs no reader (and its buffer).
        // An impossible index reads on, for the reader to report.
        let ready = consumer.available().unwrap_or(u32::MAX);
        self.blocked = ready > 0 && room == 0;
        if ready == 0 || room == 0 {
            return pass;
        }
        let take = (ready as usize).min(room);
        let mut reader = QueueReader::new(consumer, self.limits);
        while (pass.consumed as usize) < take {
            match W::next(&mut reader) {
                Ok(None) => break,
                Ok(Some(wr)) => {
                    pass.consumed += 1;
                    match wr.post(engine, now, qpn) {
                        Ok(()) => {}
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
        reader.ring().release();
        self.head = self.head.wrapping_add(pass.consumed);
        self.blocked = !pass.broken && (ready as usize) > take;
        pass
    }
}

/// A work request as the pump moves it: which queue of the QP it comes from, how its
/// ring is read, and how the engine takes it.
trait Pumped: Sized + std::fmt::Debug {
    /// The QP's limits its descriptors are checked against.
    type Limits: QueueLimits + std::fmt::Debug;
    /// The queue's name, for logs.
    const QUEUE: &'static str;
    /// True for sends: refusals complete on the send CQ.
    const SEND: bool;

    /// The queue of `pump` and the memory its ring lies in.
    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>);
    /// How many the engine's queue of `qpn` takes now.
    fn room(engine: &Engine, qpn: u32) -> usize;
    /// The next request on the ring, validated; `Ok(None)` when the ring is empty.
    fn next(reader: &mut QueueReader<'_, Self::Limits>) -> Result<Option<Self>, ReadError>;
    fn wr_id(&self) -> u64;
    /// Hands the request to the engine; a refused one comes back with the reason.
    fn post(self, engine: &mut Engine, now: Instant, qpn: u32) -> Result<(), (Self, VerbsError)>;
}

impl Pumped for SendWr {
    type Limits = SqLimits;
    const QUEUE: &'static str = "SQ";
    const SEND: bool = true;

    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>) {
        (&pump.map, &mut pump.sq)
    }
    fn room(engine: &Engine, qpn: u32) -> usize {
        engine.send_room(qpn)
    }
    fn next(reader: &mut SqReader<'_>) -> Result<Option<Self>, ReadError> {
        reader.read_send()
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
    const QUEUE: &'static str = "RQ";
    const SEND: bool = false;

    fn queue(pump: &mut QpPump) -> (&SharedRegion, &mut WorkQueue<Self>) {
        (&pump.map, &mut pump.rq)
    }
    fn room(engine: &Engine, qpn: u32) -> usize {
        engine.recv_room(qpn)
    }
    fn next(reader: &mut RqReader<'_>) -> Result<Option<Self>, ReadError> {
        reader.read_recv()
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
