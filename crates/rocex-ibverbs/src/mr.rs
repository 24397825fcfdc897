//! Protection domains and memory regions.
//!
//! `ibv_reg_mr` registers the program's own memory (malloc'd buffers, as every C program
//! has them) without moving its addresses: private anonymous memory is moved in place into
//! a memfd rocexd maps (`remap.rs`: zero copy); anything else, and a registration that
//! only partly overlaps an earlier one, stays where it is and rocexd reaches it with
//! `process_vm_readv`/`writev` (`RegMrProcess`, docs/abi.md §6.2), which needs ptrace
//! permission over the program. `ROCEX_MR=process` takes the second way for every MR.

use core::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsFd;

use rocex_verbs::{Access, FdMr, Pd as VPd, ProcessMr};

use crate::abi::*;
use crate::ctx::{Ctx, Guarded};
use crate::{errno_of, null_errno, remap, symver, trace, unsupported};

/// A protection domain.
#[repr(C)]
pub struct Pd {
    /// rdma-core's PD.
    pub ibv: ibv_pd,
    /// The rocex-verbs PD.
    pub pd: Guarded<VPd>,
}

impl Pd {
    /// # Safety
    ///
    /// `pd` is a PD of this library.
    pub unsafe fn from_ibv<'a>(pd: *mut ibv_pd) -> &'a Self {
        // SAFETY: `ibv` is the first field of the repr(C) Pd.
        unsafe { &*pd.cast::<Self>() }
    }

    /// The context the PD belongs to.
    pub fn ctx(&self) -> &Ctx {
        // SAFETY: a PD's context outlives it.
        unsafe { Ctx::from_ibv(self.ibv.context) }
    }
}

/// How an MR's memory is reached.
enum Backing {
    /// Moved into the memfd group starting at the address (`remap.rs`).
    Memfd(FdMr, usize),
    /// Where it lies, by system calls.
    Process(ProcessMr<'static>),
}

/// A memory region.
#[repr(C)]
pub struct Mr {
    /// rdma-core's MR.
    pub ibv: ibv_mr,
    mr: Guarded<Backing>,
}

/// Whether every MR is to be a process-memory MR (`ROCEX_MR=process`).
fn process_only() -> bool {
    static P: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *P.get_or_init(|| std::env::var("ROCEX_MR").is_ok_and(|v| v == "process"))
}

/// `ibv_alloc_pd`.
///
/// # Safety
///
/// `context` is a context of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let g = ctx.lock();
    match g.verbs.alloc_pd() {
        Ok(pd) => {
            let b = Box::new(Pd {
                ibv: ibv_pd { context, handle: 0 },
                pd: Guarded::new(pd),
            });
            Box::into_raw(b).cast()
        }
        Err(e) => {
            trace("ibv_alloc_pd", &e);
            null_errno(errno_of(&e))
        }
    }
}

/// `ibv_dealloc_pd`.
///
/// # Safety
///
/// `pd` is a PD of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: per the contract.
    let p = unsafe { Pd::from_ibv(pd) };
    let ctx = p.ctx();
    let g = ctx.lock();
    // EBUSY while MRs or QPs use it, as rdma-core answers; the PD stays usable.
    if let Err(e) = p.pd.get(&g).dealloc() {
        trace("ibv_dealloc_pd", &e);
        return errno_of(&e);
    }
    // SAFETY: made by Box::into_raw in ibv_alloc_pd; dropped under the context's lock.
    drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
    0
}

/// Access bits rocex knows (the optional range, 0x3ff00000, may be ignored: rdma-core's
/// `IBV_ACCESS_OPTIONAL_RANGE`).
fn access(bits: c_uint) -> Option<Access> {
    Access::from_bits(bits & !0x3ff0_0000)
}

/// `ibv_reg_mr`.
///
/// # Safety
///
/// `pd` is a PD of this library; `addr..addr + length` is mapped memory of the program.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access_flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: per the contract.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access_flags as c_uint) }
}

/// `ibv_reg_mr_iova`.
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access_flags: c_int,
) -> *mut ibv_mr {
    // SAFETY: per the contract.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access_flags as c_uint) }
}

/// `ibv_reg_mr_iova2`: the MR's addresses are the memory's own (an `iova` other than
/// `addr` is refused with EOPNOTSUPP).
///
/// # Safety
///
/// As [`ibv_reg_mr`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access_flags: c_uint,
) -> *mut ibv_mr {
    // SAFETY: per the contract.
    let p = unsafe { Pd::from_ibv(pd) };
    if iova != addr as u64 {
        unsupported(
            "ibv_reg_mr_iova2 with an iova other than the address",
            "EOPNOTSUPP",
        );
        return null_errno(libc::EOPNOTSUPP);
    }
    let Some(acc) = access(access_flags) else {
        return null_errno(libc::EINVAL);
    };
    if length == 0 {
        return null_errno(libc::EINVAL);
    }
    let ctx = p.ctx();
    let g = ctx.lock();
    let pd_v = p.pd.get(&g);
    let placed = (!process_only())
        .then(|| remap::place(addr as usize, length))
        .flatten();
    let backing = match placed {
        Some(pl) => {
            let r = pd_v.reg_mr_memfd(pl.fd.as_fd(), addr as u64, pl.offset, length, acc);
            if r.is_err() {
                remap::release(pl.group);
            }
            r.map(|m| Backing::Memfd(m, pl.group))
        }
        // SAFETY: the program owns the memory; the MR is deregistered (ibv_dereg_mr)
        // before the program may rightly free it, as with any RNIC.
        None => unsafe { pd_v.reg_mr_process_raw(addr as u64, length, acc) }.map(Backing::Process),
    };
    match backing {
        Ok(b) => {
            let (lkey, rkey) = match &b {
                Backing::Memfd(m, _) => (m.lkey(), m.rkey()),
                Backing::Process(m) => (m.lkey(), m.rkey()),
            };
            let b = Box::new(Mr {
                ibv: ibv_mr {
                    context: p.ibv.context,
                    pd,
                    addr,
                    length,
                    handle: lkey,
                    lkey,
                    rkey,
                },
                mr: Guarded::new(b),
            });
            Box::into_raw(b).cast()
        }
        Err(e) => {
            trace("ibv_reg_mr", &e);
            null_errno(errno_of(&e))
        }
    }
}

/// `ibv_dereg_mr`: answered once the daemon no longer reaches the memory.
///
/// # Safety
///
/// `mr` is an MR of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv((*mr).context) };
    let g = ctx.lock();
    // SAFETY: made by Box::into_raw in ibv_reg_mr_iova2.
    let b = unsafe { Box::from_raw(mr.cast::<Mr>()) };
    match b.mr.into_inner() {
        Backing::Memfd(m, group) => {
            drop(m);
            remap::release(group);
        }
        Backing::Process(m) => drop(m),
    }
    drop(g);
    0
}

/// `ibv_rereg_mr`: not supported (`IBV_REREG_MR_ERR_INPUT`, the MR unchanged).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_rereg_mr(
    _mr: *mut ibv_mr,
    _flags: c_int,
    _pd: *mut ibv_pd,
    _addr: *mut c_void,
    _length: usize,
    _access: c_int,
) -> c_int {
    unsupported("ibv_rereg_mr", "IBV_REREG_MR_ERR_INPUT");
    crate::set_errno(libc::EOPNOTSUPP);
    -1
}

/// `ibv_reg_dmabuf_mr`: not supported.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    unsupported("ibv_reg_dmabuf_mr", "EOPNOTSUPP");
    null_errno(libc::EOPNOTSUPP)
}

symver! {
    ibv_alloc_pd @ "IBVERBS_1.1",
    ibv_dealloc_pd @ "IBVERBS_1.1",
    ibv_reg_mr @ "IBVERBS_1.1",
    ibv_reg_mr_iova @ "IBVERBS_1.7",
    ibv_reg_mr_iova2 @ "IBVERBS_1.8",
    ibv_dereg_mr @ "IBVERBS_1.1",
    ibv_rereg_mr @ "IBVERBS_1.1",
    ibv_reg_dmabuf_mr @ "IBVERBS_1.12",
}
