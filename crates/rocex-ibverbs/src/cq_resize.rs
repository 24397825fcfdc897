//! `ibv_resize_cq`.

use core::ffi::c_int;

use crate::abi::*;
use crate::cq::Cq;
use crate::{errno_of, symver, trace};

/// `ibv_resize_cq`: rocexd gives the CQ a new ring and the completions waiting in the old
/// one are still polled first (`rocex_verbs::Cq::resize`). As on rxe (`rxe_cq_chk_attr`),
/// fewer than 1 entry, more than the device's `max_cqe` or fewer than the completions
/// waiting is EINVAL; `cq->cqe` becomes `cqe`.
///
/// # Safety
///
/// `cq` is a CQ of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: per the contract.
    let c = unsafe { Cq::from_ibv(cq) };
    let Ok(n) = u32::try_from(cqe) else {
        return libc::EINVAL;
    };
    let g = c.ctx().lock();
    match c.cq.get(&g).resize(n) {
        Ok(()) => {
            // SAFETY: the program's CQ, written under the context's lock.
            unsafe { (*cq).cqe = cqe };
            0
        }
        Err(e) => {
            trace("ibv_resize_cq", &e);
            errno_of(&e)
        }
    }
}

symver! {
    ibv_resize_cq @ "IBVERBS_1.1",
}
