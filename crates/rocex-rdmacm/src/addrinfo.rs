//! `rdma_getaddrinfo`: `getaddrinfo(3)` turned into rdma_cm's address list, as rdma-core
//! does without ib_acm: the address found is the source of a passive (`RAI_PASSIVE`)
//! entry and the destination of an active one, the port space and QP type come from the
//! hints or default to TCP and RC.

use core::ffi::{c_char, c_int};

use libc::sockaddr_storage;

use crate::abi::*;
use crate::{sockaddr, symver};

/// One entry with room for its addresses, freed as one box.
#[repr(C)]
struct Entry {
    rai: rdma_addrinfo,
    src: sockaddr_storage,
    dst: sockaddr_storage,
}

/// `rdma_getaddrinfo`: 0, or the `EAI_*` code of `getaddrinfo`, which rdma-core returns
/// as it is.
///
/// # Safety
///
/// `node` and `service` are NULL or C strings, `hints` NULL or an `rdma_addrinfo`,
/// `res` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    if res.is_null() {
        return libc::EAI_SYSTEM;
    }
    // SAFETY: per the contract.
    let h = unsafe { hints.as_ref() };
    let flags = h.map_or(0, |h| h.ai_flags);
    // SAFETY: an all-zero addrinfo is the empty hint.
    let mut ai: libc::addrinfo = unsafe { core::mem::zeroed() };
    ai.ai_family = h.map_or(libc::AF_UNSPEC, |h| h.ai_family);
    ai.ai_socktype = libc::SOCK_STREAM;
    if flags & RAI_PASSIVE != 0 {
        ai.ai_flags |= libc::AI_PASSIVE;
    }
    if flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut found = core::ptr::null_mut();
    // SAFETY: per the contract; `found` receives the list, freed below.
    let r = unsafe { libc::getaddrinfo(node, service, &ai, &mut found) };
    if r != 0 {
        return r;
    }
    // SAFETY: a list getaddrinfo gave, non-empty on success.
    let first = unsafe { sockaddr::read((*found).ai_addr) };
    // SAFETY: as above.
    unsafe { libc::freeaddrinfo(found) };
    let Some(addr) = first else {
        return libc::EAI_FAMILY;
    };
    let ps = match h.map_or(0, |h| h.ai_port_space) as u32 {
        0 => match h.map_or(0, |h| h.ai_qp_type) {
            IBV_QPT_UD => RDMA_PS_UDP,
            _ => RDMA_PS_TCP,
        },
        p => p,
    };
    let qpt = match h.map_or(0, |h| h.ai_qp_type) {
        0 if ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB => IBV_QPT_UD,
        0 => IBV_QPT_RC,
        t => t,
    };
    // SAFETY: an all-zero Entry is empty: NULL pointers, zero lengths.
    let mut e: Box<Entry> = Box::new(unsafe { core::mem::zeroed() });
    e.rai.ai_flags = flags;
    e.rai.ai_family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    e.rai.ai_qp_type = qpt;
    e.rai.ai_port_space = ps as c_int;
    if flags & RAI_PASSIVE != 0 {
        e.rai.ai_src_len = sockaddr::write(&mut e.src, addr);
        e.rai.ai_src_addr = (&raw mut e.src).cast();
    } else {
        e.rai.ai_dst_len = sockaddr::write(&mut e.dst, addr);
        e.rai.ai_dst_addr = (&raw mut e.dst).cast();
        // An active entry keeps the source the hints ask for.
        // SAFETY: per the contract the hint's source address is NULL or valid.
        if let Some(src) = h.and_then(|h| unsafe { sockaddr::read(h.ai_src_addr) }) {
            e.rai.ai_src_len = sockaddr::write(&mut e.src, src);
            e.rai.ai_src_addr = (&raw mut e.src).cast();
        }
    }
    // SAFETY: per the contract.
    unsafe { *res = Box::into_raw(e).cast() };
    0
}

/// `rdma_freeaddrinfo`.
///
/// # Safety
///
/// `res` came from [`rdma_getaddrinfo`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    let mut p = res;
    while !p.is_null() {
        // SAFETY: per the contract each entry is an `Entry` box.
        let e = unsafe { Box::from_raw(p.cast::<Entry>()) };
        p = e.rai.ai_next;
    }
}

symver! {
    rdma_getaddrinfo @ "RDMACM_1.0",
    rdma_freeaddrinfo @ "RDMACM_1.0",
}
