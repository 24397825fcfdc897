//! PDs and MRs: `AllocPd`, `DeallocPd`, `RegMrShared`, `RegMrProcess`, `DeregMr`.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use rocex_proto::verbs::Access;
use rocex_proto::{Engine, PdId};
use rocex_shm::SharedRegion;
use rocex_shm::control::{Response, kind};

use super::{Reply, Server, verbs_error};
use crate::client::Client;
use crate::limits::{Limits, Resource};
use crate::process_region::{self, ProcessRegion};
use crate::shared_region::MappedRegion;

/// A PD for the client.
pub(super) fn alloc_pd(engine: &mut Engine, limits: &Limits, c: &mut Client) -> Reply {
    if let Err(e) = limits.check(Resource::Pds, c.pds.len() as u64, 1) {
        return Reply::over(e);
    }
    let pd = engine.alloc_pd().raw();
    c.pds.insert(pd);
    Reply::ok(Response::AllocPd { pd })
}

/// Frees one of the client's PDs.
pub(super) fn dealloc_pd(engine: &mut Engine, c: &mut Client, pd: u32) -> Reply {
    if !c.pds.contains(&pd) {
        return Reply::err(libc::ENOENT, "no such PD");
    }
    let freed = engine.dealloc_pd(PdId::from_raw(pd)).inspect(|()| {
        c.pds.remove(&pd);
    });
    Reply::done(kind::DEALLOC_PD, freed)
}

/// What a registration asks for, whichever memory backs it.
pub(super) struct NewMr {
    pub(super) pd: u32,
    pub(super) iova: u64,
    pub(super) len: u64,
    pub(super) access: u32,
}

impl Server {
    /// An MR over `len` bytes at `offset` of the memfd the client sent.
    pub(super) fn reg_mr_shared(
        &mut self,
        id: u64,
        mr: NewMr,
        offset: u64,
        mut fds: Vec<OwnedFd>,
    ) -> Reply {
        let len = mr.len;
        self.reg_mr(id, mr, kind::REG_MR_SHARED, move || {
            let fd = fds
                .pop()
                .ok_or_else(|| Reply::err(libc::EINVAL, "no memfd"))?;
            let map = SharedRegion::from_fd(fd)
                .map_err(|e| Reply::err(libc::EINVAL, format!("memfd: {e}")))?;
            let region = MappedRegion::new(Arc::new(map), offset, len)
                .ok_or_else(|| Reply::err(libc::EINVAL, "offset + len exceeds the memfd"))?;
            Ok(Arc::new(region))
        })
    }

    /// An MR over the client process's own memory at `mr.iova` (its address), reached
    /// with process_vm_readv/writev under the pid the kernel gave at accept.
    pub(super) fn reg_mr_process(&mut self, id: u64, mr: NewMr) -> Reply {
        let pid = self.clients.get(&id).and_then(|c| c.pid);
        let (addr, len) = (mr.iova, mr.len);
        self.reg_mr(id, mr, kind::REG_MR_PROCESS, move || {
            let pid = pid.ok_or_else(|| {
                Reply::err(libc::EPERM, "the client's pid is unknown (SO_PEERCRED)")
            })?;
            let region = ProcessRegion::attach(pid, addr, len).map_err(|e| {
                let (errno, why) = process_region::refusal(&e, pid, addr, len);
                Reply::err(errno, why)
            })?;
            Ok(Arc::new(region))
        })
    }

    /// Registers an MR for client `id` after the checks every registration shares (the PD
    /// is the client's, its MR count and registered bytes stay within its limits, the access
    /// bits are defined); `region` makes the memory once those pass.
    fn reg_mr(
        &mut self,
        id: u64,
        mr: NewMr,
        kind: u16,
        region: impl FnOnce() -> Result<Arc<dyn rocex_mem::Region>, Reply>,
    ) -> Reply {
        let Some(c) = self.clients.get_mut(&id) else {
            return Reply::err(libc::ENOENT, "no such client");
        };
        if !c.pds.contains(&mr.pd) {
            return Reply::err(libc::ENOENT, "no such PD");
        }
        let limits = &self.settings.limits;
        if let Err(e) = limits.check(Resource::Mrs, c.mrs.len() as u64, 1) {
            return Reply::over(e);
        }
        let bytes = self.mr_bytes.entry(id).or_default();
        if let Err(e) = limits.check(Resource::MrBytes, bytes.total(), mr.len) {
            return Reply::over(e);
        }
        let Some(access) = Access::from_bits(mr.access) else {
            return Reply::err(libc::EINVAL, "undefined access bits");
        };
        let region = match region() {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        match self
            .driver
            .engine
            .reg_mr(PdId::from_raw(mr.pd), mr.iova, mr.len, access, region)
        {
            Ok(keys) => {
                c.mrs.insert(keys.lkey);
                bytes.add(keys.lkey, mr.len);
                Reply::ok(Response::RegMr {
                    kind,
                    lkey: keys.lkey,
                    rkey: keys.rkey,
                })
            }
            Err(e) => verbs_error(e),
        }
    }

    /// Deregisters one of the client's MRs and stops counting its bytes.
    pub(super) fn dereg_mr(&mut self, id: u64, lkey: u32) -> Reply {
        let Some(c) = self.clients.get_mut(&id) else {
            return Reply::err(libc::ENOENT, "no such client");
        };
        if !c.mrs.contains(&lkey) {
            return Reply::err(libc::ENOENT, "no such MR");
        }
        let deregistered = self.driver.engine.dereg_mr(lkey).inspect(|()| {
            c.mrs.remove(&lkey);
            if let Some(b) = self.mr_bytes.get_mut(&id) {
                b.remove(lkey);
            }
        });
        Reply::done(kind::DEREG_MR, deregistered)
    }
}
