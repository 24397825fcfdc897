//! Address and route resolution. A RoCE address needs no SA: the device is the rocex
//! device the kernel's route to the destination leaves from (`Registry::route`), the
//! GIDs are the two IP addresses, and rocexd resolves the peer's MAC itself when it
//! sends the REQ. Both report through the channel as the kernel's do: the
//! `ADDR_RESOLVED`/`ADDR_ERROR` and `ROUTE_RESOLVED` events.

use core::ffi::c_int;
use std::net::SocketAddr;

use crate::abi::*;
use crate::id::{Id, State, bind, same_family, settle};
use crate::registry::enter;
use crate::{fail, sockaddr, symver};

/// The P_Key rdma_cm reports for RoCE: the default, full-membership one.
const DEFAULT_PKEY: u16 = 0xffff;
/// `IB_SA_EQ`: the path's MTU is exactly the one given.
const MTU_SELECTOR_EXACT: u8 = 2;

/// `rdma_resolve_addr`: binds the id (to `src`, else to the wildcard address of `dst`'s
/// family), finds its device and queues `ADDR_RESOLVED`, or `ADDR_ERROR` with the
/// negative errno of a destination no rocex device reaches (`ENETUNREACH` without a
/// route, `ENODEV` when the route's interface has no rocex device). `timeout_ms` is not
/// needed: nothing here waits on the network.
///
/// # Safety
///
/// `id` is a live id; `src` NULL or a socket address; `dst` a socket address.
pub unsafe fn resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    if id.is_null() || dst.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let (Some(to), from) = (unsafe { sockaddr::read(dst) }, unsafe {
        sockaddr::read(src)
    }) else {
        return fail(libc::EAFNOSUPPORT);
    };
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    if m.state == State::Idle {
        let local = from.unwrap_or(SocketAddr::new(sockaddr::any_like(to.ip()), 0));
        let e = bind(v, &mut g, m, local);
        if e != 0 {
            return fail(e);
        }
    }
    let Some(local) = m.src().filter(|_| m.state == State::Bound) else {
        return fail(libc::EINVAL);
    };
    if !same_family(local.ip(), to.ip()) {
        return fail(libc::EINVAL);
    }
    let dev = match m.dev {
        Some(i) => Ok(i),
        None => g.route(v, to.ip()),
    };
    match dev {
        Ok(i) => {
            m.set_dev(v, &mut g, i);
            let ip = g.dev(i).addr;
            sockaddr::write(&mut m.c.route.addr.src, SocketAddr::new(ip, local.port()));
            sockaddr::write(&mut m.c.route.addr.dst, to);
            let a = &mut m.c.route.addr.ibaddr;
            a.sgid = sockaddr::gid(ip);
            a.dgid = sockaddr::gid(to.ip());
            a.pkey = DEFAULT_PKEY.to_be();
            m.state = State::AddrResolved;
            m.post(event::ADDR_RESOLVED, 0);
        }
        Err(e) => m.post(event::ADDR_ERROR, -e),
    }
    // SAFETY: a live id.
    unsafe { settle(id.cast(), g) }
}

/// `rdma_resolve_route`: the one path between the two GIDs, at the port's MTU;
/// queues `ROUTE_RESOLVED`.
///
/// # Safety
///
/// `id` is a live id.
pub unsafe fn resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((_, g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let (State::AddrResolved, Some(d)) = (m.state, m.dev) else {
        return fail(libc::EINVAL);
    };
    let a = m.c.route.addr.ibaddr;
    m.path = ibv_sa_path_rec {
        dgid: a.dgid,
        sgid: a.sgid,
        reversible: 1,
        numb_path: 1,
        pkey: a.pkey,
        mtu_selector: MTU_SELECTOR_EXACT,
        mtu: g.dev(d).mtu,
        ..ibv_sa_path_rec::default()
    };
    m.c.route.path_rec = &mut m.path;
    m.c.route.num_paths = 1;
    m.state = State::RouteResolved;
    m.post(event::ROUTE_RESOLVED, 0);
    // SAFETY: a live id.
    unsafe { settle(id.cast(), g) }
}

crate::export! {
    /// `rdma_resolve_addr`.
    fn rdma_resolve_addr(id: *mut rdma_cm_id, src: *mut libc::sockaddr, dst: *mut libc::sockaddr, timeout_ms: c_int) -> c_int = resolve_addr;
}

crate::export! {
    /// `rdma_resolve_route`.
    fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int = resolve_route;
}

symver! {
    rdma_resolve_addr @ "RDMACM_1.0",
    rdma_resolve_route @ "RDMACM_1.0",
}
