//! Queue pairs: create (RC, UC, UD), modify, query, destroy, and the data path of
//! `ibv_context.ops` (`ibv_post_send`, `ibv_post_recv`).
//!
//! Posting checks what rdma-core's providers check before a request reaches the ring (the
//! QP's state, SGE count, inline length, the opcode for the transport), answering with
//! their error codes; keys, addresses and lengths are checked by the engine and come back
//! as completion statuses.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint};
use std::sync::MutexGuard;
use std::sync::atomic::{AtomicI32, Ordering};

use rocex_shm::control::{qp_state_from_wire, qp_type_from_wire};
use rocex_verbs::{Access, Qp as VQp, QpInitAttr};
use rocex_verbs_types::{
    AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpType, RecvWr, Remote, SendData, SendFlags,
    SendOp, SendWr, Sge, SgeList, UdDest,
};

use crate::abi::*;
use crate::ah::Ah;
use crate::cq::Cq;
use crate::ctx::{Ctx, CtxState, Guarded, zeroed};
use crate::gid::gid_addr;
use crate::mr::Pd;
use crate::mw;
use crate::qp_caps::send_wqe_caps;
use crate::srq::Srq;
use crate::{errno_of, null_errno, qp_ex, symver, trace, unsupported};

/// A queue pair. `ibv_qp_ex` (whose prefix is `ibv_qp`) comes first.
#[repr(C)]
pub struct Qp {
    /// rdma-core's QP with the work-request functions.
    pub ex: ibv_qp_ex,
    /// The rocex-verbs QP.
    pub qp: Guarded<VQp>,
    /// Transport.
    pub ty: QpType,
    /// `sq_sig_all`: every send is signaled.
    pub sig_all: bool,
    /// Capabilities granted.
    pub cap: QpCap,
    /// The state as the library last learned it (`ibv_qp.state` is the program's copy).
    seen_state: AtomicI32,
    /// Work requests between `ibv_wr_start` and `ibv_wr_complete` (one thread per QP
    /// between the two, as the API requires).
    pub(crate) batch: UnsafeCell<qp_ex::Batch>,
}

impl Qp {
    /// # Safety
    ///
    /// `qp` is a QP of this library.
    pub unsafe fn from_ibv<'a>(qp: *mut ibv_qp) -> &'a Self {
        // SAFETY: `ex` (whose prefix is ibv_qp) is the first field of the repr(C) Qp.
        unsafe { &*qp.cast::<Self>() }
    }

    /// The context the QP belongs to.
    pub fn ctx(&self) -> &Ctx {
        // SAFETY: a QP's context outlives it.
        unsafe { Ctx::from_ibv(self.ex.qp_base.context) }
    }

    /// A request's `IBV_SEND_FENCE`, `IBV_SEND_SIGNALED` and `IBV_SEND_SOLICITED` bits
    /// (`send_flags`, or `wr_flags` of the work-request API); signaled always under
    /// `sq_sig_all`.
    pub(crate) fn send_flags(&self, bits: c_uint) -> SendFlags {
        SendFlags {
            fence: bits & 1 != 0,
            signaled: self.sig_all || bits & (1 << 1) != 0,
            solicited: bits & (1 << 2) != 0,
        }
    }

    /// The state as the library last learned it.
    pub(crate) fn state(&self) -> c_int {
        self.seen_state.load(Ordering::Acquire)
    }
}

/// Makes a QP from the fields `ibv_qp_init_attr` and its extended form share.
unsafe fn create(pd: *mut ibv_pd, a: &mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: per the callers' contracts.
    let p = unsafe { Pd::from_ibv(pd) };
    let Some(ty) = u8::try_from(a.qp_type).ok().and_then(qp_type_from_wire) else {
        unsupported("ibv_create_qp of this QP type", "EOPNOTSUPP");
        return null_errno(libc::EOPNOTSUPP);
    };
    if a.send_cq.is_null() || a.recv_cq.is_null() {
        return null_errno(libc::EINVAL);
    }
    let ctx = p.ctx();
    let g = ctx.lock();
    // SAFETY: CQs passed by the program are CQs of this library.
    let (scq, rcq) = unsafe { (Cq::from_ibv(a.send_cq), Cq::from_ibv(a.recv_cq)) };
    // Only rounding SGEs up needs the device's limit (one more request).
    let device_max_sge = if a.cap.max_inline_data / 16 > a.cap.max_send_sge {
        g.verbs.query_device().map_or(1, |d| d.max_sge)
    } else {
        u32::MAX
    };
    let (max_send_sge, max_inline_data) =
        send_wqe_caps(a.cap.max_send_sge, a.cap.max_inline_data, device_max_sge);
    let mut cap = QpCap {
        max_send_wr: a.cap.max_send_wr.max(1),
        max_recv_wr: a.cap.max_recv_wr.max(1),
        max_send_sge,
        max_recv_sge: a.cap.max_recv_sge.max(1),
        max_inline_data,
    };
    // SAFETY: a non-null SRQ is one of this library's.
    let srq = (!a.srq.is_null()).then(|| unsafe { Srq::from_ibv(a.srq) });
    if let Some(s) = srq {
        // The QP's own receive queue holds what the SRQ hands it (srq.rs).
        (cap.max_recv_wr, cap.max_recv_sge) = s.caps(&g);
    }
    let init = QpInitAttr {
        qp_type: ty,
        send_cq: scq.cq.get(&g),
        recv_cq: rcq.cq.get(&g),
        cap,
    };
    let vqp = match p.pd.get(&g).create_qp(&init) {
        Ok(q) => q,
        Err(e) => {
            trace("ibv_create_qp", &e);
            return null_errno(errno_of(&e));
        }
    };
    let granted = vqp.cap();
    a.cap = ibv_qp_cap {
        max_send_wr: granted.max_send_wr,
        max_recv_wr: granted.max_recv_wr,
        max_send_sge: granted.max_send_sge,
        max_recv_sge: granted.max_recv_sge,
        max_inline_data: granted.max_inline_data,
    };
    let qpn = vqp.qpn();
    drop(g);
    // SAFETY: all-zero is valid for every field of ibv_qp_ex (pointers, integers,
    // optional function pointers, pthread objects' static initializer).
    let mut ex: ibv_qp_ex = unsafe { core::mem::zeroed() };
    let b = &mut ex.qp_base;
    b.context = p.ibv.context;
    b.qp_context = a.qp_context;
    b.pd = pd;
    b.send_cq = a.send_cq;
    b.recv_cq = a.recv_cq;
    b.handle = qpn;
    b.qp_num = qpn;
    b.state = 0;
    b.qp_type = a.qp_type;
    b.srq = a.srq;
    b.mutex = zeroed();
    b.cond = zeroed();
    qp_ex::install(&mut ex);
    let qp = Box::into_raw(Box::new(Qp {
        ex,
        qp: Guarded::new(vqp),
        ty,
        sig_all: a.sq_sig_all != 0,
        cap: granted,
        seen_state: AtomicI32::new(0),
        batch: UnsafeCell::new(qp_ex::Batch::default()),
    }));
    let mut g = ctx.lock();
    g.qp_types.insert(qpn, ty);
    if let Some(s) = srq {
        g.srq_of.insert(qpn, a.srq);
        s.attach(&g, qp);
    }
    qp.cast()
}

/// `ibv_create_qp`.
///
/// # Safety
///
/// `pd` is a PD of this library; `init` is readable and writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: per the contract.
    unsafe { create(pd, &mut *init) }
}

/// `create_qp_ex` of the extended operations (`ibv_create_qp_ex`): a PD, and the send
/// operations of `ibv_qp_ex`; other extensions (XRC, RSS, TSO, create flags) are refused.
pub(crate) unsafe extern "C" fn create_qp_ex(
    _context: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: verbs.h passes a readable and writable attribute struct.
    let a = unsafe { &mut *attr };
    const PD: u32 = 1;
    const SEND_OPS_FLAGS: u32 = 1 << 6;
    if a.comp_mask & !(PD | SEND_OPS_FLAGS) != 0 || a.comp_mask & PD == 0 {
        unsupported(
            "ibv_create_qp_ex with attributes beyond a PD and send ops",
            "EOPNOTSUPP",
        );
        return null_errno(libc::EOPNOTSUPP);
    }
    let mut base = a.basic();
    // SAFETY: a PD of this library, per verbs.h's contract.
    let qp = unsafe { create(a.pd, &mut base) };
    a.cap = base.cap;
    qp
}

/// `ibv_qp_to_qp_ex`: every QP has the work-request functions.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    qp.cast()
}

/// `ibv_modify_qp`. RoCE needs a GRH in the address vector (rdma-core refuses one
/// without, EINVAL).
///
/// # Safety
///
/// `qp` is a QP of this library; `attr` is readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: per the contract.
    let (q, a) = unsafe { (Qp::from_ibv(qp), &*attr) };
    let m = AttrMask(mask as u32);
    let mut r = QpAttr::default();
    if m.contains(AttrMask::STATE) {
        let Some(s) = u8::try_from(a.qp_state).ok().and_then(qp_state_from_wire) else {
            return libc::EINVAL;
        };
        r.qp_state = s;
    }
    if m.contains(AttrMask::ACCESS_FLAGS) {
        let Some(acc) = Access::from_bits(a.qp_access_flags) else {
            return libc::EINVAL;
        };
        r.qp_access_flags = acc;
    }
    r.pkey_index = a.pkey_index;
    r.port_num = if m.contains(AttrMask::PORT) {
        a.port_num
    } else {
        1
    };
    r.qkey = a.qkey;
    if m.contains(AttrMask::AV) {
        if a.ah_attr.is_global == 0 {
            trace("ibv_modify_qp", &"RoCE needs a GRH (is_global) in ah_attr");
            return libc::EINVAL;
        }
        r.ah_attr = Some(AddressVector {
            dest: gid_addr(&a.ah_attr.grh.dgid.raw),
        });
        // The IP TOS of the QP's packets, as rxe takes it (`docs/congestion.md`).
        r.traffic_class = a.ah_attr.grh.traffic_class;
    }
    if m.contains(AttrMask::PATH_MTU) {
        let Some(mtu) = u8::try_from(a.path_mtu).ok().and_then(Mtu::from_ibv) else {
            return libc::EINVAL;
        };
        r.path_mtu = mtu;
    }
    r.timeout = a.timeout;
    r.retry_cnt = a.retry_cnt;
    r.rnr_retry = a.rnr_retry;
    r.rq_psn = a.rq_psn;
    r.sq_psn = a.sq_psn;
    r.max_rd_atomic = a.max_rd_atomic;
    r.max_dest_rd_atomic = a.max_dest_rd_atomic;
    r.min_rnr_timer = a.min_rnr_timer;
    r.dest_qp_num = a.dest_qp_num;
    let g = q.ctx().lock();
    match q.qp.get(&g).modify(&r, m) {
        Ok(()) => {
            if m.contains(AttrMask::STATE) {
                q.seen_state.store(a.qp_state, Ordering::Release);
                // SAFETY: the program's QP, written under the context's lock.
                unsafe { (*qp).state = a.qp_state };
                if let Some(&srq) = g.srq_of.get(&q.ex.qp_base.qp_num) {
                    // SAFETY: a QP's SRQ outlives it.
                    let s = unsafe { Srq::from_ibv(srq) };
                    s.qp_state(&g, q, a.qp_state);
                    s.refill(&g);
                }
            }
            0
        }
        Err(e) => {
            trace("ibv_modify_qp", &e);
            errno_of(&e)
        }
    }
}

/// An address vector as rdma-core reports it for RoCE: a GRH with the peer's GID.
pub(crate) fn ah_attr_of(dest: std::net::IpAddr) -> ibv_ah_attr {
    let dgid = match dest {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(a) => a.octets(),
    };
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: dgid },
            flow_label: 0,
            sgid_index: 1,
            hop_limit: 64,
            traffic_class: 0,
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: 1,
    }
}

/// `ibv_query_qp`: every attribute, whatever the mask asks.
///
/// # Safety
///
/// `qp` is a QP of this library; `attr` and `init` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: per the contract.
    let q = unsafe { Qp::from_ibv(qp) };
    let g = q.ctx().lock();
    let (a, cap) = match q.qp.get(&g).query() {
        Ok(x) => x,
        Err(e) => return errno_of(&e),
    };
    drop(g);
    let cap = ibv_qp_cap {
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
    };
    // SAFETY: all-zero is valid for ibv_qp_attr (integers only).
    let mut out: ibv_qp_attr = unsafe { core::mem::zeroed() };
    out.qp_state = a.qp_state as c_int;
    out.cur_qp_state = a.qp_state as c_int;
    out.path_mtu = a.path_mtu as c_int;
    out.qkey = a.qkey;
    out.rq_psn = a.rq_psn;
    out.sq_psn = a.sq_psn;
    out.dest_qp_num = a.dest_qp_num;
    out.qp_access_flags = a.qp_access_flags.bits();
    out.cap = cap;
    if let Some(av) = a.ah_attr {
        out.ah_attr = ah_attr_of(av.dest);
        out.ah_attr.grh.traffic_class = a.traffic_class;
    }
    out.pkey_index = a.pkey_index;
    out.max_rd_atomic = a.max_rd_atomic;
    out.max_dest_rd_atomic = a.max_dest_rd_atomic;
    out.min_rnr_timer = a.min_rnr_timer;
    out.port_num = a.port_num;
    out.timeout = a.timeout;
    out.retry_cnt = a.retry_cnt;
    out.rnr_retry = a.rnr_retry;
    // SAFETY: writable per the contract.
    unsafe {
        attr.write(out);
        if !init.is_null() {
            let b = &q.ex.qp_base;
            init.write(ibv_qp_init_attr {
                qp_context: b.qp_context,
                send_cq: b.send_cq,
                recv_cq: b.recv_cq,
                srq: b.srq,
                cap,
                qp_type: b.qp_type,
                sq_sig_all: c_int::from(q.sig_all),
            });
        }
        (*qp).state = out.qp_state;
    }
    q.seen_state.store(out.qp_state, Ordering::Release);
    0
}

/// `ibv_destroy_qp`.
///
/// # Safety
///
/// `qp` is a QP of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: per the contract.
    let q = unsafe { Qp::from_ibv(qp) };
    let ctx = q.ctx();
    let mut g = ctx.lock();
    let qpn = q.ex.qp_base.qp_num;
    g.qp_types.remove(&qpn);
    if let Some(srq) = g.srq_of.remove(&qpn) {
        // SAFETY: a QP's SRQ outlives it.
        unsafe { Srq::from_ibv(srq) }.detach(&g, q);
    }
    // SAFETY: made by Box::into_raw in `create`; dropped under the lock.
    drop(unsafe { Box::from_raw(qp.cast::<Qp>()) });
    drop(g);
    0
}

/// The SGEs of a C request.
///
/// # Safety
///
/// `list` points at `n` entries (or `n` is 0).
pub(crate) unsafe fn sges(list: *const ibv_sge, n: usize) -> SgeList {
    (0..n)
        .map(|i| {
            // SAFETY: per the contract.
            let s = unsafe { *list.add(i) };
            Sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            }
        })
        .collect()
}

/// The bytes an inline request carries, gathered from its SGEs' addresses.
///
/// # Safety
///
/// Each SGE names readable memory of the program.
pub(crate) unsafe fn gather(sges: &[Sge]) -> Vec<u8> {
    let mut v = Vec::with_capacity(sges.iter().map(|s| s.length as usize).sum());
    for s in sges {
        // SAFETY: per the contract.
        v.extend_from_slice(unsafe {
            core::slice::from_raw_parts(s.addr as usize as *const u8, s.length as usize)
        });
    }
    v
}

/// A C send request as the engine's, or the errno rdma-core's providers answer.
///
/// # Safety
///
/// `w` is a valid request whose lists and AH are the program's.
unsafe fn send_wr(q: &Qp, w: &ibv_send_wr) -> Result<SendWr, c_int> {
    let n = usize::try_from(w.num_sge).map_err(|_| libc::EINVAL)?;
    let inline = w.send_flags & (1 << 3) != 0;
    if !inline && n > q.cap.max_send_sge as usize {
        return Err(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let list = unsafe { sges(w.sg_list, n) };
    let (raddr, rkey) = w.rdma();
    let remote = Remote { addr: raddr, rkey };
    let imm = u32::from_be(w.imm_data);
    let op = match w.opcode {
        0 => SendOp::Write(remote),
        1 => SendOp::WriteWithImm(remote, imm),
        2 => SendOp::Send,
        3 => SendOp::SendWithImm(imm),
        4 => SendOp::Read(remote),
        5 => SendOp::CompareSwap {
            remote: Remote {
                addr: w.wr.remote_addr,
                rkey: w.wr.rkey,
            },
            compare: w.wr.compare_add,
            swap: w.wr.swap,
        },
        6 => SendOp::FetchAdd {
            remote: Remote {
                addr: w.wr.remote_addr,
                rkey: w.wr.rkey,
            },
            add: w.wr.compare_add,
        },
        9 => SendOp::SendWithInv(w.imm_data),
        _ => {
            unsupported("ibv_post_send of this opcode", "EINVAL");
            return Err(libc::EINVAL);
        }
    };
    let data = if inline {
        // SAFETY: per the contract.
        let d = unsafe { gather(&list) };
        if d.len() > q.cap.max_inline_data as usize {
            return Err(libc::EINVAL);
        }
        SendData::Inline(d)
    } else {
        SendData::Sges(list)
    };
    let ud = if q.ty == QpType::Ud {
        let (ah, qpn, qkey) = w.ud();
        if ah.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: an AH of this library.
        let ah = unsafe { Ah::from_ibv(ah) };
        Some(UdDest {
            dest: ah.dest,
            remote_qpn: qpn,
            remote_qkey: qkey,
        })
    } else {
        None
    };
    check_op(q.ty, &op)?;
    Ok(SendWr {
        wr_id: w.wr_id,
        op,
        data,
        flags: q.send_flags(w.send_flags),
        ud,
    })
}

/// The operations each transport allows (UC: SEND and WRITE; UD: SEND), EINVAL otherwise.
pub(crate) fn check_op(ty: QpType, op: &SendOp) -> Result<(), c_int> {
    let ok = match ty {
        QpType::Rc => true,
        QpType::Uc => matches!(
            op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write(_) | SendOp::WriteWithImm(..)
        ),
        QpType::Ud => matches!(op, SendOp::Send | SendOp::SendWithImm(_)),
    };
    if ok { Ok(()) } else { Err(libc::EINVAL) }
}

/// Whether the QP takes send requests: IBV_QPS_RTS and beyond, as rxe (EINVAL before).
/// The state the library saw last may be old: rocexd's CM moves QPs itself (private.rs).
pub(crate) fn sends_allowed(q: &Qp, g: &MutexGuard<'_, CtxState>) -> bool {
    if q.state() >= 3 {
        return true;
    }
    let now = q.qp.get(g).query().map_or(0, |(a, _)| a.qp_state as c_int);
    q.seen_state.store(now, Ordering::Release);
    now >= 3
}

/// Posts converted requests: ENOMEM when the send queue is full (none posted).
pub(crate) fn post_all(q: &Qp, wrs: &[SendWr]) -> Result<(), c_int> {
    let g = q.ctx().lock();
    if !sends_allowed(q, &g) {
        return Err(libc::EINVAL);
    }
    q.qp.get(&g).post_send(wrs).map_err(|e| {
        trace("ibv_post_send", &e);
        errno_of(&e)
    })
}

/// `post_send` of `ibv_context.ops` (`ibv_post_send`).
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    mut wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: verbs.h passes a QP of this library.
    let q = unsafe { Qp::from_ibv(qp) };
    let mut first = wr;
    let mut wrs = Vec::new();
    let mut failed = None;
    while !wr.is_null() {
        // SAFETY: the program's list of requests.
        let w = unsafe { &*wr };
        if w.opcode == mw::WR_LOCAL_INV || w.opcode == mw::WR_BIND_MW {
            // The requests before it reach the ring first; then rocexd executes it.
            if let Err(e) = post_all(q, &wrs) {
                // SAFETY: `bad` is writable (verbs.h).
                unsafe { *bad = first };
                return e;
            }
            wrs.clear();
            let g = q.ctx().lock();
            let no_mw = w.opcode == mw::WR_BIND_MW && w.bind_mw[0] == 0;
            if q.ty == QpType::Ud || no_mw || !sends_allowed(q, &g) {
                drop(g);
                failed = Some((wr, libc::EINVAL));
                break;
            }
            mw::local_op(q, &g, w);
            first = w.next;
        } else {
            // SAFETY: as above.
            match unsafe { send_wr(q, w) } {
                Ok(s) => wrs.push(s),
                Err(e) => {
                    failed = Some((wr, e));
                    break;
                }
            }
        }
        wr = w.next;
    }
    if let Err(e) = post_all(q, &wrs) {
        // SAFETY: `bad` is writable (verbs.h).
        unsafe { *bad = first };
        return e;
    }
    match failed {
        Some((w, e)) => {
            // SAFETY: as above.
            unsafe { *bad = w };
            e
        }
        None => 0,
    }
}

/// `post_recv` of `ibv_context.ops` (`ibv_post_recv`).
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    mut wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: verbs.h passes a QP of this library.
    let q = unsafe { Qp::from_ibv(qp) };
    let first = wr;
    // A QP with an SRQ takes its receives from the SRQ (rdma-core: EINVAL).
    if q.state() == 0 || !q.ex.qp_base.srq.is_null() {
        // SAFETY: `bad` is writable (verbs.h).
        unsafe { *bad = first };
        return libc::EINVAL;
    }
    let mut wrs = Vec::new();
    while !wr.is_null() {
        // SAFETY: the program's list of requests.
        let w = unsafe { &*wr };
        let n = usize::try_from(w.num_sge).unwrap_or(usize::MAX);
        if n > q.cap.max_recv_sge as usize {
            // SAFETY: as above.
            unsafe { *bad = wr };
            return libc::EINVAL;
        }
        wrs.push(RecvWr {
            wr_id: w.wr_id,
            // SAFETY: the request's list of `n` entries.
            sges: unsafe { sges(w.sg_list, n) },
        });
        wr = w.next;
    }
    let g = q.ctx().lock();
    match q.qp.get(&g).post_recv(&wrs) {
        Ok(()) => 0,
        Err(e) => {
            trace("ibv_post_recv", &e);
            // SAFETY: as above.
            unsafe { *bad = first };
            errno_of(&e)
        }
    }
}

symver! {
    ibv_create_qp @ "IBVERBS_1.1",
    ibv_qp_to_qp_ex @ "IBVERBS_1.6",
    ibv_modify_qp @ "IBVERBS_1.1",
    ibv_query_qp @ "IBVERBS_1.1",
    ibv_destroy_qp @ "IBVERBS_1.1",
}
