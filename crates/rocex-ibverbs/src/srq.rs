//! Shared receive queues, kept by the library: rocexd has none, so an SRQ is a pool of
//! receive requests that the library hands out to the receive queues of the QPs attached
//! to it, each QP getting the next request when it consumes one (the QP holding the fewest
//! goes first). A receive completion tells the library which QP consumed which request
//! (receives complete in order per QP); one flushed from a QP that went to error is put
//! back in the pool instead of being reported, as a request in an SRQ outlives the QPs.
//!
//! What differs from an SRQ of a device: a request handed to a QP that then receives
//! nothing waits there while another QP could have used it (traffic spread over the QPs,
//! as ibv_srq_pingpong's, is served in turn), and the limit event
//! (`IBV_EVENT_SRQ_LIMIT_REACHED`, `events.rs`) is raised when the program polls the
//! receive completion that took the SRQ below its limit, not when the request arrived.

use core::ffi::c_int;
use std::collections::VecDeque;

use rocex_verbs_types::{RecvWr, WcOpcode, WcStatus, WorkCompletion};

use crate::abi::*;
use crate::ctx::{Ctx, CtxState, Guarded, zeroed};
use crate::mr::Pd;
use crate::qp::{Qp, sges};
use crate::{null_errno, symver};

/// An SRQ.
#[repr(C)]
pub struct Srq {
    /// rdma-core's SRQ.
    pub ibv: ibv_srq,
    st: Guarded<SrqState>,
}

/// One QP attached to an SRQ, with the requests handed to it, oldest first.
struct Member {
    qp: *const Qp,
    posted: VecDeque<RecvWr>,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED` was raised since the QP last went to error.
    last_wqe: bool,
}

struct SrqState {
    pool: VecDeque<RecvWr>,
    max_wr: u32,
    max_sge: u32,
    limit: u32,
    members: Vec<Member>,
}

impl SrqState {
    fn held(&self) -> usize {
        self.pool.len() + self.members.iter().map(|m| m.posted.len()).sum::<usize>()
    }
}

impl Srq {
    /// # Safety
    ///
    /// `srq` is an SRQ of this library.
    pub unsafe fn from_ibv<'a>(srq: *mut ibv_srq) -> &'a Self {
        // SAFETY: `ibv` is the first field of the repr(C) Srq.
        unsafe { &*srq.cast::<Self>() }
    }

    fn ctx(&self) -> &Ctx {
        // SAFETY: an SRQ's context outlives it.
        unsafe { Ctx::from_ibv(self.ibv.context) }
    }

    /// The receive queue size and SGEs a QP attached to this SRQ needs.
    pub fn caps(&self, g: &std::sync::MutexGuard<'_, CtxState>) -> (u32, u32) {
        let st = self.st.get(g);
        (st.max_wr, st.max_sge)
    }

    /// Attaches a new QP (created with this SRQ).
    pub fn attach(&self, g: &std::sync::MutexGuard<'_, CtxState>, qp: *const Qp) {
        self.st.get(g).members.push(Member {
            qp,
            posted: VecDeque::new(),
            last_wqe: false,
        });
    }

    /// Detaches a QP being destroyed: what it held and never consumed returns to the pool.
    pub fn detach(&self, g: &std::sync::MutexGuard<'_, CtxState>, qp: *const Qp) {
        let st = self.st.get(g);
        if let Some(i) = st.members.iter().position(|m| core::ptr::eq(m.qp, qp)) {
            let m = st.members.swap_remove(i);
            st.pool.extend(m.posted);
        }
        refill(st, g);
    }

    /// A QP of this SRQ moved to `state` (`enum ibv_qp_state`): entering error raises
    /// `IBV_EVENT_QP_LAST_WQE_REACHED` once, as rxe's `flush_recv_queue` does for a QP
    /// whose receives come from an SRQ; a reset rearms it.
    pub fn qp_state(&self, g: &std::sync::MutexGuard<'_, CtxState>, qp: *const Qp, state: c_int) {
        let st = self.st.get(g);
        let Some(m) = st.members.iter_mut().find(|m| core::ptr::eq(m.qp, qp)) else {
            return;
        };
        match state {
            0 => m.last_wqe = false,
            6 if !m.last_wqe => {
                m.last_wqe = true;
                self.ctx().events.raise(
                    qp.cast_mut().cast(),
                    crate::events::kind::QP_LAST_WQE_REACHED,
                );
            }
            _ => {}
        }
    }

    /// Hands out what the pool holds (after a QP reached INIT).
    pub fn refill(&self, g: &std::sync::MutexGuard<'_, CtxState>) {
        refill(self.st.get(g), g);
    }
}

/// Gives pool requests to the attached QPs that can receive, fewest held first.
fn refill(st: &mut SrqState, g: &std::sync::MutexGuard<'_, CtxState>) {
    while let Some(wr) = st.pool.pop_front() {
        let next = st
            .members
            .iter_mut()
            .filter(|m| {
                // SAFETY: members are live QPs (detached before they are destroyed).
                let q = unsafe { &*m.qp };
                let s = q.state();
                (1..=3).contains(&s) && (m.posted.len() as u32) < q.cap.max_recv_wr
            })
            .min_by_key(|m| m.posted.len());
        let Some(m) = next else {
            st.pool.push_front(wr);
            return;
        };
        // SAFETY: as above.
        let q = unsafe { &*m.qp };
        if q.qp.get(g).post_recv(core::slice::from_ref(&wr)).is_err() {
            st.pool.push_front(wr);
            return;
        }
        m.posted.push_back(wr);
    }
}

/// Accounts a completion on a QP attached to `srq`: a receive consumed the QP's oldest
/// request; a flushed one goes back to the pool. Returns whether the program sees it.
pub(crate) fn on_completion(
    srq: *mut ibv_srq,
    w: &WorkCompletion,
    g: &std::sync::MutexGuard<'_, CtxState>,
) -> bool {
    // SAFETY: a QP's SRQ outlives it.
    let s = unsafe { Srq::from_ibv(srq) };
    if w.status != WcStatus::Success {
        // An error completion: the QP has gone to error.
        let qp = s.st.get(g).members.iter().map(|m| m.qp).find(|&q| {
            // SAFETY: members are live QPs.
            unsafe { &*q }.ex.qp_base.qp_num == w.qp_num
        });
        if let Some(qp) = qp {
            s.qp_state(g, qp, 6);
        }
    }
    if !matches!(w.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
        return true;
    }
    let st = s.st.get(g);
    let Some(m) = st.members.iter_mut().find(|m| {
        // SAFETY: members are live QPs.
        unsafe { &*m.qp }.ex.qp_base.qp_num == w.qp_num
    }) else {
        return true;
    };
    let consumed = m.posted.pop_front();
    let shown = w.status != WcStatus::WrFlushErr;
    match (shown, consumed) {
        (false, Some(wr)) => st.pool.push_back(wr),
        // rxe `get_srq_wqe`: fewer requests than an armed limit raises the event once
        // and disarms the limit.
        (true, Some(_)) if st.limit != 0 && (st.held() as u64) < u64::from(st.limit) => {
            st.limit = 0;
            s.ctx()
                .events
                .raise(srq.cast(), crate::events::kind::SRQ_LIMIT_REACHED);
        }
        _ => {}
    }
    refill(st, g);
    shown
}

/// `ibv_create_srq`.
///
/// # Safety
///
/// `pd` is a PD of this library; `attr` is readable and writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    // SAFETY: per the contract.
    let (p, a) = unsafe { (Pd::from_ibv(pd), &mut *attr) };
    let g = p.ctx().lock();
    let Ok(dev) = g.verbs.query_device() else {
        return null_errno(libc::EIO);
    };
    if a.attr.max_wr == 0 || a.attr.max_wr > dev.max_qp_wr || a.attr.max_sge > dev.max_sge {
        return null_errno(libc::EINVAL);
    }
    let max_sge = a.attr.max_sge.max(1);
    a.attr.max_sge = max_sge;
    let srq = Box::new(Srq {
        ibv: ibv_srq {
            context: p.ibv.context,
            srq_context: a.srq_context,
            pd,
            handle: 0,
            mutex: zeroed(),
            cond: zeroed(),
            events_completed: 0,
        },
        st: Guarded::new(SrqState {
            pool: VecDeque::new(),
            max_wr: a.attr.max_wr,
            max_sge,
            limit: a.attr.srq_limit,
            members: Vec::new(),
        }),
    });
    Box::into_raw(srq).cast()
}

/// `ibv_modify_srq`: `IBV_SRQ_LIMIT` arms the limit event (0 disarms it; more than the
/// SRQ holds is EINVAL, rxe `rxe_srq_chk_attr`); resizing is not offered (EINVAL, as for
/// a device without `IBV_DEVICE_SRQ_RESIZE`).
///
/// # Safety
///
/// `srq` is an SRQ of this library; `attr` is readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: per the contract.
    let (s, a) = unsafe { (Srq::from_ibv(srq), &*attr) };
    if mask & 1 != 0 {
        return libc::EINVAL;
    }
    let g = s.ctx().lock();
    if mask & 2 != 0 {
        let st = s.st.get(&g);
        if a.srq_limit > st.max_wr {
            return libc::EINVAL;
        }
        st.limit = a.srq_limit;
    }
    0
}

/// `ibv_query_srq`.
///
/// # Safety
///
/// `srq` is an SRQ of this library; `attr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: per the contract.
    let s = unsafe { Srq::from_ibv(srq) };
    let g = s.ctx().lock();
    let st = s.st.get(&g);
    // SAFETY: per the contract.
    unsafe {
        attr.write(ibv_srq_attr {
            max_wr: st.max_wr,
            max_sge: st.max_sge,
            srq_limit: st.limit,
        })
    };
    0
}

/// `ibv_destroy_srq`: EBUSY while QPs use it.
///
/// # Safety
///
/// `srq` is an SRQ of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    // SAFETY: per the contract.
    let s = unsafe { Srq::from_ibv(srq) };
    let ctx = s.ctx();
    let g = ctx.lock();
    if !s.st.get(&g).members.is_empty() {
        return libc::EBUSY;
    }
    // SAFETY: made by Box::into_raw in ibv_create_srq; dropped under the lock.
    drop(unsafe { Box::from_raw(srq.cast::<Srq>()) });
    drop(g);
    0
}

/// `post_srq_recv` of `ibv_context.ops` (`ibv_post_srq_recv`): EINVAL for too many SGEs,
/// ENOMEM beyond the SRQ's size, `*bad` at the first request not taken.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    mut wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: verbs.h passes an SRQ of this library.
    let s = unsafe { Srq::from_ibv(srq) };
    let g = s.ctx().lock();
    let st = s.st.get(&g);
    let mut err = 0;
    while !wr.is_null() {
        // SAFETY: the program's list of requests.
        let w = unsafe { &*wr };
        let n = usize::try_from(w.num_sge).unwrap_or(usize::MAX);
        if n > st.max_sge as usize {
            err = libc::EINVAL;
            break;
        }
        if st.held() >= st.max_wr as usize {
            err = libc::ENOMEM;
            break;
        }
        st.pool.push_back(RecvWr {
            wr_id: w.wr_id,
            // SAFETY: the request's list of `n` entries.
            sges: unsafe { sges(w.sg_list, n) },
        });
        wr = w.next;
    }
    refill(st, &g);
    if err != 0 {
        // SAFETY: `bad` is writable (verbs.h).
        unsafe { *bad = wr };
    }
    err
}

symver! {
    ibv_create_srq @ "IBVERBS_1.1",
    ibv_modify_srq @ "IBVERBS_1.1",
    ibv_query_srq @ "IBVERBS_1.1",
    ibv_destroy_srq @ "IBVERBS_1.1",
}
