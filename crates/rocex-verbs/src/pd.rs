//! Protection domains: memory registration and QP creation hang off them.

use std::cell::Cell;
use std::io;
use std::sync::Arc;

use rocex_shm::SharedRegion;
use rocex_shm::control::{Request, Response};
use rocex_verbs_types::Access;

use crate::direct::region::LocalRegion;
use crate::error::proto;
use crate::{Context, Dev, Error, FdMr, Mr, ProcessMr, Registration, Result};

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    pub(crate) ctx: Context,
    pub(crate) pd: u32,
    /// Deallocated by [`Pd::dealloc`]: nothing left for `Drop`.
    pub(crate) freed: Cell<bool>,
}

impl Pd {
    /// Allocates a memory region of `len` bytes (zeroed, page-rounded) in a sealed memfd
    /// and registers it with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        let map = Arc::new(SharedRegion::create("rocex-mr", len)?);
        let iova = self.ctx.next_iova.get();
        self.ctx
            .next_iova
            .set(iova + (map.len() as u64).next_multiple_of(1 << 32));
        let reg = self.reg_shared(map.fd(), Some(&map), iova, 0, len, access)?;
        Ok(Mr::new(self.ctx.clone(), map, reg))
    }

    /// Registers `buf`, ordinary memory of this process (a `Vec`, an array), with
    /// `access`, without copying it into shared memory. The MR borrows `buf` until it is
    /// dropped, so the program cannot touch the bytes while the daemon may.
    ///
    /// The daemon moves the data with `process_vm_readv`/`process_vm_writev`, one system
    /// call per access: much slower than [`alloc_mr`](Self::alloc_mr), and only allowed
    /// when `rocexd` may ptrace this process (same uid with `kernel.yama.ptrace_scope` 0,
    /// or `CAP_SYS_PTRACE`); otherwise the daemon answers `EPERM` (`docs/abi.md` §6.2).
    /// RDMA atomics on such memory are not atomic with respect to this process's own
    /// accesses.
    pub fn reg_mr_process<'a>(&self, buf: &'a mut [u8], access: Access) -> Result<ProcessMr<'a>> {
        // SAFETY: the returned MR holds the exclusive borrow of `buf` for as long as the
        // daemon may access it (until `Drop` has deregistered it).
        unsafe { self.reg_mr_process_raw(buf.as_mut_ptr() as u64, buf.len(), access) }
    }

    /// Registers `len` bytes at `addr` of this process, like
    /// [`reg_mr_process`](Self::reg_mr_process) but tied to no borrow. If the memory is
    /// unmapped while registered, later accesses fail (remote access errors for a peer,
    /// protection errors for local work requests); the daemon is unaffected.
    ///
    /// # Safety
    ///
    /// Until the MR is dropped, the daemon may write the range at any time (as granted by
    /// `access`): the program must not hold references into it, nor let the allocator hand
    /// it out again, while the MR lives.
    pub unsafe fn reg_mr_process_raw(
        &self,
        addr: u64,
        len: usize,
        access: Access,
    ) -> Result<ProcessMr<'static>> {
        let (lkey, rkey) = match &self.ctx.dev {
            Dev::Daemon(ch) => {
                let req = Request::RegMrProcess {
                    pd: self.pd,
                    addr,
                    len: len as u64,
                    access: access.bits(),
                };
                let Response::RegMr { lkey, rkey, .. } = ch.call(&req, &[])?.0 else {
                    return Err(proto("bad RegMr response"));
                };
                (lkey, rkey)
            }
            Dev::Direct(h) => {
                // SAFETY: the caller keeps the memory valid and unreferenced until the MR
                // is dropped, which deregisters it before the borrow ends.
                let region = unsafe { LocalRegion::process(addr, len) };
                h.reg_mr(self.pd, addr, len, access, Arc::new(region))?
            }
        };
        Ok(ProcessMr::new(
            self.ctx.clone(),
            Registration::new(addr, len, lkey, rkey),
        ))
    }

    /// Registers `len` bytes at byte `offset` of `memfd` (sealed against shrinking, mapped
    /// by this process where the program uses it) as the MR whose first byte work requests
    /// and peers name `iova`. The daemon maps the memfd: zero copy, as
    /// [`alloc_mr`](Self::alloc_mr), for memory the caller placed in a memfd itself.
    pub fn reg_mr_memfd(
        &self,
        memfd: std::os::fd::BorrowedFd<'_>,
        iova: u64,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<FdMr> {
        let reg = self.reg_shared(memfd, None, iova, offset, len, access)?;
        Ok(FdMr::new(self.ctx.clone(), reg))
    }

    /// Registers `len` bytes at byte `offset` of `memfd` as an MR starting at `iova`:
    /// what [`alloc_mr`](Self::alloc_mr) and [`reg_mr_memfd`](Self::reg_mr_memfd) share.
    /// The daemon maps a duplicate it is sent; a direct context's engine reaches the
    /// memory through `map`, this process's mapping of it, or maps the memfd itself.
    fn reg_shared(
        &self,
        memfd: std::os::fd::BorrowedFd<'_>,
        map: Option<&Arc<SharedRegion>>,
        iova: u64,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<Registration> {
        let fd = rustix::io::fcntl_dupfd_cloexec(memfd, 0).map_err(io::Error::from)?;
        let ch = match &self.ctx.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) => {
                let map = match map {
                    Some(m) => m.clone(),
                    None => Arc::new(SharedRegion::from_fd(fd)?),
                };
                let region = LocalRegion::in_map(map, offset, len).ok_or(Error::Daemon {
                    errno: 22,
                    detail: "the region does not lie inside the memfd".into(),
                })?;
                let (lkey, rkey) = h.reg_mr(self.pd, iova, len, access, Arc::new(region))?;
                return Ok(Registration::new(iova, len, lkey, rkey));
            }
        };
        let (r, _) = ch.call(
            &Request::RegMrShared {
                pd: self.pd,
                iova,
                offset,
                len: len as u64,
                access: access.bits(),
            },
            &[fd],
        )?;
        let Response::RegMr { lkey, rkey, .. } = r else {
            return Err(proto("bad RegMr response"));
        };
        Ok(Registration::new(iova, len, lkey, rkey))
    }
}

impl Pd {
    /// `ibv_dealloc_pd` with the daemon's answer: EBUSY while MRs or QPs use the PD, which
    /// then stays usable. After success the PD is gone; dropping it does nothing more.
    pub fn dealloc(&self) -> Result<()> {
        if !self.freed.get() {
            match &self.ctx.dev {
                Dev::Daemon(ch) => ch.done(&Request::DeallocPd { pd: self.pd })?,
                Dev::Direct(h) => h.dealloc_pd(self.pd)?,
            }
            self.freed.set(true);
        }
        Ok(())
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        let _ = self.dealloc();
    }
}
