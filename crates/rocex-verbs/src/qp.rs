//! Queue pairs: created in a PD, their send and receive rings written by this process, and
//! a doorbell to wake the daemon; or, on a direct context, posted straight into the
//! engine, which sends at once in the caller's thread.

use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rocex_shm::control::{QpCreated, Request, Response};
use rocex_shm::layout::RING_ALIGN;
use rocex_shm::{EventFd, PostError, RingKind, RingSpec, SharedRegion, WqWriter};
use rocex_verbs_types::{AttrMask, QpAttr, QpCap, QpType, RecvWr, SendWr};

use crate::answer::MsnWord;
use crate::direct::Host;
use crate::{Context, Cq, Dev, Error, Pd, Result, map_rings, proto, ring_in};

/// How a QP is created (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy)]
pub struct QpInitAttr<'a> {
    /// Transport.
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: &'a Cq,
    /// CQ for receive completions.
    pub recv_cq: &'a Cq,
    /// Queue sizes wanted; the QP may get more ([`Qp::cap`]).
    pub cap: QpCap,
}

impl Pd {
    /// Creates a queue pair in RESET.
    pub fn create_qp(&self, init: &QpInitAttr<'_>) -> Result<Qp> {
        let ch = match &self.ctx.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) => {
                let (qpn, cap) = h.create_qp(rocex_proto::QpInit {
                    qp_type: init.qp_type,
                    pd: rocex_proto::PdId::from_raw(self.pd),
                    send_cq: init.send_cq.handle(),
                    recv_cq: init.recv_cq.handle(),
                    cap: init.cap,
                })?;
                return Ok(Qp {
                    ctx: self.ctx.clone(),
                    qpn,
                    cap,
                    queues: Queues::Local(h.clone()),
                });
            }
        };
        let (r, mut fds) = ch.call(
            &Request::CreateQp {
                pd: self.pd,
                qp_type: init.qp_type,
                send_cq: init.send_cq.handle(),
                recv_cq: init.recv_cq.handle(),
                cap: init.cap,
            },
            &[],
        )?;
        let (Response::CreateQp(c), Some(db), Some(fd)) = (r, fds.pop(), fds.pop()) else {
            return Err(proto("bad CreateQp response"));
        };
        Qp::new(self.ctx.clone(), c, fd, db)
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct Qp {
    ctx: Context,
    qpn: u32,
    cap: QpCap,
    queues: Queues,
}

/// Where posted work requests go.
#[derive(Debug)]
enum Queues {
    /// Into the rings rocexd reads.
    Rings(Rings),
    /// Into the engine of a direct context.
    Local(Rc<Host>),
}

/// A QP's SQ and RQ rings in the memfd rocexd made, and its doorbell.
#[derive(Debug)]
struct Rings {
    map: Arc<SharedRegion>,
    /// Where rocexd says how many of the peer's requests have landed.
    msn: MsnWord,
    sq: RingSpec,
    sq_off: usize,
    sq_tail: u32,
    rq: RingSpec,
    rq_off: usize,
    rq_tail: u32,
    doorbell: EventFd,
}

impl Qp {
    fn new(ctx: Context, c: QpCreated, fd: OwnedFd, db: OwnedFd) -> Result<Self> {
        let map = map_rings(fd)?;
        let sq = RingSpec::new(RingKind::Sq, c.sq_slots, c.sq_slot_size)
            .map_err(|e| proto(e.to_string()))?;
        let rq = RingSpec::new(RingKind::Rq, c.rq_slots, c.rq_slot_size)
            .map_err(|e| proto(e.to_string()))?;
        let sq_off = usize::try_from(c.sq_offset).map_err(|_| proto("sq offset"))?;
        let rq_off = usize::try_from(c.rq_offset).map_err(|_| proto("rq offset"))?;
        if sq_off % RING_ALIGN != 0 || rq_off % RING_ALIGN != 0 {
            return Err(proto("misaligned ring"));
        }
        ring_in(&map, sq_off, sq)?;
        ring_in(&map, rq_off, rq)?;
        let map = Arc::new(map);
        let rings = Rings {
            msn: MsnWord::new(map.clone(), sq_off),
            map,
            sq,
            sq_off,
            sq_tail: 0,
            rq,
            rq_off,
            rq_tail: 0,
            doorbell: EventFd::from_fd(db),
        };
        Ok(Self {
            ctx,
            qpn: c.qpn,
            cap: c.cap,
            queues: Queues::Rings(rings),
        })
    }

    /// The QP number (give it to the peer).
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The capabilities granted.
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr, mask: AttrMask) -> Result<()> {
        match &self.ctx.dev {
            Dev::Daemon(ch) => ch.done(&Request::ModifyQp {
                qpn: self.qpn,
                mask,
                attr: *attr,
            }),
            Dev::Direct(h) => h.modify_qp(self.qpn, attr, mask),
        }
    }

    /// `ibv_query_qp`: attributes and capabilities.
    pub fn query(&self) -> Result<(QpAttr, QpCap)> {
        let ch = match &self.ctx.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) => return h.query_qp(self.qpn),
        };
        match ch.call(&Request::QueryQp { qpn: self.qpn }, &[])?.0 {
            Response::QueryQp { attr, cap } => Ok((attr, cap)),
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// Posts send work requests (`ibv_post_send`): all are written, then one doorbell.
    /// Fails with [`Error::QueueFull`] when the SQ has no room for all of them (none is
    /// posted then). On a direct context the engine checks each request and sends at
    /// once; the first it refuses ends the list, those before it posted.
    pub fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        match &mut self.queues {
            Queues::Rings(r) => {
                // Noted before the doorbell: rocexd may run the whole round trip before
                // this thread looks again.
                let at = r.msn.load();
                r.post(Queue::Send, wrs, |w, wr| w.post_send(wr))?;
                if let Dev::Daemon(ch) = &self.ctx.dev {
                    ch.answers.borrow_mut().asked(self.qpn, &r.msn, at);
                }
                Ok(())
            }
            Queues::Local(h) => h.post_send(self.qpn, wrs),
        }
    }

    /// Posts receive work requests (`ibv_post_recv`), as [`post_send`](Self::post_send).
    pub fn post_recv(&mut self, wrs: &[RecvWr]) -> Result<()> {
        match &mut self.queues {
            Queues::Rings(r) => r.post(Queue::Recv, wrs, |w, wr| w.post_recv(wr)),
            Queues::Local(h) => h.post_recv(self.qpn, wrs),
        }
    }

    /// The rings, for the raw test hooks: a direct QP has none.
    fn rings(&mut self) -> Result<&mut Rings> {
        match &mut self.queues {
            Queues::Rings(r) => Ok(r),
            Queues::Local(_) => Err(Error::Unsupported {
                what: "raw SQ slots",
                why: "a direct QP posts into the engine, not a ring",
            }),
        }
    }

    /// Raw access to the SQ ring memory, for tests of the daemon's validation: writes
    /// `bytes` into the next slot and publishes it, with no encoding or checks.
    #[doc(hidden)]
    pub fn post_raw_send_slot(&mut self, bytes: &[u8]) -> Result<()> {
        self.rings()?.post_raw_send_slot(bytes)
    }

    /// Raw access for tests: stores `index` as the SQ producer index (a lie about how
    /// much was posted).
    #[doc(hidden)]
    pub fn corrupt_sq_producer(&mut self, index: u32) -> Result<()> {
        self.rings()?.corrupt_sq_producer(index)
    }
}

impl Rings {
    /// Writes `wrs` into queue `q`'s ring with `write`, then rings the doorbell once;
    /// [`Error::QueueFull`] (and none written) when the ring has no room for all.
    fn post<T>(
        &mut self,
        q: Queue,
        wrs: &[T],
        write: impl Fn(&mut WqWriter<'_>, &T) -> core::result::Result<(), PostError>,
    ) -> Result<()> {
        let (off, spec, tail) = match q {
            Queue::Send => (self.sq_off, self.sq, &mut self.sq_tail),
            Queue::Recv => (self.rq_off, self.rq, &mut self.rq_tail),
        };
        let ring = ring_in(&self.map, off, spec)?;
        let mut p = ring.producer_at(*tail);
        let free = p.free().map_err(|e| Error::Post(PostError::Ring(e)))?;
        if (free as usize) < wrs.len() {
            return Err(Error::QueueFull);
        }
        let mut w = WqWriter::new(p, spec);
        for wr in wrs {
            write(&mut w, wr).map_err(Error::Post)?;
            *tail = tail.wrapping_add(1);
        }
        if w.publish() {
            self.doorbell.signal()?;
        }
        Ok(())
    }

    fn post_raw_send_slot(&mut self, bytes: &[u8]) -> Result<()> {
        let ring = ring_in(&self.map, self.sq_off, self.sq)?;
        let mut p = ring.producer_at(self.sq_tail);
        p.free().map_err(|e| Error::Post(PostError::Ring(e)))?;
        p.push(bytes).map_err(|e| Error::Post(PostError::Ring(e)))?;
        self.sq_tail = self.sq_tail.wrapping_add(1);
        if p.publish() {
            self.doorbell.signal()?;
        }
        Ok(())
    }

    fn corrupt_sq_producer(&mut self, index: u32) -> Result<()> {
        let v = self.map.view();
        let w = v
            .word(self.sq_off + rocex_shm::layout::ring_off::PRODUCER)
            .map_err(|e| proto(e.to_string()))?;
        w.store(index, Ordering::Release);
        self.doorbell.signal()?;
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        let _ = match &self.ctx.dev {
            Dev::Daemon(ch) => ch.done(&Request::DestroyQp { qpn: self.qpn }),
            Dev::Direct(h) => h.destroy_qp(self.qpn),
        };
    }
}

/// One of a QP's two work queues.
#[derive(Clone, Copy)]
enum Queue {
    Send,
    Recv,
}
