//! QPs and SRQs on ids. `rdma_create_qp` makes what the program left out as rdma-core
//! does (the id's PD, CQs with completion channels) and readies the QP for rdma_cm: an
//! RC QP goes to INIT, where rocexd's CM takes it on to RTR and RTS when the connection
//! is made; a UD QP goes all the way to RTS with rdma_cm's Q_Key.

use core::ffi::{c_int, c_uint};

use crate::abi::*;
use crate::id::Id;
use crate::registry::enter;
use crate::verbs::{self, Verbs};
use crate::{fail, symver};

/// Access an RC QP gets at INIT: what the kernel's CM settles with responder resources
/// (`cm_init_qp_init_attr`: remote write, and read and atomics), which rocexd's CM always
/// offers. rocexd does not set access flags when it moves the QP on.
const RC_ACCESS: c_uint = IBV_ACCESS_LOCAL_WRITE
    | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ
    | IBV_ACCESS_REMOTE_ATOMIC;

/// The attributes and mask of `state` for an id's QP of `qp_type`, as
/// `rdma_init_qp_attr` gives them before a connection settles anything; `None` for a
/// state only the connection decides (an RC QP's RTR and RTS, which rocexd sets).
pub fn init_attr(qp_type: c_int, state: c_int) -> Option<(ibv_qp_attr, c_int)> {
    let mut a = ibv_qp_attr {
        qp_state: state,
        ..ibv_qp_attr::default()
    };
    let ud = qp_type == IBV_QPT_UD;
    let mask = match state {
        IBV_QPS_INIT => {
            a.pkey_index = 0;
            a.port_num = 1;
            if ud {
                a.qkey = RDMA_UDP_QKEY;
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY
            } else {
                a.qp_access_flags = RC_ACCESS;
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
            }
        }
        IBV_QPS_RTR if ud => IBV_QP_STATE,
        IBV_QPS_RTS if ud => IBV_QP_STATE | IBV_QP_SQ_PSN,
        _ => return None,
    };
    Some((a, mask))
}

/// The masks of an RC QP's RTR and RTS as the kernel's CM gives them
/// (`cm_init_qp_rtr_attr`, `cm_init_qp_rts_attr`).
const RC_RTR_MASK: c_int = IBV_QP_STATE
    | IBV_QP_AV
    | IBV_QP_PATH_MTU
    | IBV_QP_DEST_QPN
    | IBV_QP_RQ_PSN
    | IBV_QP_MAX_DEST_RD_ATOMIC
    | IBV_QP_MIN_RNR_TIMER;
const RC_RTS_MASK: c_int = IBV_QP_STATE
    | IBV_QP_SQ_PSN
    | IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_MAX_QP_RD_ATOMIC;

/// What a connection settled for the local QP: the peer's address, and rocexd's event
/// with the peer's QPN, the PSNs, the path and the limits. For a request not yet
/// accepted, what the accept will settle (the REQ's QPN, PSN, path and limits, and the
/// PSN rocexd will send in the REP).
#[derive(Clone, Copy)]
pub struct Settled {
    /// The peer's address.
    pub peer: std::net::IpAddr,
    /// The daemon's event that settled it.
    pub event: rocex_cm_event,
}

impl Settled {
    /// RTR or RTS attributes and the kernel CM's mask (`cm_init_qp_rtr_attr`,
    /// `cm_init_qp_rts_attr`); `EINVAL` for another state.
    pub fn attr(&self, state: c_int) -> Result<(ibv_qp_attr, c_int), i32> {
        let mut a = ibv_qp_attr {
            qp_state: state,
            ..ibv_qp_attr::default()
        };
        let e = &self.event;
        match state {
            IBV_QPS_RTR => {
                a.ah_attr = ah_attr(self.peer, e.traffic_class);
                (a.path_mtu, a.dest_qp_num, a.rq_psn) =
                    (c_int::from(e.path_mtu), e.remote_qpn, e.rq_psn);
                (a.max_dest_rd_atomic, a.min_rnr_timer) = (e.max_dest_rd_atomic, 12);
                Ok((a, RC_RTR_MASK))
            }
            IBV_QPS_RTS => {
                (a.sq_psn, a.timeout, a.retry_cnt) = (e.sq_psn, e.timeout, e.retry_cnt);
                (a.rnr_retry, a.max_rd_atomic) = (e.rnr_retry, e.max_rd_atomic);
                Ok((a, RC_RTS_MASK))
            }
            _ => Err(libc::EINVAL),
        }
    }
}

/// The address vector of a RoCE path to `peer`, as the kernel's rdma_cm reports one (a
/// GRH with the peer's GID, the IPv4-mapped GID's index 1 as source, the path's traffic
/// class).
pub fn ah_attr(peer: std::net::IpAddr, traffic_class: u8) -> ibv_ah_attr {
    // SAFETY: all-zero is an empty ibv_ah_attr.
    let mut a: ibv_ah_attr = unsafe { core::mem::zeroed() };
    a.grh.dgid = crate::sockaddr::gid(peer);
    a.grh.sgid_index = 1;
    a.grh.hop_limit = 64;
    a.grh.traffic_class = traffic_class;
    a.is_global = 1;
    a.port_num = 1;
    a
}

/// An RC QP's RTR or RTS attributes and mask as the connection settled them: rocexd's CM
/// moved the id's QP with the REQ's and REP's values (the peer's QPN and PSN, the path
/// MTU, the resources), so they are read back from the QP. `EINVAL` while the QP is not
/// past INIT yet (before the REP), as the kernel's CM refuses before the exchange.
///
/// # Safety
///
/// `qp` is a QP of the bound libibverbs.
pub unsafe fn connected_attr(
    v: &Verbs,
    qp: *mut ibv_qp,
    state: c_int,
) -> Result<(ibv_qp_attr, c_int), i32> {
    let mask = match state {
        IBV_QPS_RTR => RC_RTR_MASK,
        IBV_QPS_RTS => RC_RTS_MASK,
        _ => return Err(libc::EINVAL),
    };
    let mut q = ibv_qp_attr::default();
    // SAFETY: all-zero is an empty ibv_qp_init_attr (NULL pointers, zero counts).
    let mut init: ibv_qp_init_attr = unsafe { core::mem::zeroed() };
    // SAFETY: per the contract; both outputs are writable.
    let r = unsafe { (v.ibv_query_qp)(qp, &mut q, RC_RTR_MASK | RC_RTS_MASK, &mut init) };
    if r != 0 {
        return Err(r);
    }
    if !(IBV_QPS_RTR..=IBV_QPS_RTS).contains(&q.qp_state) {
        return Err(libc::EINVAL);
    }
    let mut a = ibv_qp_attr {
        qp_state: state,
        ..ibv_qp_attr::default()
    };
    if state == IBV_QPS_RTR {
        (a.ah_attr, a.path_mtu, a.dest_qp_num, a.rq_psn) =
            (q.ah_attr, q.path_mtu, q.dest_qp_num, q.rq_psn);
        (a.max_dest_rd_atomic, a.min_rnr_timer) = (q.max_dest_rd_atomic, q.min_rnr_timer);
    } else {
        (a.sq_psn, a.timeout, a.retry_cnt) = (q.sq_psn, q.timeout, q.retry_cnt);
        (a.rnr_retry, a.max_rd_atomic) = (q.rnr_retry, q.max_rd_atomic);
    }
    Ok((a, mask))
}

/// Moves a new QP of an id as far as rdma_cm takes it before connecting; an errno.
fn ready(v: &Verbs, qp: *mut ibv_qp, qp_type: c_int) -> i32 {
    let states: &[c_int] = if qp_type == IBV_QPT_UD {
        &[IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS]
    } else {
        &[IBV_QPS_INIT]
    };
    for &s in states {
        let (mut a, mask) = init_attr(qp_type, s).expect("rdma_cm's own steps");
        // SAFETY: a QP of the bound libibverbs.
        let r = unsafe { (v.ibv_modify_qp)(qp, &mut a, mask) };
        if r != 0 {
            return r;
        }
    }
    0
}

/// A CQ of `size` with a completion channel of its own, for `rdma_create_qp`.
fn cq_pair(
    v: &Verbs,
    ctx: *mut ibv_context,
    size: u32,
) -> Option<(*mut ibv_comp_channel, *mut ibv_cq)> {
    // SAFETY: an open context of the bound libibverbs.
    let ch = unsafe { (v.ibv_create_comp_channel)(ctx) };
    if ch.is_null() {
        return None;
    }
    // SAFETY: as above; the channel belongs to the same context.
    let cq = unsafe { (v.ibv_create_cq)(ctx, size.max(1) as c_int, core::ptr::null_mut(), ch, 0) };
    if cq.is_null() {
        // SAFETY: just made, unused.
        unsafe { (v.ibv_destroy_comp_channel)(ch) };
        return None;
    }
    Some((ch, cq))
}

/// Destroys the CQs and channels `rdma_create_qp` made for `m`.
fn drop_cqs(v: &Verbs, m: &mut Id) {
    if !m.own_cqs {
        return;
    }
    let c = &mut m.c;
    // SAFETY: objects this library made for the id; the QP using them is gone.
    unsafe {
        if !c.recv_cq.is_null() {
            (v.ibv_destroy_cq)(c.recv_cq);
        }
        if !c.recv_cq_channel.is_null() {
            (v.ibv_destroy_comp_channel)(c.recv_cq_channel);
        }
        if !c.send_cq.is_null() && c.send_cq != c.recv_cq {
            (v.ibv_destroy_cq)(c.send_cq);
        }
        if !c.send_cq_channel.is_null() && c.send_cq_channel != c.recv_cq_channel {
            (v.ibv_destroy_comp_channel)(c.send_cq_channel);
        }
    }
    c.recv_cq = core::ptr::null_mut();
    c.recv_cq_channel = core::ptr::null_mut();
    c.send_cq = core::ptr::null_mut();
    c.send_cq_channel = core::ptr::null_mut();
    m.own_cqs = false;
}

/// Fills in the id's CQs where `attr` has none, making them when the id has none.
fn fill_cqs(v: &Verbs, m: &mut Id, attr: &mut ibv_qp_init_attr_ex) -> bool {
    let ctx = m.c.verbs;
    if attr.recv_cq.is_null() {
        if m.c.recv_cq.is_null() {
            let Some((ch, cq)) = cq_pair(v, ctx, attr.cap.max_recv_wr) else {
                return false;
            };
            (m.c.recv_cq_channel, m.c.recv_cq, m.own_cqs) = (ch, cq, true);
        }
        attr.recv_cq = m.c.recv_cq;
    }
    if attr.send_cq.is_null() {
        if m.c.send_cq.is_null() {
            let Some((ch, cq)) = cq_pair(v, ctx, attr.cap.max_send_wr) else {
                return false;
            };
            (m.c.send_cq_channel, m.c.send_cq, m.own_cqs) = (ch, cq, true);
        }
        attr.send_cq = m.c.send_cq;
    }
    true
}

/// `rdma_create_qp_ex`: the QP on the id's device (`EINVAL` for a PD of another
/// context or an id with a QP), readied for rdma_cm.
///
/// # Safety
///
/// `id` is a live id; `attr` points at a writable `ibv_qp_init_attr_ex`.
pub unsafe fn create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> c_int {
    if id.is_null() || attr.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: per the contract.
    let a = unsafe { &mut *attr };
    if m.c.verbs.is_null() || !m.c.qp.is_null() {
        return fail(libc::EINVAL);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.comp_mask |= IBV_QP_INIT_ATTR_PD;
        a.pd = m.c.pd;
    }
    // SAFETY: a PD of the bound libibverbs (ibv_pd starts with its context).
    if a.pd.is_null() || unsafe { (*a.pd).context } != m.c.verbs {
        return fail(libc::EINVAL);
    }
    if a.qp_type == 0 {
        a.qp_type = m.c.qp_type;
    }
    if !fill_cqs(v, m, a) {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOMEM);
        drop_cqs(v, m);
        return fail(e);
    }
    let qp = if a.comp_mask == IBV_QP_INIT_ATTR_PD {
        let mut basic = a.basic();
        // SAFETY: the id's PD; the attributes are complete.
        let qp = unsafe { (v.ibv_create_qp)(a.pd, &mut basic) };
        a.cap = basic.cap;
        qp
    } else {
        // SAFETY: the id's context is one of rocex's libibverbs.
        unsafe { verbs::create_qp_ex(m.c.verbs, a) }
    };
    if qp.is_null() {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOMEM);
        drop_cqs(v, m);
        return fail(e);
    }
    let e = ready(v, qp, a.qp_type);
    if e != 0 {
        // SAFETY: just made, unused.
        unsafe { (v.ibv_destroy_qp)(qp) };
        drop_cqs(v, m);
        return fail(e);
    }
    m.c.qp = qp;
    drop(g);
    0
}

/// `rdma_create_qp`: [`create_qp_ex`] with the id's PD when `pd` is NULL; the
/// attributes come back with the CQs and capacities used.
///
/// # Safety
///
/// `id` is a live id; `pd` NULL or a PD; `attr` a writable `ibv_qp_init_attr`.
pub unsafe fn create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let b = unsafe { &mut *attr };
    // SAFETY: an all-zero ibv_qp_init_attr_ex is its empty value.
    let mut x: ibv_qp_init_attr_ex = unsafe { core::mem::zeroed() };
    x.qp_context = b.qp_context;
    x.send_cq = b.send_cq;
    x.recv_cq = b.recv_cq;
    x.srq = b.srq;
    x.cap = b.cap;
    x.qp_type = b.qp_type;
    x.sq_sig_all = b.sq_sig_all;
    x.comp_mask = IBV_QP_INIT_ATTR_PD;
    x.pd = pd;
    // SAFETY: per the contract.
    let r = unsafe { create_qp_ex(id, &mut x) };
    if r == 0 {
        b.send_cq = x.send_cq;
        b.recv_cq = x.recv_cq;
        b.cap = x.cap;
        b.qp_type = x.qp_type;
    }
    r
}

/// `rdma_destroy_qp`: the QP, and the CQs `rdma_create_qp` made for it.
///
/// # Safety
///
/// `id` is a live id.
pub unsafe fn destroy_qp(id: *mut rdma_cm_id) {
    let Some((v, _g)) = enter() else {
        return;
    };
    if id.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return;
    };
    if !m.c.qp.is_null() {
        // SAFETY: the id's QP; the program is done with it.
        unsafe { (v.ibv_destroy_qp)(m.c.qp) };
        m.c.qp = core::ptr::null_mut();
    }
    drop_cqs(v, m);
}

/// `rdma_create_srq`: a basic SRQ on the id's PD (or `pd`), kept as `id->srq`.
///
/// # Safety
///
/// `id` is a live id; `pd` NULL or a PD; `attr` a writable `ibv_srq_init_attr`.
pub unsafe fn create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    if id.is_null() || attr.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, _g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let pd = if pd.is_null() { m.c.pd } else { pd };
    if pd.is_null() || !m.c.srq.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: a PD of the bound libibverbs; per the contract.
    let srq = unsafe { (v.ibv_create_srq)(pd, attr) };
    if srq.is_null() {
        return -1;
    }
    m.c.srq = srq;
    0
}

/// `rdma_create_srq_ex`: basic SRQs only (`EOPNOTSUPP` for XRC and tag matching, which
/// rocex does not have).
///
/// # Safety
///
/// `id` is a live id; `attr` a writable `ibv_srq_init_attr_ex`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let a = unsafe { &*attr };
    if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 && a.srq_type != IBV_SRQT_BASIC {
        return fail(libc::EOPNOTSUPP);
    }
    let pd = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 {
        a.pd
    } else {
        core::ptr::null_mut()
    };
    let mut basic = ibv_srq_init_attr {
        srq_context: a.srq_context,
        attr: a.attr,
    };
    // SAFETY: per the contract.
    unsafe { create_srq(id, pd, &mut basic) }
}

/// `rdma_destroy_srq`.
///
/// # Safety
///
/// `id` is a live id.
pub unsafe fn destroy_srq(id: *mut rdma_cm_id) {
    let Some((v, _g)) = enter() else {
        return;
    };
    if id.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return;
    };
    if !m.c.srq.is_null() {
        // SAFETY: the id's SRQ; the program is done with it.
        unsafe { (v.ibv_destroy_srq)(m.c.srq) };
        m.c.srq = core::ptr::null_mut();
    }
}

crate::export! {
    /// `rdma_create_qp_ex`.
    fn rdma_create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> c_int = create_qp_ex;
}

crate::export! {
    /// `rdma_create_qp`.
    fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int = create_qp;
}

crate::export! {
    /// `rdma_destroy_qp`.
    fn rdma_destroy_qp(id: *mut rdma_cm_id) = destroy_qp;
}

crate::export! {
    /// `rdma_create_srq`.
    fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int = create_srq;
}

crate::export! {
    /// `rdma_destroy_srq`.
    fn rdma_destroy_srq(id: *mut rdma_cm_id) = destroy_srq;
}

symver! {
    rdma_create_qp @ "RDMACM_1.0",
    rdma_create_qp_ex @ "RDMACM_1.0",
    rdma_destroy_qp @ "RDMACM_1.0",
    rdma_create_srq @ "RDMACM_1.0",
    rdma_create_srq_ex @ "RDMACM_1.0",
    rdma_destroy_srq @ "RDMACM_1.0",
}
