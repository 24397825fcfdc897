//! The checks of a local or remote key and the range it is asked for, in rxe's order.

use super::*;

impl MemTable {
    /// Check a local scatter/gather entry `(lkey, addr, len)` that needs `need` (LOCAL_WRITE
    /// for receive buffers and READ or atomic response targets, empty for send data).
    ///
    /// A zero-length entry is not looked up and yields an empty target, as rxe's
    /// `copy_data` skips it.
    pub fn check_lkey(
        &self,
        pd: PdId,
        lkey: u32,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<Target, MemError> {
        if len == 0 {
            return Ok(Target::empty());
        }
        let mr = self.mr_in(pd, lkey)?;
        let have = mr.access & LOCAL;
        if !have.contains(need) {
            return Err(MemError::AccessDenied { need, have });
        }
        let offset = within(addr, len, mr.iova, mr.len)?;
        Ok(Target::new(&mr.region, offset, len))
    }

    /// The region whose local key is `lkey`, which must belong to `pd`.
    pub(super) fn mr_in(&self, pd: PdId, lkey: u32) -> Result<&Mr, MemError> {
        let mr = self
            .mrs
            .get(&lkey)
            .ok_or(MemError::UnknownKey { key: lkey })?;
        if mr.pd != pd {
            return Err(MemError::WrongPd);
        }
        Ok(mr)
    }

    /// Check a remote access to `[va, va + len)` through `rkey` (from RETH or AtomicETH)
    /// that needs `need` (REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC, FLUSH_GLOBAL or
    /// FLUSH_PERSISTENT). The rkey may be a region's or a bound window's.
    ///
    /// The key is always looked up, also for a zero-length range, whose address must then
    /// lie in `[start, end]` of the region or window (rxe `check_rkey` and
    /// `mr_check_range`). A zero-byte READ or WRITE needs no valid key at all (IBTA
    /// C9-88): the engine skips this check for those, as rxe does, and nothing else may.
    pub fn check_rkey(
        &self,
        pd: PdId,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<Target, MemError> {
        let remote = self.remote(pd, rkey, need)?;
        let offset = within(va, len, remote.base, remote.len)?;
        if len == 0 {
            return Ok(Target::empty());
        }
        // Cannot overflow: bind_mw checked a window lies in its region.
        Ok(Target::new(remote.region, remote.offset + offset, len))
    }

    /// Check a remote access to everything `rkey` covers, for a FLUSH whose selectivity is
    /// the whole memory region: the key, its protection domain and its rights are checked
    /// as by [`MemTable::check_rkey`], no address or length (rxe `check_rkey` skips only
    /// the range check for `IB_FLUSH_MR`). The target is the whole region, or the whole
    /// window for a window's rkey (rxe flushes the region under the window; flushing more
    /// than the key grants would tell the peer nothing, but this table hands out no byte
    /// outside the key's range).
    pub fn check_rkey_whole(&self, pd: PdId, rkey: u32, need: Access) -> Result<Target, MemError> {
        let remote = self.remote(pd, rkey, need)?;
        if remote.len == 0 {
            return Ok(Target::empty());
        }
        Ok(Target::new(remote.region, remote.offset, remote.len))
    }

    /// The region, rights and span behind a remote key, in rxe's order of checks: the key,
    /// the protection domain, the window's state, the rights.
    fn remote(&self, pd: PdId, rkey: u32, need: Access) -> Result<Remote<'_>, MemError> {
        let unknown = MemError::UnknownKey { key: rkey };
        let (mr, granted, base, offset, len) = match self.index.get(&rkey) {
            Some(&KeyRef::MrRemote(lkey)) => {
                let mr = self.mrs.get(&lkey).ok_or(unknown)?;
                if mr.pd != pd {
                    return Err(MemError::WrongPd);
                }
                (mr, mr.access, mr.iova, 0, mr.len)
            }
            Some(&KeyRef::Mw(id)) => {
                let mw = self.mws.get(&id).ok_or(unknown)?;
                if mw.pd != pd {
                    return Err(MemError::WrongPd);
                }
                let binding = mw.binding.ok_or(MemError::Invalidated)?;
                let mr = self
                    .mrs
                    .get(&binding.mr_lkey)
                    .ok_or(MemError::Invalidated)?;
                // Cannot underflow: bind_mw checked the window lies in the region.
                let offset = binding.addr - mr.iova;
                (mr, binding.access, binding.addr, offset, binding.len)
            }
            Some(KeyRef::MrLocal) | None => return Err(unknown),
        };
        let have = granted & Access::REMOTE;
        if !have.contains(need) {
            return Err(MemError::AccessDenied { need, have });
        }
        let base = if granted.contains(Access::ZERO_BASED) {
            0
        } else {
            base
        };
        Ok(Remote {
            region: &mr.region,
            base,
            offset,
            len,
        })
    }
}

/// The offset of `[addr, addr + len)` from `base` if it lies inside `[base, base + span)`.
fn within(addr: u64, len: u64, base: u64, span: u64) -> Result<u64, MemError> {
    let end = addr.checked_add(len).ok_or(MemError::Overflow)?;
    let offset = addr
        .checked_sub(base)
        .ok_or(MemError::OutOfBounds { addr, len })?;
    // end >= addr >= base, so end - base cannot underflow.
    if end - base > span {
        return Err(MemError::OutOfBounds { addr, len });
    }
    Ok(offset)
}
