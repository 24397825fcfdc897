//! Address handles: the peer's IP address (its RoCE v2 GID), for UD sends.

use core::ffi::c_int;
use std::net::IpAddr;

use crate::abi::*;
use crate::gid::gid_addr;
use crate::qp::ah_attr_of;
use crate::{null_errno, symver, trace};

/// An address handle.
#[repr(C)]
pub struct Ah {
    /// rdma-core's AH.
    pub ibv: ibv_ah,
    /// Where sends through it go.
    pub dest: IpAddr,
}

impl Ah {
    /// # Safety
    ///
    /// `ah` is an AH of this library.
    pub unsafe fn from_ibv<'a>(ah: *mut ibv_ah) -> &'a Self {
        // SAFETY: `ibv` is the first field of the repr(C) Ah.
        unsafe { &*ah.cast::<Self>() }
    }
}

/// `ibv_create_ah`: RoCE needs the GRH (`is_global` and the destination GID), EINVAL
/// without, as rdma-core answers.
///
/// # Safety
///
/// `pd` is a PD of this library; `attr` is readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: per the contract.
    let a = unsafe { &*attr };
    if a.is_global == 0 {
        trace("ibv_create_ah", &"RoCE needs a GRH (is_global)");
        return null_errno(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let context = unsafe { (*pd).context };
    Box::into_raw(Box::new(Ah {
        ibv: ibv_ah {
            context,
            pd,
            handle: 0,
        },
        dest: gid_addr(&a.grh.dgid.raw),
    }))
    .cast()
}

/// `ibv_destroy_ah`.
///
/// # Safety
///
/// `ah` is an AH of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: made by Box::into_raw in ibv_create_ah.
    drop(unsafe { Box::from_raw(ah.cast::<Ah>()) });
    0
}

/// The sender of a UD receive, from the 40 bytes before its payload: an IPv6 header, or
/// for IPv4 20 zero bytes and the IPv4 header (rxe's layout).
fn grh_source(grh: &[u8; 40]) -> IpAddr {
    rocex_verbs_types::grh_source(grh)
}

/// `ibv_init_ah_from_wc`: the address of a UD receive's sender (its GRH).
///
/// # Safety
///
/// `wc` and `grh` are readable; `ah_attr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    _context: *mut ibv_context,
    port_num: u8,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    // SAFETY: per the contract.
    if unsafe { (*wc).wc_flags } & 1 == 0 || grh.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the GRH is 40 readable bytes.
    let src = grh_source(unsafe { &*grh.cast::<[u8; 40]>() });
    let mut a = ah_attr_of(src);
    a.port_num = port_num;
    // SAFETY: per the contract.
    unsafe { ah_attr.write(a) };
    0
}

/// `ibv_create_ah_from_wc`.
///
/// # Safety
///
/// As [`ibv_init_ah_from_wc`]; `pd` is a PD of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut ibv_grh,
    port_num: u8,
) -> *mut ibv_ah {
    let mut a = ibv_ah_attr::default();
    // SAFETY: per the contract.
    let r = unsafe { ibv_init_ah_from_wc((*pd).context, port_num, wc, grh, &mut a) };
    if r != 0 {
        return null_errno(r);
    }
    // SAFETY: per the contract.
    unsafe { ibv_create_ah(pd, &mut a) }
}

symver! {
    ibv_create_ah @ "IBVERBS_1.1",
    ibv_destroy_ah @ "IBVERBS_1.1",
    ibv_init_ah_from_wc @ "IBVERBS_1.1",
    ibv_create_ah_from_wc @ "IBVERBS_1.1",
}
