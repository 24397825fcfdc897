//! The work-request API of `struct ibv_qp_ex` (`ibv_wr_start`, `ibv_wr_rdma_write`,
//! `ibv_wr_set_sge`, ..., `ibv_wr_complete`), which Debian's perftest uses by default.
//!
//! Each operation call starts a request with the QP's current `wr_id` and `wr_flags` (as
//! rdma-core's providers read them); the `set` calls fill in its data or UD address;
//! `ibv_wr_complete` posts the batch with one doorbell, or fails it whole with the first
//! error (the request's errno, as a provider's `wr_complete` returns it).

use core::ffi::{c_int, c_void};

use rocex_verbs_types::{Remote, SendData, SendOp, SendWr, Sge, UdDest};

use crate::abi::*;
use crate::ah::Ah;
use crate::qp::{Qp, check_op, gather, post_all, sends_allowed, sges};
use crate::unsupported;

/// The requests between `ibv_wr_start` and `ibv_wr_complete`.
#[derive(Default)]
pub(crate) struct Batch {
    wrs: Vec<SendWr>,
    /// BIND_MW and LOCAL_INV requests (`mw.rs`), each with the number of `wrs` before it.
    locals: Vec<(usize, ibv_send_wr)>,
    /// The first error, reported by `ibv_wr_complete`.
    err: Option<c_int>,
}

/// Fills the work-request functions of a new QP.
pub(crate) fn install(ex: &mut ibv_qp_ex) {
    ex.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    ex.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    ex.wr_bind_mw = Some(wr_bind_mw);
    ex.wr_local_inv = Some(wr_local_inv);
    ex.wr_rdma_read = Some(wr_rdma_read);
    ex.wr_rdma_write = Some(wr_rdma_write);
    ex.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    ex.wr_send = Some(wr_send);
    ex.wr_send_imm = Some(wr_send_imm);
    ex.wr_send_inv = Some(wr_send_inv);
    ex.wr_send_tso = Some(wr_send_tso);
    ex.wr_set_ud_addr = Some(wr_set_ud_addr);
    ex.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    ex.wr_set_inline_data = Some(wr_set_inline_data);
    ex.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    ex.wr_set_sge = Some(wr_set_sge);
    ex.wr_set_sge_list = Some(wr_set_sge_list);
    ex.wr_start = Some(wr_start);
    ex.wr_complete = Some(wr_complete);
    ex.wr_abort = Some(wr_abort);
    ex.wr_atomic_write = Some(wr_atomic_write);
}

/// The QP and its batch.
///
/// # Safety
///
/// `qp` is a QP of this library, used by one thread between `wr_start` and `wr_complete`.
unsafe fn parts<'a>(qp: *mut ibv_qp_ex) -> (&'a Qp, &'a mut Batch) {
    // SAFETY: per the contract.
    let q = unsafe { Qp::from_ibv(qp.cast()) };
    // SAFETY: one thread per QP between wr_start and wr_complete.
    (q, unsafe { &mut *q.batch.get() })
}

/// Starts a request of `op`.
unsafe fn begin(qp: *mut ibv_qp_ex, op: SendOp) {
    // SAFETY: per the callers' contract.
    let (q, b) = unsafe { parts(qp) };
    if let Err(e) = check_op(q.ty, &op) {
        b.err.get_or_insert(e);
    }
    b.wrs.push(SendWr {
        wr_id: q.ex.wr_id,
        op,
        data: SendData::Sges(Default::default()),
        flags: q.send_flags(q.ex.wr_flags),
        ud: None,
    });
}

/// The request being built (an error if there is none).
unsafe fn last<'a>(qp: *mut ibv_qp_ex) -> Option<&'a mut SendWr> {
    // SAFETY: per the callers' contract.
    let (_, b) = unsafe { parts(qp) };
    if b.wrs.is_empty() {
        b.err.get_or_insert(libc::EINVAL);
    }
    b.wrs.last_mut()
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    // SAFETY: per the operation's contract.
    let (_, b) = unsafe { parts(qp) };
    b.wrs.clear();
    b.locals.clear();
    b.err = None;
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    // SAFETY: per the operation's contract.
    let (q, b) = unsafe { parts(qp) };
    let wrs = core::mem::take(&mut b.wrs);
    let locals = core::mem::take(&mut b.locals);
    if let Some(e) = b.err.take() {
        return e;
    }
    let inline_max = q.cap.max_inline_data as usize;
    let sge_max = q.cap.max_send_sge as usize;
    for w in &wrs {
        let bad = match &w.data {
            SendData::Inline(d) => d.len() > inline_max,
            SendData::Sges(s) => s.len() > sge_max,
        };
        if bad || (q.ty == rocex_verbs_types::QpType::Ud) != w.ud.is_some() {
            return libc::EINVAL;
        }
    }
    // The requests before each local one reach the ring first; then rocexd executes it.
    let mut from = 0;
    for (at, w) in locals {
        if let Err(e) = post_all(q, &wrs[from..at]) {
            return e;
        }
        from = at;
        let g = q.ctx().lock();
        if !sends_allowed(q, &g) {
            return libc::EINVAL;
        }
        crate::mw::local_op(q, &g, &w);
    }
    match post_all(q, &wrs[from..]) {
        Ok(()) => 0,
        Err(e) => e,
    }
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    // SAFETY: per the operation's contract.
    let (_, b) = unsafe { parts(qp) };
    b.wrs.clear();
    b.locals.clear();
    b.err = None;
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    let remote = Remote { addr, rkey };
    // SAFETY: per the operation's contract.
    unsafe {
        begin(
            qp,
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            },
        )
    };
}

unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    let remote = Remote { addr, rkey };
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::FetchAdd { remote, add }) };
}

unsafe extern "C" fn wr_atomic_write(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, v: *const c_void) {
    let remote = Remote { addr, rkey };
    // SAFETY: the operand is 8 readable bytes (verbs.h).
    let value = u64::from_ne_bytes(unsafe { *v.cast::<[u8; 8]>() });
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::AtomicWrite { remote, value }) };
}

/// Queues a local request (BIND_MW, LOCAL_INV) as `ibv_post_send` would see it: the
/// QP's `wr_id` and `wr_flags`, and what `fill` sets. Not on UD (EINVAL).
unsafe fn begin_local(qp: *mut ibv_qp_ex, opcode: c_int, fill: impl FnOnce(&mut ibv_send_wr)) {
    // SAFETY: per the callers' contract.
    let (q, b) = unsafe { parts(qp) };
    if q.ty == rocex_verbs_types::QpType::Ud {
        b.err.get_or_insert(libc::EINVAL);
    }
    // SAFETY: ibv_send_wr is pointers and integers, for which all-zero is valid.
    let mut w: ibv_send_wr = unsafe { core::mem::zeroed() };
    w.wr_id = q.ex.wr_id;
    w.send_flags = q.ex.wr_flags;
    w.opcode = opcode;
    fill(&mut w);
    b.locals.push((b.wrs.len(), w));
}

unsafe extern "C" fn wr_bind_mw(
    qp: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    if mw.is_null() || info.is_null() {
        // SAFETY: per the operation's contract.
        unsafe { parts(qp) }.1.err.get_or_insert(libc::EINVAL);
        return;
    }
    // SAFETY: verbs.h passes the program's bind information.
    let i = unsafe { &*info };
    let words = [
        mw as usize as u64,
        u64::from(rkey),
        i.mr as usize as u64,
        i.addr,
        i.length,
        u64::from(i.mw_access_flags),
    ];
    // SAFETY: per the operation's contract.
    unsafe { begin_local(qp, crate::mw::WR_BIND_MW, |w| w.bind_mw = words) };
}

unsafe extern "C" fn wr_local_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: per the operation's contract.
    unsafe { begin_local(qp, crate::mw::WR_LOCAL_INV, |w| w.imm_data = rkey) };
}

unsafe extern "C" fn wr_send_tso(qp: *mut ibv_qp_ex, _h: *mut c_void, _hs: u16, _mss: u16) {
    unsupported("ibv_wr_send_tso", "EOPNOTSUPP from ibv_wr_complete");
    // SAFETY: per the operation's contract.
    unsafe { parts(qp) }.1.err.get_or_insert(libc::EOPNOTSUPP);
}

unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut ibv_qp_ex, _srqn: u32) {
    unsupported("ibv_wr_set_xrc_srqn", "EOPNOTSUPP from ibv_wr_complete");
    // SAFETY: per the operation's contract.
    unsafe { parts(qp) }.1.err.get_or_insert(libc::EOPNOTSUPP);
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::Read(Remote { addr, rkey })) };
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, addr: u64) {
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::Write(Remote { addr, rkey })) };
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    let op = SendOp::WriteWithImm(Remote { addr, rkey }, u32::from_be(imm));
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, op) };
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::Send) };
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm: u32) {
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::SendWithImm(u32::from_be(imm))) };
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: per the operation's contract.
    unsafe { begin(qp, SendOp::SendWithInv(rkey)) };
}

unsafe extern "C" fn wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    if ah.is_null() {
        // SAFETY: per the operation's contract.
        unsafe { parts(qp) }.1.err.get_or_insert(libc::EINVAL);
        return;
    }
    // SAFETY: an AH of this library.
    let dest = unsafe { Ah::from_ibv(ah) }.dest;
    // SAFETY: per the operation's contract.
    if let Some(w) = unsafe { last(qp) } {
        w.ud = Some(UdDest {
            dest,
            remote_qpn: qpn,
            remote_qkey: qkey,
        });
    }
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    // SAFETY: per the operation's contract.
    if let Some(w) = unsafe { last(qp) } {
        w.data = SendData::Sges([Sge { addr, length, lkey }].into_iter().collect());
    }
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    // SAFETY: per the operation's contract.
    if let Some(w) = unsafe { last(qp) } {
        // SAFETY: `list` holds `n` entries (verbs.h).
        w.data = SendData::Sges(unsafe { sges(list, n) });
    }
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    // SAFETY: per the operation's contract.
    if let Some(w) = unsafe { last(qp) } {
        // SAFETY: `length` readable bytes at `addr` (verbs.h).
        let d = unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), length) };
        w.data = SendData::Inline(d.to_vec());
    }
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    n: usize,
    bufs: *const ibv_data_buf,
) {
    let list: Vec<Sge> = (0..n)
        .map(|i| {
            // SAFETY: `bufs` holds `n` entries (verbs.h).
            let b = unsafe { &*bufs.add(i) };
            Sge {
                addr: b.addr as u64,
                length: b.length as u32,
                lkey: 0,
            }
        })
        .collect();
    // SAFETY: per the operation's contract.
    if let Some(w) = unsafe { last(qp) } {
        // SAFETY: each buffer is readable (verbs.h).
        w.data = SendData::Inline(unsafe { gather(&list) });
    }
}
