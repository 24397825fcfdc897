//! Connections: listen, connect, accept, reject and disconnect through rocexd's CM
//! (`docs/daemon.md` "rdma_cm"), which sends the MADs and moves the QP; the outcome comes
//! back as an event the poller hands to the id's channel. Also the calls rocex answers
//! without the daemon: establish, notify, `rdma_init_qp_attr`, and multicast and ECE,
//! which rocex does not have.

use core::ffi::{c_int, c_void};
use std::net::IpAddr;

use crate::abi::*;
use crate::id::{Id, State, bind, settle};
use crate::registry::enter;
use crate::{channel, fail, poller, qp, status, symver};

/// `rdma_listen`: the id's device, or every device for a wildcard address, takes REQs
/// for its port. An id not bound yet is bound to the IPv4 wildcard and a free port, as
/// the kernel does.
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, _backlog: c_int) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    let me = id.cast::<Id>();
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    match m.state {
        State::Listening => return 0,
        State::Idle => {
            let any = std::net::SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0);
            let e = bind(v, &mut g, m, any);
            if e != 0 {
                return fail(e);
            }
        }
        State::Bound => {}
        _ => return fail(libc::EINVAL),
    }
    // A wildcard listen takes the devices whose address its family takes.
    let devs: Vec<usize> = match m.dev {
        Some(i) => vec![i],
        None => (0..g.devs(v).len())
            .filter(|&i| m.port_use.takes(g.dev(i).addr))
            .collect(),
    };
    let (ps, port) = (m.daemon_ps(), m.port);
    if devs
        .iter()
        .any(|&i| g.listeners.get(&(i, ps, port)).is_some_and(|&l| l != me))
    {
        return fail(libc::EADDRINUSE);
    }
    for &i in &devs {
        if g.listening.contains(&(i, ps, port)) {
            continue;
        }
        // SAFETY: the device's open context.
        let r = unsafe { (v.rocex_cm_listen)(g.dev(i).ctx, ps, port) };
        if r != 0 {
            return fail(r);
        }
        g.listening.insert((i, ps, port));
    }
    for i in devs {
        g.listeners.insert((i, ps, port), me);
    }
    m.state = State::Listening;
    poller::start(&mut g);
    0
}

/// How much private data the id's message may carry: `rc` bytes, or `sidr` in the SIDR
/// message that stands for it on a UD id.
fn max_private_data(m: &Id, rc: usize, sidr: usize) -> usize {
    if m.c.qp_type == IBV_QPT_UD { sidr } else { rc }
}

/// The private data of `param`, or an errno when it is longer than `max`.
///
/// # Safety
///
/// `param` is NULL or a connection parameter block whose data pointer covers its length.
unsafe fn private_data<'a>(param: *const rdma_conn_param, max: usize) -> Result<&'a [u8], i32> {
    if param.is_null() {
        return Ok(&[]);
    }
    // SAFETY: per the contract.
    let p = unsafe { &*param };
    let n = usize::from(p.private_data_len);
    if n == 0 || p.private_data.is_null() {
        return Ok(&[]);
    }
    if n > max {
        return Err(libc::EINVAL);
    }
    // SAFETY: per the contract.
    Ok(unsafe { core::slice::from_raw_parts(p.private_data.cast::<u8>(), n) })
}

/// `rdma_connect`: rocexd sends the REQ for the id's QP, which must exist (rocex has no
/// connect for a QP the program made itself: `EINVAL`), with up to 56 bytes of private
/// data; `ESTABLISHED`, `REJECTED` or `UNREACHABLE` follows. The REQ's resources and
/// retry counts are rocexd's (`docs/daemon.md`), not `param`'s. On a UD id rocexd sends a
/// SIDR_REQ instead, with up to 180 bytes: `ESTABLISHED` brings the service's QPN, Q_Key
/// and address vector, `UNREACHABLE` a refusal or silence.
///
/// # Safety
///
/// `id` is a live id; `param` NULL or a connection parameter block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    let me = id.cast::<Id>();
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let (State::RouteResolved, Some(d), Some(dst)) = (m.state, m.dev, m.dst()) else {
        return fail(libc::EINVAL);
    };
    if m.c.qp.is_null() {
        return fail(libc::EINVAL);
    }
    let max = max_private_data(
        m,
        channel::REQ_PRIVATE_DATA_LEN,
        channel::SIDR_REQ_PRIVATE_DATA_LEN,
    );
    // SAFETY: per the contract.
    let data = match unsafe { private_data(param, max) } {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let (family, raw) = match dst.ip() {
        IpAddr::V4(a) => {
            let mut r = [0u8; 16];
            r[..4].copy_from_slice(&a.octets());
            (libc::AF_INET as u32, r)
        }
        IpAddr::V6(a) => (libc::AF_INET6 as u32, a.octets()),
    };
    let mut cid = 0;
    // SAFETY: the id's QP; the buffers live across the call.
    let r = unsafe {
        (v.rocex_cm_connect)(
            m.c.qp,
            family,
            &raw,
            dst.port(),
            m.port,
            m.tos.unwrap_or(0),
            data.as_ptr(),
            data.len(),
            &mut cid,
        )
    };
    if r != 0 {
        return fail(r);
    }
    m.state = State::Connecting(cid);
    g.conns.insert((d, cid), me);
    poller::start(&mut g);
    // SAFETY: a live id.
    unsafe { settle(me, g) }
}

/// `rdma_accept`: rocexd moves the id's QP to RTS and sends the REP, with up to 196 bytes
/// of `param`'s private data (more: `EINVAL`, as `ib_send_cm_rep`), which the peer's
/// `ESTABLISHED` event carries; `ESTABLISHED` follows the peer's RTU. On a UD id rocexd
/// answers the SIDR_REQ with the QP's number and Q_Key and up to 136 bytes; no event
/// follows, as in the kernel's rdma_cm.
///
/// # Safety
///
/// `id` is a live id; `param` NULL or a connection parameter block.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    let me = id.cast::<Id>();
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let (State::Requested(cid), Some(d)) = (m.state, m.dev) else {
        return fail(libc::EINVAL);
    };
    if m.c.qp.is_null() {
        return fail(libc::EINVAL);
    }
    let ud = m.c.qp_type == IBV_QPT_UD;
    let max = max_private_data(
        m,
        channel::REP_PRIVATE_DATA_LEN,
        channel::SIDR_REP_PRIVATE_DATA_LEN,
    );
    // SAFETY: per the contract.
    let data = match unsafe { private_data(param, max) } {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    // SAFETY: the id's QP; the data lives across the call.
    let r = unsafe { (v.rocex_cm_accept)(m.c.qp, cid, data.as_ptr(), data.len()) };
    if r != 0 {
        return fail(r);
    }
    if ud {
        // The SIDR_REP ends the exchange: no event follows and rocexd forgets it.
        g.conns.remove(&(d, cid));
        m.state = State::Done;
        return 0;
    }
    m.state = State::Connecting(cid);
    // SAFETY: a live id.
    unsafe { settle(me, g) }
}

/// `rdma_reject`: rocexd sends a REJ (consumer reason) with up to 148 bytes of private
/// data (more: `EINVAL`, as `ib_send_cm_rej`), which the peer's `REJECTED` event
/// carries; on a UD id a SIDR_REP with status 2 (rejected) and up to 136 bytes, the
/// peer's `UNREACHABLE`.
///
/// # Safety
///
/// `id` is a live id; `private_data` NULL or `private_data_len` readable bytes.
pub unsafe fn reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let (State::Requested(cid), Some(d)) = (m.state, m.dev) else {
        return fail(libc::EINVAL);
    };
    let n = usize::from(private_data_len);
    let max = max_private_data(
        m,
        channel::REJ_PRIVATE_DATA_LEN,
        channel::SIDR_REP_PRIVATE_DATA_LEN,
    );
    if n > max {
        return fail(libc::EINVAL);
    }
    let data = if private_data.is_null() { 0 } else { n };
    // SAFETY: the device's open context; the caller's data covers its length.
    let r = unsafe { (v.rocex_cm_reject)(g.dev(d).ctx, cid, private_data.cast(), data) };
    g.conns.remove(&(d, cid));
    m.state = State::Done;
    status(r)
}

/// `rdma_disconnect`: rocexd moves the QP to ERROR and sends a DREQ; both ends get
/// `DISCONNECTED`. Again on a connection already down is 0, as in the kernel
/// (`rdma_disconnect` answers a DREQ it cannot send with a DREP, or nothing).
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((v, g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    match (m.state, m.dev) {
        (State::Connected(cid) | State::Connecting(cid), Some(d)) => {
            // SAFETY: the device's open context.
            let r = unsafe { (v.rocex_cm_disconnect)(g.dev(d).ctx, cid) };
            // ENOENT: the daemon closed it first (the peer's DREQ crossed ours).
            status(if r == libc::ENOENT { 0 } else { r })
        }
        (State::Done, _) => 0,
        _ => fail(libc::EINVAL),
    }
}

/// `rdma_establish`: rocexd sends the RTU itself once the QP is ready, so this only
/// confirms a connection in progress or made (`EINVAL` otherwise).
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    connected(id)
}

/// `rdma_notify`: rocexd's CM learns of established connections from the RTU or the
/// first packets itself; 0 on a connection, `EINVAL` otherwise.
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, _event: c_int) -> c_int {
    connected(id)
}

/// 0 for an id with a connection under way or made, else `EINVAL`.
fn connected(id: *mut rdma_cm_id) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((_, _g)) = enter() else {
        return -1;
    };
    // SAFETY: the caller passes a live id.
    match unsafe { Id::of(id) }.map(|m| m.state) {
        Some(State::Connecting(_) | State::Connected(_) | State::Requested(_)) => 0,
        _ => fail(libc::EINVAL),
    }
}

/// `rdma_init_qp_attr`: INIT (and a UD QP's RTR and RTS) as `rdma_create_qp` uses them;
/// an RC QP's RTR and RTS as the connection settled them on the id's QP
/// ([`qp::connected_attr`]), or, on a request not yet accepted, as the accept will settle
/// them ([`qp::Settled`]: the REQ's QPN and PSN, and the PSN the REP will carry, as the
/// kernel's CM answers in its REQ_RCVD state); `EINVAL` on a connect not yet answered.
///
/// # Safety
///
/// `id` is a live id; `attr` and `mask` are writable, `attr->qp_state` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_attr,
    mask: *mut c_int,
) -> c_int {
    if id.is_null() || attr.is_null() || mask.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: per the contract.
    let a = unsafe { &mut *attr };
    if m.c.verbs.is_null() {
        return fail(libc::EINVAL);
    }
    let connected = matches!(a.qp_state, IBV_QPS_RTR | IBV_QPS_RTS) && m.c.qp_type != IBV_QPT_UD;
    let got = match (connected, m.state, m.settled) {
        (false, ..) => qp::init_attr(m.c.qp_type, a.qp_state).ok_or(libc::EINVAL),
        (true, State::Requested(_), Some(s)) => s.attr(a.qp_state),
        (true, ..) => {
            let Some(v) = crate::verbs::verbs() else {
                return -1;
            };
            if m.c.qp.is_null() {
                return fail(libc::EINVAL);
            }
            // SAFETY: the id's QP.
            unsafe { qp::connected_attr(v, m.c.qp, a.qp_state) }
        }
    };
    match got {
        Ok((x, k)) => {
            *a = x;
            // SAFETY: per the contract.
            unsafe { *mask = k };
            0
        }
        Err(e) => fail(e),
    }
}

/// `rdma_join_multicast`: rocex has no multicast (`EOPNOTSUPP`), said once on stderr so
/// that a program's bare "Operation not supported" (mckey's) has its reason.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_join_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
    _context: *mut c_void,
) -> c_int {
    no_multicast()
}

/// `EOPNOTSUPP` for a multicast join, with the line on stderr saying why.
fn no_multicast() -> c_int {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "librdmacm (rocex): rdma_join_multicast: rocex has no multicast groups \
             (docs/verbs.md)"
        );
    });
    fail(libc::EOPNOTSUPP)
}

/// `rdma_join_multicast_ex`: rocex has no multicast (`EOPNOTSUPP`).
#[unsafe(no_mangle)]
pub extern "C" fn rdma_join_multicast_ex(
    _id: *mut rdma_cm_id,
    _attr: *mut rdma_cm_join_mc_attr_ex,
    _context: *mut c_void,
) -> c_int {
    no_multicast()
}

/// `rdma_leave_multicast`: no group was joined, so `EADDRNOTAVAIL` as rdma-core answers
/// for an address it has not joined.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_leave_multicast(_id: *mut rdma_cm_id, _addr: *mut libc::sockaddr) -> c_int {
    fail(libc::EADDRNOTAVAIL)
}

/// `rdma_set_local_ece`: rocexd's CM has no enhanced connection establishment.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_set_local_ece(_id: *mut rdma_cm_id, _ece: *mut ibv_ece) -> c_int {
    fail(libc::EOPNOTSUPP)
}

/// `rdma_get_remote_ece`: as [`rdma_set_local_ece`].
#[unsafe(no_mangle)]
pub extern "C" fn rdma_get_remote_ece(_id: *mut rdma_cm_id, _ece: *mut ibv_ece) -> c_int {
    fail(libc::EOPNOTSUPP)
}

/// `rdma_reject_ece`: as [`rdma_set_local_ece`].
#[unsafe(no_mangle)]
pub extern "C" fn rdma_reject_ece(
    _id: *mut rdma_cm_id,
    _private_data: *const c_void,
    _len: u8,
) -> c_int {
    fail(libc::EOPNOTSUPP)
}

crate::export! {
    /// `rdma_reject`.
    fn rdma_reject(id: *mut rdma_cm_id, private_data: *const c_void, private_data_len: u8) -> c_int = reject;
}

symver! {
    rdma_listen @ "RDMACM_1.0",
    rdma_connect @ "RDMACM_1.0",
    rdma_accept @ "RDMACM_1.0",
    rdma_reject @ "RDMACM_1.0",
    rdma_disconnect @ "RDMACM_1.0",
    rdma_notify @ "RDMACM_1.0",
    rdma_join_multicast @ "RDMACM_1.0",
    rdma_leave_multicast @ "RDMACM_1.0",
    rdma_join_multicast_ex @ "RDMACM_1.1",
    rdma_establish @ "RDMACM_1.2",
    rdma_init_qp_attr @ "RDMACM_1.2",
    rdma_set_local_ece @ "RDMACM_1.3",
    rdma_get_remote_ece @ "RDMACM_1.3",
    rdma_reject_ece @ "RDMACM_1.3",
}
