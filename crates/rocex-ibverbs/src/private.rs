//! `ROCEX_PRIVATE_1`: what rocex's librdmacm needs from this library. rdma_cm must drive
//! rocexd's CM through the control connection that owns the QP, so these calls run the
//! rocex-verbs CM requests (docs/daemon.md "rdma_cm") on the connection behind an
//! `ibv_context`, under its lock, naming QPs by their `ibv_qp`. Not a public interface.

use core::ffi::c_int;
use std::net::IpAddr;

use rocex_shm::control::{CM_REJ_PRIVATE_DATA_LEN, CM_REP_PRIVATE_DATA_LEN};

use crate::abi::*;
use crate::ctx::Ctx;
use crate::qp::Qp;
use crate::{errno_of, symver};

const _: () = assert!(CM_REP_PRIVATE_DATA_LEN == ROCEX_CM_PRIVATE_DATA_LEN);

fn addr_of(family: u32, raw: &[u8; 16]) -> Option<IpAddr> {
    match family as c_int {
        libc::AF_INET => Some(IpAddr::from([raw[0], raw[1], raw[2], raw[3]])),
        libc::AF_INET6 => Some(IpAddr::from(*raw)),
        _ => None,
    }
}

/// The device's own address: its family, and the address in `addr`.
///
/// # Safety
///
/// `context` is a context of this library; `addr` points at 16 writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_context_addr(
    context: *mut ibv_context,
    addr: *mut [u8; 16],
) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let (f, raw) = match ctx.addr {
        IpAddr::V4(a) => {
            let mut r = [0; 16];
            r[..4].copy_from_slice(&a.octets());
            (libc::AF_INET, r)
        }
        IpAddr::V6(a) => (libc::AF_INET6, a.octets()),
    };
    // SAFETY: per the contract.
    unsafe { *addr = raw };
    f
}

/// `rdma_listen` on `port` of rdma_cm port space `ps`: 0 or an errno.
///
/// # Safety
///
/// `context` is a context of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_listen(context: *mut ibv_context, ps: u16, port: u16) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    ctx.lock()
        .verbs
        .cm_listen_in(ps, port)
        .map_or_else(|e| errno_of(&e), |()| 0)
}

/// The last listening id of `port` in port space `ps` destroyed: 0 or an errno.
///
/// # Safety
///
/// `context` is a context of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_unlisten(context: *mut ibv_context, ps: u16, port: u16) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    ctx.lock()
        .verbs
        .cm_unlisten_in(ps, port)
        .map_or_else(|e| errno_of(&e), |()| 0)
}

/// `rdma_connect` of `qp` (RC in INIT, or UD: SIDR) from rdma_cm port `src_port` to
/// `family`/`addr`:`port` with traffic class `tos`: the connection's id in `id`; 0 or an
/// errno.
///
/// # Safety
///
/// `qp` is a QP of this library; `addr` points at 16 bytes, `pdata` at `len` bytes,
/// `id` is writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments, reason = "a C function's flat arguments")]
pub unsafe extern "C" fn rocex_cm_connect(
    qp: *mut ibv_qp,
    family: u32,
    addr: *const [u8; 16],
    port: u16,
    src_port: u16,
    tos: u8,
    pdata: *const u8,
    len: usize,
    id: *mut u32,
) -> c_int {
    // SAFETY: per the contract.
    let q = unsafe { Qp::from_ibv(qp) };
    // SAFETY: per the contract.
    let Some(peer) = addr_of(family, unsafe { &*addr }) else {
        return libc::EAFNOSUPPORT;
    };
    // SAFETY: per the contract.
    let data = unsafe { bytes(pdata, len) };
    let g = q.ctx().lock();
    match g
        .verbs
        .cm_connect_with(q.qp.get(&g), peer, port, src_port, tos, data)
    {
        Ok(i) => {
            // SAFETY: per the contract.
            unsafe { *id = i };
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `len` bytes at `p` (none when `len` is 0).
///
/// # Safety
///
/// `p` points at `len` readable bytes when `len` is not 0.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        // SAFETY: per the contract.
        unsafe { core::slice::from_raw_parts(p, len) }
    }
}

/// `rdma_accept` of request `id` with `qp` (RC, in INIT) and `len` bytes of private data
/// for the REP (at most 196): 0 or an errno.
///
/// # Safety
///
/// `qp` is a QP of this library; `pdata` points at `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_accept(
    qp: *mut ibv_qp,
    id: u32,
    pdata: *const u8,
    len: usize,
) -> c_int {
    if len > CM_REP_PRIVATE_DATA_LEN {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    let (q, data) = unsafe { (Qp::from_ibv(qp), bytes(pdata, len)) };
    let g = q.ctx().lock();
    g.verbs
        .cm_accept_with(id, q.qp.get(&g), data)
        .map_or_else(|e| errno_of(&e), |()| 0)
}

/// `rdma_reject` of request `id` with `len` bytes of private data for the REJ (at most
/// 148): 0 or an errno.
///
/// # Safety
///
/// `context` is a context of this library; `pdata` points at `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_reject(
    context: *mut ibv_context,
    id: u32,
    pdata: *const u8,
    len: usize,
) -> c_int {
    if len > CM_REJ_PRIVATE_DATA_LEN {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    let (ctx, data) = unsafe { (Ctx::from_ibv(context), bytes(pdata, len)) };
    ctx.lock()
        .verbs
        .cm_reject_with(id, data)
        .map_or_else(|e| errno_of(&e), |()| 0)
}

/// `rdma_disconnect` of connection `id`: 0 or an errno.
///
/// # Safety
///
/// `context` is a context of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_disconnect(context: *mut ibv_context, id: u32) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    ctx.lock()
        .verbs
        .cm_disconnect(id)
        .map_or_else(|e| errno_of(&e), |()| 0)
}

/// The next CM event: 1 with `event` filled, 0 when none waits, or a negative errno.
///
/// # Safety
///
/// `context` is a context of this library; `event` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rocex_cm_poll(
    context: *mut ibv_context,
    event: *mut rocex_cm_event,
) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let e = match ctx.lock().verbs.cm_poll_event() {
        Ok(Some(e)) => e,
        Ok(None) => return 0,
        Err(e) => return -errno_of(&e),
    };
    let (family, addr) = match e.peer {
        IpAddr::V4(a) => {
            let mut r = [0; 16];
            r[..4].copy_from_slice(&a.octets());
            (libc::AF_INET as u32, r)
        }
        IpAddr::V6(a) => (libc::AF_INET6 as u32, a.octets()),
    };
    let mut pd = [0u8; CM_REP_PRIVATE_DATA_LEN];
    let n = e.private_data.len().min(CM_REP_PRIVATE_DATA_LEN);
    pd[..n].copy_from_slice(&e.private_data[..n]);
    // The wire's values (a direct context answers `ConnectResponse` itself).
    let kind = e.kind as u32;
    // SAFETY: per the contract.
    unsafe {
        event.write(rocex_cm_event {
            kind,
            id: e.id,
            family,
            addr,
            port: e.port,
            reason: e.reason,
            private_data_len: n as u32,
            private_data: pd,
            ps: e.ps,
            peer_port: e.peer_port,
            qkey: e.qkey,
            remote_qpn: e.conn.remote_qpn,
            sq_psn: e.conn.sq_psn,
            rq_psn: e.conn.rq_psn,
            path_mtu: e.conn.path_mtu,
            max_rd_atomic: e.conn.max_rd_atomic,
            max_dest_rd_atomic: e.conn.max_dest_rd_atomic,
            retry_cnt: e.conn.retry_cnt,
            rnr_retry: e.conn.rnr_retry,
            timeout: e.conn.timeout,
            traffic_class: e.conn.traffic_class,
        })
    };
    1
}

symver! {
    rocex_context_addr @ "ROCEX_PRIVATE_1",
    rocex_cm_listen @ "ROCEX_PRIVATE_1",
    rocex_cm_unlisten @ "ROCEX_PRIVATE_1",
    rocex_cm_connect @ "ROCEX_PRIVATE_1",
    rocex_cm_accept @ "ROCEX_PRIVATE_1",
    rocex_cm_reject @ "ROCEX_PRIVATE_1",
    rocex_cm_disconnect @ "ROCEX_PRIVATE_1",
    rocex_cm_poll @ "ROCEX_PRIVATE_1",
}
