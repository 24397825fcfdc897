//! Memory windows: allocation, and the BIND_MW and LOCAL_INV work requests, which rocexd
//! executes when the client posts them on the control connection (the send ring carries
//! no local operations), and a direct context's engine at once. A window is named by its
//! current rkey, which a bind changes.

use rocex_shm::control::{BindMw, Request, Response};
use rocex_verbs_types::Access;

use rocex_proto::MwBinding;

use crate::{Context, Dev, Error, Pd, Qp, Result};

/// Where a bind puts a window: part of a memory region, and what it grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MwBind {
    /// The region's lkey (its PD must be the window's and the QP's).
    pub mr_lkey: u32,
    /// First byte of the window, an address of the region.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// What the window grants peers (remote read, write, atomics).
    pub access: Access,
}

impl Pd {
    /// A new, unbound memory window in this PD (`ibv_alloc_mw`), of type 1 (bound again
    /// while bound, never invalidated) or type 2; returns its rkey.
    pub fn alloc_mw(&self, type1: bool) -> Result<u32> {
        let ch = match &self.ctx.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) => return h.alloc_mw(self.pd, type1),
        };
        let req = Request::AllocMw { pd: self.pd, type1 };
        match ch.call(&req, &[])?.0 {
            Response::AllocMw { rkey } => Ok(rkey),
            r => Err(Error::Protocol(format!("unexpected {r:?}"))),
        }
    }
}

impl Context {
    /// Frees the window whose rkey is `rkey` (`ibv_dealloc_mw`), bound or not.
    pub fn dealloc_mw(&self, rkey: u32) -> Result<()> {
        match &self.dev {
            Dev::Daemon(ch) => ch.done(&Request::DeallocMw { rkey }),
            Dev::Direct(h) => h.dealloc_mw(rkey),
        }
    }

    /// Binds the window `mw_rkey` through `qp` (a BIND_MW work request): returns its new
    /// rkey, the old one's upper 24 bits with `key` as the low byte. A bound type-2 window
    /// must be invalidated first; a type-1 window is bound again while bound.
    pub fn bind_mw(&self, qp: &Qp, mw_rkey: u32, key: u8, to: MwBind) -> Result<u32> {
        let ch = match &self.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) => {
                let to = MwBinding {
                    mr_lkey: to.mr_lkey,
                    addr: to.addr,
                    len: to.len,
                    access: to.access,
                };
                return h.bind_mw(qp.qpn(), mw_rkey, key, to);
            }
        };
        let req = Request::BindMw(BindMw {
            qpn: qp.qpn(),
            mw_rkey,
            key,
            mr_lkey: to.mr_lkey,
            addr: to.addr,
            len: to.len,
            access: to.access.bits(),
        });
        match ch.call(&req, &[])?.0 {
            Response::BindMw { rkey } => Ok(rkey),
            r => Err(Error::Protocol(format!("unexpected {r:?}"))),
        }
    }

    /// Invalidates the window `rkey` through `qp` (a LOCAL_INV work request): peers can
    /// no longer reach memory through it until it is bound again.
    pub fn local_invalidate(&self, qp: &Qp, rkey: u32) -> Result<()> {
        match &self.dev {
            Dev::Daemon(ch) => ch.done(&Request::LocalInv {
                qpn: qp.qpn(),
                rkey,
            }),
            Dev::Direct(h) => h.local_invalidate(qp.qpn(), rkey),
        }
    }
}
