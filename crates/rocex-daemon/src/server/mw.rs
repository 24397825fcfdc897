//! Memory windows: `AllocMw`, `DeallocMw`, and the BIND_MW and LOCAL_INV work requests of
//! the drop-in libibverbs (`BindMw`, `LocalInv`), which the client posts here in order
//! with its sends. Each names a window by its current rkey; the client's windows are
//! kept by rkey so that a client's exit frees them.

use rocex_proto::verbs::Access;
use rocex_proto::{Engine, MwBinding, PdId};
use rocex_shm::control::{BindMw, Response, kind};

use super::{Reply, verbs_error};
use crate::client::{Client, MAX_PER_CLIENT};

/// A window (type 1 or 2) in one of the client's PDs.
pub(super) fn alloc(engine: &mut Engine, c: &mut Client, pd: u32, type1: bool) -> Reply {
    if !c.pds.contains(&pd) {
        return Reply::err(libc::ENOENT, "no such PD");
    }
    if c.mws.len() >= MAX_PER_CLIENT {
        return Reply::err(libc::ENOMEM, "too many memory windows");
    }
    let pd = PdId::from_raw(pd);
    let made = if type1 {
        engine.alloc_mw_type1(pd)
    } else {
        engine.alloc_mw(pd)
    };
    match made {
        Ok(rkey) => {
            c.mws.insert(rkey);
            Reply::ok(Response::AllocMw { rkey })
        }
        Err(e) => verbs_error(e),
    }
}

/// Frees one of the client's windows.
pub(super) fn dealloc(engine: &mut Engine, c: &mut Client, rkey: u32) -> Reply {
    if !c.mws.contains(&rkey) {
        return Reply::err(libc::ENOENT, "no such memory window");
    }
    let freed = engine.dealloc_mw(rkey).inspect(|()| {
        c.mws.remove(&rkey);
    });
    Reply::done(kind::DEALLOC_MW, freed)
}

/// Binds one of the client's windows through one of its QPs; answers the new rkey.
pub(super) fn bind(engine: &mut Engine, c: &mut Client, b: BindMw) -> Reply {
    if !c.qps.contains_key(&b.qpn) {
        return Reply::err(libc::ENOENT, "no such QP");
    }
    if !c.mws.contains(&b.mw_rkey) {
        return Reply::err(libc::ENOENT, "no such memory window");
    }
    let Some(access) = Access::from_bits(b.access) else {
        return Reply::err(libc::EINVAL, "unknown access bits");
    };
    let to = MwBinding {
        mr_lkey: b.mr_lkey,
        addr: b.addr,
        len: b.len,
        access,
    };
    match engine.bind_mw_on_qp(b.qpn, b.mw_rkey, b.key, to) {
        Ok(rkey) => {
            c.mws.remove(&b.mw_rkey);
            c.mws.insert(rkey);
            Reply::ok(Response::BindMw { rkey })
        }
        Err(e) => verbs_error(e),
    }
}

/// Invalidates a window through one of the client's QPs.
pub(super) fn local_inv(engine: &mut Engine, c: &mut Client, qpn: u32, rkey: u32) -> Reply {
    if !c.qps.contains_key(&qpn) {
        return Reply::err(libc::ENOENT, "no such QP");
    }
    Reply::done(kind::LOCAL_INV, engine.invalidate_mw_on_qp(qpn, rkey))
}
