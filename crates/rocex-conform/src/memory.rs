//! The replayed responder's memory, as the plan infers it: one buffer per memory, each
//! captured rkey registered over its part of one (so rkeys over the same addresses reach
//! the same bytes), windows bound over theirs under the captured rkey.

use std::sync::Arc;

use rocex_proto::{
    Access, Engine, Keys, MemError, MwBinding, PdId, Region, SubRegion, VecRegion, VerbsError,
};

use crate::ConformError;
use crate::connection::Connection;
use crate::infer::Plan;

/// A registered rkey: the rkey, the first address of its memory, that memory's bytes.
pub(crate) type Registered = (u32, u64, Arc<VecRegion>);

/// Registers the plan's regions and windows; returns each rkey with its memory.
///
/// lkeys, and the rkeys of the regions windows are bound to, are chosen clear of every
/// captured key. A window needs a region granting MW_BIND under it: one per memory that
/// holds a window, over the whole memory, which no captured request names.
pub(crate) fn register(
    engine: &mut Engine,
    pd: PdId,
    conn: &Connection,
    plan: &Plan,
) -> Result<Vec<Registered>, ConformError> {
    let taken = |k: u32| plan.mrs.iter().any(|m| m.rkey == k) || plan.mws.contains(&k);
    let mut next = 0x4c00_0000u32;
    let mut fresh = || {
        while taken(next) {
            next += 1;
        }
        next += 1;
        next - 1
    };
    let memories: Vec<Arc<VecRegion>> = (0..plan.memories.len())
        .map(|i| {
            let persistent = plan
                .mrs
                .iter()
                .any(|m| m.memory == i && m.access.contains(Access::FLUSH_PERSISTENT));
            let len = plan.memories[i].len as usize;
            Arc::new(VecRegion::new(len).with_persistent(persistent))
        })
        .collect();
    let mut anchors: Vec<Option<u32>> = vec![None; memories.len()];
    let mut out = Vec::new();
    for mr in &plan.mrs {
        let memory = plan.memories[mr.memory];
        let bytes = &memories[mr.memory];
        if mr.window {
            let lkey = match anchors[mr.memory] {
                Some(lkey) => lkey,
                None => {
                    let mut access = Access::LOCAL_WRITE | Access::MW_BIND | Access::REMOTE;
                    if !bytes.persistent() {
                        access = Access::from_bits_truncate(
                            access.bits() & !Access::FLUSH_PERSISTENT.bits(),
                        );
                    }
                    let keys = Keys {
                        lkey: fresh(),
                        rkey: fresh(),
                    };
                    let whole: Arc<dyn Region> = bytes.clone();
                    engine
                        .reg_mr_with_keys(pd, memory.iova, memory.len, access, whole, keys)
                        .map_err(ConformError::setup(
                            conn,
                            "reg_mr_with_keys (under a window)",
                        ))?;
                    anchors[mr.memory] = Some(keys.lkey);
                    keys.lkey
                }
            };
            engine
                .alloc_mw_with_key(pd, mr.rkey)
                .map_err(ConformError::setup(conn, "alloc_mw_with_key"))?;
            engine
                .bind_mw_keeping_key(
                    pd,
                    mr.rkey,
                    MwBinding {
                        mr_lkey: lkey,
                        addr: mr.iova,
                        len: mr.len,
                        access: mr.access & Access::REMOTE,
                    },
                )
                .map_err(ConformError::setup(conn, "bind_mw_keeping_key"))?;
        } else {
            let part = SubRegion::new(bytes.clone(), mr.iova - memory.iova, mr.len).ok_or(
                VerbsError::from(MemError::OutOfBounds {
                    addr: mr.iova,
                    len: mr.len,
                }),
            );
            let part: Arc<dyn Region> =
                Arc::new(part.map_err(ConformError::setup(conn, "a region's memory"))?);
            let keys = Keys {
                lkey: fresh(),
                rkey: mr.rkey,
            };
            engine
                .reg_mr_with_keys(pd, mr.iova, mr.len, mr.access, part, keys)
                .map_err(ConformError::setup(conn, "reg_mr_with_keys"))?;
        }
        out.push((mr.rkey, memory.iova, bytes.clone()));
    }
    for &rkey in &plan.mws {
        engine
            .alloc_mw_with_key(pd, rkey)
            .map_err(ConformError::setup(conn, "alloc_mw_with_key"))?;
    }
    Ok(out)
}
