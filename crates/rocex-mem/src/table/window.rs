//! Type-2 memory windows: allocation, binding to part of a region, and invalidation.

use super::*;

impl MemTable {
    /// A new, unbound type-2 memory window; returns its rkey.
    pub fn alloc_mw(&mut self, pd: PdId) -> Result<u32, MemError> {
        self.use_pd(pd)?;
        let rkey = self.fresh_key()?;
        self.insert_mw(pd, rkey)
    }

    /// A new, unbound type-1 memory window; returns its rkey. Unlike a type-2 window it is
    /// bound again while bound ([`MemTable::bind_mw_with_key`] releases the old binding),
    /// and SEND_WITH_INV or LOCAL_INV naming it is refused (rxe `rxe_invalidate_mw`).
    pub fn alloc_mw_type1(&mut self, pd: PdId) -> Result<u32, MemError> {
        let rkey = self.alloc_mw(pd)?;
        if let Ok((id, _)) = self.mw_by_rkey(rkey)
            && let Some(mw) = self.mws.get_mut(&id)
        {
            mw.type1 = true;
        }
        Ok(rkey)
    }

    /// Records a new unbound window under `rkey`, which the caller has drawn or checked.
    fn insert_mw(&mut self, pd: PdId, rkey: u32) -> Result<u32, MemError> {
        let id = self.next_mw;
        self.next_mw = self.next_mw.wrapping_add(1);
        self.mws.insert(
            id,
            Mw {
                pd,
                rkey,
                binding: None,
                type1: false,
            },
        );
        self.index.insert(rkey, KeyRef::Mw(id));
        *self.use_pd(pd)? += 1;
        Ok(rkey)
    }

    pub(super) fn mw_by_rkey(&self, rkey: u32) -> Result<(u64, &Mw), MemError> {
        let unknown = MemError::UnknownKey { key: rkey };
        match self.index.get(&rkey) {
            Some(&KeyRef::Mw(id)) => self.mws.get(&id).map(|mw| (id, mw)).ok_or(unknown),
            _ => Err(unknown),
        }
    }

    /// Bind the free type-2 window `mw_rkey` to `[addr, addr + len)` of the region `mr_lkey`
    /// with `access`, and return the window's new rkey (the old one stops working).
    ///
    /// The window and the region must both be in `pd`; the region must grant MW_BIND and,
    /// for a window with REMOTE_WRITE or REMOTE_ATOMIC, LOCAL_WRITE; the range must lie in
    /// the region; a zero-based region cannot carry windows (rxe `rxe_check_bind_mw`). A
    /// window that is still bound must be invalidated first.
    pub fn bind_mw(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, MemError> {
        let to = MwBinding {
            mr_lkey,
            addr,
            len,
            access,
        };
        self.bind(pd, mw_rkey, to, false)
    }

    /// Binds the free window `mw_rkey` to `to` as [`MemTable::bind_mw`] does, under the
    /// same rules, but the window keeps its rkey, for reproducing captures: a replay of
    /// another device's traffic must reach a bound window through the rkey that device
    /// handed out. Never use this for real traffic: a window whose rkey does not change on a
    /// bind is reachable by a peer that kept the old key.
    pub fn bind_mw_keeping_key(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        to: MwBinding,
    ) -> Result<u32, MemError> {
        self.bind(pd, mw_rkey, to, true)
    }

    /// Binds the free window `mw_rkey` to `to` as [`MemTable::bind_mw`] does, under the
    /// same rules, with the new rkey the binder chose as rxe takes it (`rxe_do_bind_mw`):
    /// the window keeps its key's upper 24 bits, and `key` becomes the low 8 bits (a
    /// program names it with `ibv_inc_rkey`). A key another object holds is refused.
    pub fn bind_mw_with_key(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        key: u8,
        to: MwBinding,
    ) -> Result<u32, MemError> {
        let new_rkey = (mw_rkey & !0xff) | u32::from(key);
        if new_rkey != mw_rkey && self.index.contains_key(&new_rkey) {
            return Err(MemError::InvalidAccess("the chosen key is in use"));
        }
        let (id, mw) = self.mw_by_rkey(mw_rkey)?;
        if mw.type1 && mw.pd == pd {
            self.unbind(id);
        }
        self.bind(pd, mw_rkey, to, true)?;
        if new_rkey != mw_rkey {
            let (id, _) = self.mw_by_rkey(mw_rkey)?;
            self.drop_key(mw_rkey);
            self.index.insert(new_rkey, KeyRef::Mw(id));
            if let Some(mw) = self.mws.get_mut(&id) {
                mw.rkey = new_rkey;
            }
        }
        Ok(new_rkey)
    }

    fn bind(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        to: MwBinding,
        keep_key: bool,
    ) -> Result<u32, MemError> {
        let MwBinding {
            mr_lkey,
            addr,
            len,
            access,
        } = to;
        let (id, mw) = self.mw_by_rkey(mw_rkey)?;
        if mw.pd != pd {
            return Err(MemError::WrongPd);
        }
        if mw.binding.is_some() {
            return Err(MemError::MwBound);
        }
        let mr = self.mr_in(pd, mr_lkey)?;
        if !mr.access.contains(Access::MW_BIND) {
            return Err(MemError::AccessDenied {
                need: Access::MW_BIND,
                have: mr.access,
            });
        }
        if mr.access.contains(Access::ZERO_BASED) {
            return Err(MemError::InvalidAccess(
                "a memory window cannot be bound to a zero-based region",
            ));
        }
        if access.contains(Access::MW_BIND) {
            return Err(MemError::InvalidAccess(
                "a memory window cannot grant MW_BIND",
            ));
        }
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !mr.access.contains(Access::LOCAL_WRITE)
        {
            return Err(MemError::AccessDenied {
                need: Access::LOCAL_WRITE,
                have: mr.access,
            });
        }
        if access.contains(Access::FLUSH_PERSISTENT) && !mr.region.persistent() {
            return Err(MemError::InvalidAccess(
                "persistent flush needs memory that can persist",
            ));
        }
        let end = addr.checked_add(len).ok_or(MemError::Overflow)?;
        // Cannot overflow: reg_mr checked iova + len.
        if addr < mr.iova || end > mr.iova + mr.len {
            return Err(MemError::OutOfBounds { addr, len });
        }
        let new_rkey = if keep_key {
            mw_rkey
        } else {
            let fresh = self.fresh_key()?;
            self.drop_key(mw_rkey);
            self.index.insert(fresh, KeyRef::Mw(id));
            fresh
        };
        if let Some(mr) = self.mrs.get_mut(&mr_lkey) {
            mr.bound_mws = mr.bound_mws.saturating_add(1);
        }
        if let Some(mw) = self.mws.get_mut(&id) {
            mw.rkey = new_rkey;
            mw.binding = Some(MwBinding {
                mr_lkey,
                addr,
                len,
                access: access & MW_GRANTABLE,
            });
        }
        Ok(new_rkey)
    }

    /// Release a window's binding, if any, from its region.
    fn unbind(&mut self, id: u64) {
        let Some(binding) = self.mws.get_mut(&id).and_then(|mw| mw.binding.take()) else {
            return;
        };
        if let Some(mr) = self.mrs.get_mut(&binding.mr_lkey) {
            mr.bound_mws = mr.bound_mws.saturating_sub(1);
        }
    }

    /// Free the window whose current rkey is `rkey`, bound or not.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), MemError> {
        let (id, mw) = self.mw_by_rkey(rkey)?;
        let pd = mw.pd;
        self.unbind(id);
        self.mws.remove(&id);
        self.drop_key(rkey);
        self.release_pd(pd);
        Ok(())
    }

    /// SEND_WITH_INV / LOCAL_INV: invalidate the type-2 window whose rkey is `rkey`.
    ///
    /// The window becomes free: accesses through `rkey` fail with
    /// [`MemError::Invalidated`] until it is bound again, which gives it a new rkey.
    /// Invalidating a window that is already free succeeds, as in rxe. Naming a region's key
    /// or a type-1 window's (rxe `rxe_invalidate_mw`) is [`MemError::NotInvalidatable`],
    /// after which rxe moves the responder QP to error.
    pub fn invalidate(&mut self, pd: PdId, rkey: u32) -> Result<(), MemError> {
        let id = match self.index.get(&rkey) {
            None => return Err(MemError::UnknownKey { key: rkey }),
            Some(KeyRef::MrLocal | KeyRef::MrRemote(_)) => {
                return Err(MemError::NotInvalidatable);
            }
            Some(&KeyRef::Mw(id)) => id,
        };
        match self.mws.get(&id) {
            None => return Err(MemError::UnknownKey { key: rkey }),
            Some(mw) if mw.pd != pd => return Err(MemError::WrongPd),
            Some(mw) if mw.type1 => return Err(MemError::NotInvalidatable),
            Some(_) => {}
        }
        self.unbind(id);
        Ok(())
    }

    /// Allocates an unbound type-2 memory window whose rkey the caller chooses, for
    /// reproducing captures (a SEND_WITH_INV naming another device's window must find it).
    ///
    /// The key must be non-zero and not live ([`MemError::InvalidAccess`] otherwise).
    pub fn alloc_mw_with_key(&mut self, pd: PdId, rkey: u32) -> Result<u32, MemError> {
        self.use_pd(pd)?;
        if rkey == 0 || self.index.contains_key(&rkey) {
            return Err(MemError::InvalidAccess(
                "a chosen key must be non-zero and unused",
            ));
        }
        self.insert_mw(pd, rkey)
    }
}
