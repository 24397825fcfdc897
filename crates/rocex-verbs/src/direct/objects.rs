//! The verbs of a direct context, each one engine call under the host's lock, with the
//! limits rocexd's control path applies (the same device, reached without the daemon).

use std::sync::Arc;

use rocex_proto::verbs::{AttrMask, QpAttr, QpCap, RecvWr, SendWr};
use rocex_proto::{
    Engine, Instant, MemError, MwBinding, NotifyOn, PdId, QpInit, Region, VerbsError,
};
use rocex_shm::control::{QpStat, Stats};
use rocex_verbs_types::{Access, WcOpcode, WorkCompletion};

use super::{Core, Host};
use crate::{Error, Result};

/// Deepest work queue, most SGEs per request and inline bytes per send a QP may ask
/// for: rocexd's limits (its `QueryDevice`), so a program sees one device either way.
pub(crate) const MAX_WR: u32 = 16384;
/// See [`MAX_WR`].
pub(crate) const MAX_SGE: u32 = 32;
/// See [`MAX_WR`].
pub(crate) const MAX_INLINE: u32 = 1024;

/// An engine refusal as the errno rocexd answers it with.
pub(crate) fn refused(e: VerbsError) -> Error {
    const ENOENT: u32 = 2;
    const ENOMEM: u32 = 12;
    const EBUSY: u32 = 16;
    const EINVAL: u32 = 22;
    let errno = match &e {
        VerbsError::NoSuchQp(_) | VerbsError::NoSuchCq(_) => ENOENT,
        VerbsError::CqBusy(_) | VerbsError::Mem(MemError::Busy) => EBUSY,
        VerbsError::Mem(MemError::UnknownPd { .. } | MemError::UnknownKey { .. }) => ENOENT,
        VerbsError::Limit(_) => ENOMEM,
        VerbsError::QueueFull => return Error::QueueFull,
        _ => EINVAL,
    };
    Error::Daemon {
        errno,
        detail: e.to_string(),
    }
}

fn invalid(detail: &str) -> Error {
    Error::Daemon {
        errno: 22,
        detail: detail.to_owned(),
    }
}

/// The caps a QP gets for `cap`, by rocexd's rule: queues rounded up to a power of two,
/// at least one SGE each way; out of the limits is EINVAL.
fn grant(cap: QpCap) -> Result<QpCap> {
    let depth = 1..=MAX_WR;
    if !depth.contains(&cap.max_send_wr) || !depth.contains(&cap.max_recv_wr) {
        return Err(invalid("queue depth must be 1..=16384"));
    }
    if cap.max_send_sge > MAX_SGE || cap.max_recv_sge > MAX_SGE {
        return Err(invalid("at most 32 SGEs per work request"));
    }
    if cap.max_inline_data > MAX_INLINE {
        return Err(invalid("at most 1024 inline bytes"));
    }
    Ok(QpCap {
        max_send_wr: cap.max_send_wr.next_power_of_two(),
        max_recv_wr: cap.max_recv_wr.next_power_of_two(),
        max_send_sge: cap.max_send_sge.max(1),
        max_recv_sge: cap.max_recv_sge.max(1),
        max_inline_data: cap.max_inline_data,
    })
}

impl Host {
    pub(crate) fn alloc_pd(&self) -> Result<u32> {
        self.control(|c| c.driver.engine.alloc_pd().raw())
    }

    pub(crate) fn dealloc_pd(&self, pd: u32) -> Result<()> {
        self.engine(|e| e.dealloc_pd(PdId::from_raw(pd)))
    }

    /// Registers `region` as `len` bytes at `iova` in `pd`: the keys.
    pub(crate) fn reg_mr(
        &self,
        pd: u32,
        iova: u64,
        len: usize,
        access: Access,
        region: Arc<dyn Region>,
    ) -> Result<(u32, u32)> {
        let k = self.engine(|e| e.reg_mr(PdId::from_raw(pd), iova, len as u64, access, region))?;
        Ok((k.lkey, k.rkey))
    }

    pub(crate) fn dereg_mr(&self, lkey: u32) -> Result<()> {
        self.engine(|e| e.dereg_mr(lkey))
    }

    pub(crate) fn alloc_mw(&self, pd: u32, type1: bool) -> Result<u32> {
        let pd = PdId::from_raw(pd);
        self.engine(|e| match type1 {
            true => e.alloc_mw_type1(pd),
            false => e.alloc_mw(pd),
        })
    }

    pub(crate) fn dealloc_mw(&self, rkey: u32) -> Result<()> {
        self.engine(|e| e.dealloc_mw(rkey))
    }

    pub(crate) fn bind_mw(&self, qpn: u32, mw_rkey: u32, key: u8, to: MwBinding) -> Result<u32> {
        self.engine(|e| e.bind_mw_on_qp(qpn, mw_rkey, key, to))
    }

    pub(crate) fn local_invalidate(&self, qpn: u32, rkey: u32) -> Result<()> {
        self.engine(|e| e.invalidate_mw_on_qp(qpn, rkey))
    }

    /// A CQ of `cqe` entries: 0 or more than the device's `max_cqe` is EINVAL, as rocexd
    /// answers.
    pub(crate) fn create_cq(&self, cqe: u32) -> Result<u32> {
        self.engine(|e| {
            cqe_in_range(e, cqe)?;
            e.create_cq(cqe as usize)
        })
    }

    pub(crate) fn resize_cq(&self, cq: u32, cqe: u32) -> Result<()> {
        self.engine(|e| {
            cqe_in_range(e, cqe)?;
            e.resize_cq(cq, cqe as usize)
        })
    }

    pub(crate) fn destroy_cq(&self, cq: u32) -> Result<()> {
        self.with(|c| {
            c.driver.engine.destroy_cq(cq).map_err(refused)?;
            c.notify.remove(&cq);
            Ok(())
        })?
    }

    pub(crate) fn cq_len(&self, cq: u32) -> Result<u32> {
        self.with(|c| c.driver.engine.cq_len(cq) as u32)
    }

    /// Arms `cq`; true when completions already wait (then it stays unarmed). A program
    /// that arms is about to block: the lease ends, and the progress thread turns for it.
    pub(crate) fn arm_cq(&self, cq: u32) -> Result<bool> {
        self.with_waits(|c, w| {
            c.end_lease(w);
            if c.driver.engine.cq_len(cq) > 0 {
                return Ok(true);
            }
            let armed = c.notify.get(&cq).map(|n| n.armed.clone());
            c.driver
                .engine
                .req_notify_cq(cq, NotifyOn::Next)
                .map_err(refused)?;
            if let Some(a) = armed {
                a.store(true, std::sync::atomic::Ordering::Release);
            }
            Ok(false)
        })?
    }

    /// One turn in the caller's thread, then up to `max` completions of `cq` into `f`. An
    /// empty poll takes or extends the lease (the program will poll again), and so does
    /// one whose last completion's QP has requests still in flight (it polls on for
    /// them). Otherwise completions give the socket back (the program goes on to other
    /// work, perhaps to spin on its memory), after a SEND or WRITE perhaps once the poll
    /// has waited a moment for the peer's answer ([`Core::begin_linger`]).
    pub(crate) fn poll_cq(
        &self,
        cq: u32,
        max: usize,
        f: &mut impl FnMut(WorkCompletion),
    ) -> Result<usize> {
        let (n, lingering) = self.with_waits(|c, w| {
            c.poll_turn();
            let mut n = 0;
            let mut last = None;
            while n < max {
                let Some(wc) = c.driver.engine.poll_cq(cq) else {
                    break;
                };
                last = Some((wc.qp_num, wc.opcode));
                f(wc);
                n += 1;
            }
            // One look at the QP serves both questions: requests in flight, and a linger.
            let last = last.map(|(qpn, op)| (qpn, op, c.driver.engine.qp_status(qpn).ok()));
            let lingering = match last {
                // The program polls again: for more, or for the rest of what is in flight.
                None => {
                    c.extend_lease(w);
                    None
                }
                Some((_, _, Some(qp))) if qp.sq_wqes > 0 => {
                    c.extend_lease(w);
                    None
                }
                Some((qpn, op, qp)) => {
                    let asked = matches!(op, WcOpcode::Send | WcOpcode::RdmaWrite);
                    let qp = qp.filter(|_| asked);
                    let l = qp.and_then(|qp| c.begin_linger(qpn, &qp, w));
                    if l.is_none() {
                        c.release_lease(w);
                    }
                    l
                }
            };
            (n, lingering)
        })?;
        if let Some(mut l) = lingering {
            while let Ok(false) = self.with(|c| c.linger_turn(&mut l)) {}
            let _ = self.with_waits(|c, w| c.end_linger(l, w));
        }
        Ok(n)
    }

    /// Creates a QP; its number and the caps granted.
    pub(crate) fn create_qp(&self, init: QpInit) -> Result<(u32, QpCap)> {
        let cap = grant(init.cap)?;
        let qpn = self.engine(|e| e.create_qp(QpInit { cap, ..init }))?;
        Ok((qpn, cap))
    }

    pub(crate) fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: AttrMask) -> Result<()> {
        self.engine(|e| e.modify_qp(qpn, attr, mask))
    }

    pub(crate) fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpCap)> {
        self.engine(|e| e.query_qp(qpn))
    }

    pub(crate) fn destroy_qp(&self, qpn: u32) -> Result<()> {
        self.engine(|e| e.destroy_qp(qpn))
    }

    /// Posts `wrs` in the caller's thread, which sends them at once or with its next poll
    /// ([`Core::corks`]). [`Error::QueueFull`], and none posted, when the queue has room
    /// for some but not all; otherwise the engine checks each, and the first it refuses
    /// ends the list (those before it are posted, as `ibv_post_send`'s `bad_wr` reports).
    pub(crate) fn post_send(&self, qpn: u32, wrs: &[SendWr]) -> Result<()> {
        self.post(
            qpn,
            wrs,
            Engine::send_room,
            Engine::post_send,
            Some(Core::asked),
        )
    }

    /// Posts receive requests, as [`post_send`](Self::post_send), and sends what waits at
    /// once.
    pub(crate) fn post_recv(&self, qpn: u32, wrs: &[RecvWr]) -> Result<()> {
        self.post(qpn, wrs, Engine::recv_room, Engine::post_recv, None)
    }

    /// [`post_send`](Self::post_send) for either queue: its room, its post, and for the
    /// send queue what is noted of a post before it is sent.
    fn post<W: Clone>(
        &self,
        qpn: u32,
        wrs: &[W],
        room: fn(&Engine, u32) -> usize,
        post: fn(&mut Engine, Instant, u32, W) -> std::result::Result<(), VerbsError>,
        sends: Option<fn(&mut Core, u32)>,
    ) -> Result<()> {
        self.with(|c| {
            let room = room(&c.driver.engine, qpn);
            if room > 0 && room < wrs.len() {
                return Err(Error::QueueFull);
            }
            let now = c.driver.now();
            let posted = wrs
                .iter()
                .try_for_each(|wr| post(&mut c.driver.engine, now, qpn, wr.clone()));
            let corked = match sends {
                Some(note) => {
                    note(c, qpn);
                    c.corks(qpn, wrs.len())
                }
                None => false,
            };
            c.after_post(corked);
            posted.map_err(refused)
        })?
    }

    /// The engine's counters (group `engine`, rxe's names, as rocexd reports them), the
    /// direct path's own (group `direct`: the lingers' and the progress thread's spin's)
    /// and every QP's, or only `qpn`'s.
    pub(crate) fn stats(&self, qpn: Option<u32>) -> Result<Stats> {
        self.control(|c| {
            let e = &c.driver.engine;
            let group = stat_group("engine", e.counters().iter());
            let mut qpns: Vec<u32> = match qpn {
                Some(q) => vec![q],
                None => e.qpns().collect(),
            };
            qpns.sort_unstable();
            let mut qps = Vec::with_capacity(qpns.len());
            for q in qpns {
                qps.push(qp_stat(c, q)?);
            }
            let own = [("spin_received", c.spun), ("posts_corked", c.corked)];
            let direct = stat_group("direct", c.linger.counters().chain(own));
            Ok(Stats {
                groups: vec![group, direct],
                qps,
                next: 0,
            })
        })?
    }

    /// Runs one engine call under the lock, its refusal as rocexd's, then its events: a QP
    /// moved to ERROR flushes its requests into CQs whose channels a waiter sleeps on, and
    /// no packet may come to turn the engine after it.
    pub(super) fn engine<T>(
        &self,
        f: impl FnOnce(&mut rocex_proto::Engine) -> Result<T, VerbsError>,
    ) -> Result<T> {
        self.control(|c| {
            let r = f(&mut c.driver.engine);
            c.deliver_events();
            r
        })?
        .map_err(refused)
    }
}

/// A group of counters as a `Stat` answer carries them.
fn stat_group<'a>(
    name: &str,
    counters: impl Iterator<Item = (&'a str, u64)>,
) -> rocex_shm::control::StatGroup {
    rocex_shm::control::StatGroup {
        name: name.into(),
        counters: counters.map(|(n, v)| (n.to_owned(), v)).collect(),
    }
}

fn cqe_in_range(e: &rocex_proto::Engine, cqe: u32) -> Result<(), VerbsError> {
    match cqe == 0 || cqe as usize > e.config().max_cqe {
        true => Err(VerbsError::BadAttribute("cqe out of range")),
        false => Ok(()),
    }
}

/// One QP's state and counters, under the names rocexd reports them by.
fn qp_stat(c: &Core, qpn: u32) -> Result<QpStat> {
    let s = c.driver.engine.qp_status(qpn).map_err(refused)?;
    Ok(QpStat {
        qpn,
        qp_type: s.qp_type,
        state: s.state,
        counters: s
            .named()
            .chain([("client_pid", u64::from(std::process::id()))])
            .map(|(n, v)| (n.to_owned(), v))
            .collect(),
    })
}
