//! rdma-core's endpoint calls, built on the others as rdma-core builds them:
//! `rdma_create_ep` makes a synchronous id from an `rdma_addrinfo` (bound for a passive
//! one, resolved with its QP for an active one), `rdma_get_request` waits for a request
//! on a synchronous listener and gives its id a QP like the listener's.

use core::ffi::c_int;

use crate::abi::*;
use crate::channel::{ack_event, get_event};
use crate::conn::reject;
use crate::id::{Id, bind_addr, create_id, destroy_id};
use crate::qp::{create_qp, destroy_qp, destroy_srq};
use crate::registry::lock;
use crate::resolve::{resolve_addr, resolve_route};
use crate::{fail, symver};

/// How long `rdma_create_ep` gives resolution, as rdma-core does.
const RESOLVE_MS: c_int = 2000;

/// `rdma_create_ep`.
///
/// # Safety
///
/// `id` is writable; `res` an address list entry; `pd` NULL or a PD; `attr` NULL or a
/// writable `ibv_qp_init_attr`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    if id.is_null() || res.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let r = unsafe { &*res };
    let ps = match r.ai_port_space as u32 {
        0 => RDMA_PS_TCP,
        p => p,
    };
    let mut cm = core::ptr::null_mut();
    // SAFETY: a synchronous id (no channel).
    if unsafe { create_id(core::ptr::null_mut(), &mut cm, core::ptr::null_mut(), ps) } != 0 {
        return -1;
    }
    // SAFETY: each call gets the live id just made and the program's own arguments.
    let made = unsafe {
        if r.ai_flags & RAI_PASSIVE != 0 {
            let ok = bind_addr(cm, r.ai_src_addr) == 0;
            if ok && !attr.is_null() {
                let _g = lock();
                if let Some(m) = Id::of(cm) {
                    m.ep = Some((*attr, pd));
                }
            }
            ok
        } else {
            resolve_addr(cm, r.ai_src_addr, r.ai_dst_addr, RESOLVE_MS) == 0
                && resolve_route(cm, RESOLVE_MS) == 0
                && (attr.is_null() || create_qp(cm, pd, attr) == 0)
        }
    };
    if !made {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        // SAFETY: the id made above, not handed out.
        unsafe { destroy_id(cm) };
        return fail(e);
    }
    // SAFETY: per the contract.
    unsafe { *id = cm };
    0
}

/// `rdma_destroy_ep`: the id's QP and SRQ, then the id.
///
/// # Safety
///
/// `id` is a live id, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    if id.is_null() {
        return;
    }
    // SAFETY: per the contract.
    unsafe {
        destroy_qp(id);
        destroy_srq(id);
        destroy_id(id);
    }
}

/// `rdma_get_request`: waits for the next request on the listener's channel; the new id
/// gets a QP made with the listener's endpoint attributes, and keeps the event as
/// `id->event`.
///
/// # Safety
///
/// `listen` is a live, listening id; `id` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    if listen.is_null() || id.is_null() {
        return fail(libc::EINVAL);
    }
    let (channel, ep) = {
        let _g = lock();
        // SAFETY: per the contract.
        let Some(l) = (unsafe { Id::of(listen) }) else {
            return fail(libc::EINVAL);
        };
        (l.c.channel, l.ep)
    };
    let mut e = core::ptr::null_mut();
    // SAFETY: the listener's channel.
    if unsafe { get_event(channel, &mut e) } != 0 {
        return -1;
    }
    // SAFETY: an event just taken.
    let (kind, status, new) = unsafe { ((*e).event, (*e).status, (*e).id) };
    if status != 0 || kind != event::CONNECT_REQUEST {
        // SAFETY: as above.
        unsafe { ack_event(e) };
        return fail(if status != 0 {
            status.abs()
        } else {
            libc::EINVAL
        });
    }
    if let Some((mut attr, pd)) = ep {
        // SAFETY: the request's new id.
        if unsafe { create_qp(new, pd, &mut attr) } != 0 {
            let err = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            // SAFETY: the request's id, refused and freed; the event goes with it.
            unsafe {
                ack_event(e);
                reject(new, core::ptr::null(), 0);
                destroy_id(new);
            }
            return fail(err);
        }
    }
    // SAFETY: the new id is live; per the contract `id` is writable.
    unsafe {
        (*new).event = e;
        *id = new;
    }
    0
}

symver! {
    rdma_create_ep @ "RDMACM_1.0",
    rdma_destroy_ep @ "RDMACM_1.0",
    rdma_get_request @ "RDMACM_1.0",
}
