//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw`, `ibv_bind_mw` (type 1), and the
//! BIND_MW and LOCAL_INV work requests of `ibv_post_send` (type 2, and LOCAL_INV of
//! either).
//!
//! rocexd executes a bind or an invalidation when it is posted, on the control
//! connection, after the requests posted before it have been handed to the send ring; the
//! library then puts its completion in the QP's send CQ itself (an armed CQ's event is
//! then owed, as for rocexd's completions). What differs from rxe, which executes them in
//! the requester in send-queue order: the completion comes ahead of those of earlier
//! requests still in flight.
//!
//! Keys follow rxe (`rxe_do_bind_mw`): a bind keeps the window's upper 24 bits and takes
//! the binder's low byte, the one `ibv_inc_rkey` makes. `ibv_bind_mw` picks it as rxe's
//! provider does and writes the new rkey to `mw->rkey`; a BIND_MW request names it in
//! `bind_mw.rkey` and leaves `mw->rkey` as it was, as on rxe (the library follows the
//! window's current rkey in `mw->handle`). A bind that fails completes with `IBV_WC_MW_BIND_ERR`, an invalidation
//! with `IBV_WC_LOC_QP_OP_ERR`, and the QP goes to error, as in rxe's
//! `rxe_do_local_ops`.

use core::ffi::c_int;
use std::collections::VecDeque;
use std::sync::MutexGuard;

use rocex_verbs::{Access, MwBind};
use rocex_verbs_types::{AttrMask, QpAttr, QpState};

use crate::abi::*;
use crate::cq::Cq;
use crate::ctx::CtxState;
use crate::mr::Pd;
use crate::qp::Qp;
use crate::{errno_of, null_errno, trace};

/// `IBV_MW_TYPE_1`, `IBV_MW_TYPE_2`.
const TYPE_1: c_int = 1;
const TYPE_2: c_int = 2;
/// `IBV_WR_LOCAL_INV`, `IBV_WR_BIND_MW`.
pub(crate) const WR_LOCAL_INV: c_int = 7;
pub(crate) const WR_BIND_MW: c_int = 8;
/// `IBV_WC_BIND_MW`, `IBV_WC_LOCAL_INV` (`enum ibv_wc_opcode`).
const WC_BIND_MW: c_int = 5;
const WC_LOCAL_INV: c_int = 6;
/// `IBV_WC_LOC_QP_OP_ERR`, `IBV_WC_MW_BIND_ERR` (`enum ibv_wc_status`).
const WC_LOC_QP_OP_ERR: c_int = 2;
const WC_MW_BIND_ERR: c_int = 6;
/// `IBV_SEND_SIGNALED`.
const SIGNALED: u32 = 1 << 1;

/// `alloc_mw` of `ibv_context.ops` (`ibv_alloc_mw`): a type-1 or type-2 window.
pub(crate) unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, ty: c_int) -> *mut ibv_mw {
    if ty != TYPE_1 && ty != TYPE_2 {
        return null_errno(libc::EINVAL);
    }
    // SAFETY: verbs.h passes a PD of this library.
    let p = unsafe { Pd::from_ibv(pd) };
    let g = p.ctx().lock();
    match p.pd.get(&g).alloc_mw(ty == TYPE_1) {
        Ok(rkey) => Box::into_raw(Box::new(ibv_mw {
            context: p.ibv.context,
            pd,
            rkey,
            handle: rkey,
            type_: ty,
        })),
        Err(e) => {
            trace("ibv_alloc_mw", &e);
            null_errno(errno_of(&e))
        }
    }
}

/// `dealloc_mw` of `ibv_context.ops` (`ibv_dealloc_mw`).
pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: verbs.h passes a window of this library.
    let m = unsafe { &*mw };
    // SAFETY: a window's PD, and so its context, outlives it.
    let g = unsafe { Pd::from_ibv(m.pd) }.ctx().lock();
    match g.verbs.dealloc_mw(m.handle) {
        Ok(()) => {
            drop(g);
            // SAFETY: made by Box::into_raw in alloc_mw, not used afterwards.
            drop(unsafe { Box::from_raw(mw) });
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `bind_mw` of `ibv_context.ops` (`ibv_bind_mw`, which verbs.h calls for a type-1
/// window only): a BIND_MW request with the next key byte, as rxe's provider posts one.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut ibv_qp,
    mw: *mut ibv_mw,
    bind: *mut ibv_mw_bind,
) -> c_int {
    // SAFETY: verbs.h passes a QP and a window of this library and a readable bind.
    let (q, m, b) = unsafe { (Qp::from_ibv(qp), &mut *mw, &*bind) };
    if access_of(&b.bind_info).is_none() {
        return libc::EINVAL;
    }
    let g = q.ctx().lock();
    let key = (m.rkey as u8).wrapping_add(1);
    match run_bind(q, &g, m.handle, key, &b.bind_info) {
        Ok(rkey) => {
            (m.rkey, m.handle) = (rkey, rkey);
            complete(q, &g, b.wr_id, b.send_flags, WC_BIND_MW, 0);
        }
        Err(_) => fail(q, &g, b.wr_id, WC_BIND_MW, WC_MW_BIND_ERR),
    }
    0
}

/// The rights a bind grants, or `None` for bits rocex does not know (or ZERO_BASED,
/// which rxe refuses).
fn access_of(info: &ibv_mw_bind_info) -> Option<Access> {
    Access::from_bits(info.mw_access_flags).filter(|a| !a.contains(Access::ZERO_BASED))
}

/// Asks rocexd to bind: the new rkey, or an errno.
fn run_bind(
    q: &Qp,
    g: &MutexGuard<'_, CtxState>,
    mw_rkey: u32,
    key: u8,
    info: &ibv_mw_bind_info,
) -> Result<u32, c_int> {
    let access = access_of(info).ok_or(libc::EINVAL)?;
    let mr_lkey = if info.mr.is_null() {
        0
    } else {
        // SAFETY: a non-null MR in a bind is the program's, alive while bound.
        unsafe { (*info.mr).lkey }
    };
    let to = MwBind {
        mr_lkey,
        addr: info.addr,
        len: info.length,
        access,
    };
    g.verbs.bind_mw(q.qp.get(g), mw_rkey, key, to).map_err(|e| {
        trace("bind_mw", &e);
        errno_of(&e)
    })
}

/// Executes a LOCAL_INV or BIND_MW request of `ibv_post_send` and completes it.
pub(crate) fn local_op(q: &Qp, g: &MutexGuard<'_, CtxState>, w: &ibv_send_wr) {
    if w.opcode == WR_LOCAL_INV {
        match g.verbs.local_invalidate(q.qp.get(g), w.imm_data) {
            Ok(()) => complete(q, g, w.wr_id, w.send_flags, WC_LOCAL_INV, 0),
            Err(e) => {
                trace("ibv_post_send LOCAL_INV", &e);
                fail(q, g, w.wr_id, WC_LOCAL_INV, WC_LOC_QP_OP_ERR);
            }
        }
        return;
    }
    let [mw, rkey, mr, addr, length, flags] = w.bind_mw;
    let info = ibv_mw_bind_info {
        mr: mr as usize as *mut ibv_mr,
        addr,
        length,
        mw_access_flags: flags as u32,
    };
    // SAFETY: a BIND_MW request names a window of this library.
    let m = unsafe { &*(mw as usize as *const ibv_mw) };
    match run_bind(q, g, m.handle, rkey as u8, &info) {
        Ok(new) => {
            // rocexd names the window by its current rkey, kept in `handle`; `mw->rkey`
            // stays what the program allocated, as rxe leaves it for a BIND_MW request.
            // SAFETY: the program's window; its fields are written under the lock.
            unsafe { (*(mw as usize as *mut ibv_mw)).handle = new };
            complete(q, g, w.wr_id, w.send_flags, WC_BIND_MW, 0);
        }
        Err(_) => fail(q, g, w.wr_id, WC_BIND_MW, WC_MW_BIND_ERR),
    }
}

/// A local request's completion, when it is signaled (or the QP signals every request).
fn complete(
    q: &Qp,
    g: &MutexGuard<'_, CtxState>,
    wr_id: u64,
    flags: u32,
    opcode: c_int,
    st: c_int,
) {
    if !q.send_flags(flags).signaled && st == 0 {
        return;
    }
    // SAFETY: a QP's send CQ is a CQ of this library and outlives it.
    let cq = unsafe { Cq::from_ibv(q.ex.qp_base.send_cq) };
    cq.push_local(
        g,
        ibv_wc {
            wr_id,
            status: st,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            imm_data: 0,
            qp_num: q.ex.qp_base.qp_num,
            src_qp: 0,
            wc_flags: 0,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
        },
    );
}

/// A local request that failed: its error completion (always delivered), and the QP to
/// error as rxe's requester moves it.
fn fail(q: &Qp, g: &MutexGuard<'_, CtxState>, wr_id: u64, opcode: c_int, st: c_int) {
    complete(q, g, wr_id, SIGNALED, opcode, st);
    let attr = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    let _ = q.qp.get(g).modify(&attr, AttrMask::STATE);
}

/// The local completions a CQ holds, taken before its ring's.
pub(crate) type LocalWcs = VecDeque<ibv_wc>;
