//! Protection domains, memory regions and type-2 memory windows, and the checks on them.
//!
//! Every key, local or remote, lives in one index, so a key names exactly one object in
//! exactly one role: a region's lkey, a region's rkey, or a window's current rkey. A key
//! used in another role is unknown in that role; an lkey is never accepted as an rkey.
//!
//! A region's bytes start at offset 0 of its [`Region`] and its first byte has the address
//! `iova`. Local accesses always use `iova`-based addresses. Remote accesses do too, unless
//! the region (or window) is [`Access::ZERO_BASED`], in which case the remote address counts
//! from 0 at its first byte.
//!
//! Checks run in rxe's order: the key, then the protection domain, then the window's state,
//! then the rights, then the range. A range whose end does not fit in 64 bits is
//! [`MemError::Overflow`] and never wraps.

use core::fmt;
// Keys are the table's own random numbers; a packet's rkey only looks one up.
use foldhash::{HashMap, HashMapExt};
use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::key::KeyGen;
use crate::{Access, MemError, Region, Target};

/// A protection domain.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct PdId(u32);

impl PdId {
    /// The id with this raw value (as carried over the application interface).
    pub const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// The raw value.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

impl fmt::Display for PdId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The two keys of a memory region.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Keys {
    /// Key for local scatter/gather entries.
    pub lkey: u32,
    /// Key a peer puts in RETH or AtomicETH.
    pub rkey: u32,
}

/// What the table knows about a memory region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrInfo {
    /// Its protection domain.
    pub pd: PdId,
    /// Its keys.
    pub keys: Keys,
    /// Address of its first byte.
    pub iova: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights it grants.
    pub access: Access,
    /// Memory windows bound to it now.
    pub bound_mws: u32,
}

/// The place a type-2 memory window is bound to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MwBinding {
    /// lkey of the region it lies in.
    pub mr_lkey: u32,
    /// Address of its first byte, in the region's `iova` space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Rights it grants.
    pub access: Access,
}

/// What the table knows about a type-2 memory window.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MwInfo {
    /// Its protection domain.
    pub pd: PdId,
    /// Its current rkey (valid for access only while bound).
    pub rkey: u32,
    /// Where it is bound, or `None` when it is free (never bound, or invalidated).
    pub binding: Option<MwBinding>,
}

struct Mr {
    pd: PdId,
    keys: Keys,
    iova: u64,
    len: u64,
    access: Access,
    region: Arc<dyn Region>,
    bound_mws: u32,
}

struct Mw {
    pd: PdId,
    rkey: u32,
    binding: Option<MwBinding>,
}

/// The role a live key plays.
#[derive(Clone, Copy)]
enum KeyRef {
    /// The lkey of the region with this lkey.
    MrLocal,
    /// The rkey of the region with this lkey.
    MrRemote(u32),
    /// The current rkey of the window with this id.
    Mw(u64),
}

/// What a remote key reaches: `len` bytes from byte `offset` of `region`, addressed from
/// `base` by the peer.
struct Remote<'a> {
    region: &'a Arc<dyn Region>,
    base: u64,
    offset: u64,
    len: u64,
}

/// The rights an lkey can grant.
const LOCAL: Access = Access::LOCAL_WRITE;

/// Rights a window can grant; other bits of a bind request are ignored, except `MW_BIND`.
const MW_GRANTABLE: Access = Access::REMOTE.union(Access::ZERO_BASED);

/// The protection domains, regions and windows of one device, with their keys.
pub struct MemTable {
    keygen: KeyGen,
    next_pd: u32,
    /// Live PDs and how many regions and windows use each.
    pds: HashMap<PdId, u32>,
    /// Regions by lkey.
    mrs: HashMap<u32, Mr>,
    /// Windows by a private id, since a window's rkey changes on each bind.
    mws: HashMap<u64, Mw>,
    next_mw: u64,
    /// Every live key.
    index: HashMap<u32, KeyRef>,
}

impl MemTable {
    /// An empty table whose keys come from ChaCha20 seeded with `seed`.
    pub fn new(seed: [u8; 32]) -> Self {
        Self {
            keygen: KeyGen::new(seed),
            next_pd: 0,
            pds: HashMap::new(),
            mrs: HashMap::new(),
            mws: HashMap::new(),
            next_mw: 0,
            index: HashMap::new(),
        }
    }

    /// Live protection domains.
    pub fn pd_count(&self) -> usize {
        self.pds.len()
    }

    /// Live memory regions.
    pub fn mr_count(&self) -> usize {
        self.mrs.len()
    }

    /// Live memory windows, bound or not.
    pub fn mw_count(&self) -> usize {
        self.mws.len()
    }

    /// The region whose lkey is `lkey`.
    pub fn mr(&self, lkey: u32) -> Option<MrInfo> {
        self.mrs.get(&lkey).map(|mr| MrInfo {
            pd: mr.pd,
            keys: mr.keys,
            iova: mr.iova,
            len: mr.len,
            access: mr.access,
            bound_mws: mr.bound_mws,
        })
    }

    /// The window whose current rkey is `rkey`.
    pub fn mw(&self, rkey: u32) -> Option<MwInfo> {
        let mw = self.mw_by_rkey(rkey).ok()?.1;
        Some(MwInfo {
            pd: mw.pd,
            rkey: mw.rkey,
            binding: mw.binding,
        })
    }

    /// A new protection domain. Ids are small and sequential; they are not secrets.
    pub fn alloc_pd(&mut self) -> PdId {
        loop {
            self.next_pd = self.next_pd.wrapping_add(1);
            let pd = PdId(self.next_pd);
            if pd.0 != 0 {
                if let Entry::Vacant(slot) = self.pds.entry(pd) {
                    slot.insert(0);
                    return pd;
                }
            }
        }
    }

    /// Free a protection domain; [`MemError::Busy`] while regions or windows use it.
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), MemError> {
        match self.pds.get(&pd) {
            None => Err(MemError::UnknownPd { pd }),
            Some(&users) if users > 0 => Err(MemError::Busy),
            Some(_) => {
                self.pds.remove(&pd);
                Ok(())
            }
        }
    }

    fn use_pd(&mut self, pd: PdId) -> Result<&mut u32, MemError> {
        self.pds.get_mut(&pd).ok_or(MemError::UnknownPd { pd })
    }

    fn release_pd(&mut self, pd: PdId) {
        if let Some(users) = self.pds.get_mut(&pd) {
            *users = users.saturating_sub(1);
        }
    }

    fn fresh_key(&mut self) -> Result<u32, MemError> {
        let index = &self.index;
        self.keygen.fresh(|k| index.contains_key(&k))
    }

    fn drop_key(&mut self, key: u32) {
        self.index.remove(&key);
        self.keygen.retire(key);
    }

    /// Register the first `len` bytes of `region` as a memory region whose first byte has
    /// the address `iova`.
    ///
    /// As in verbs, REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE, and FLUSH_PERSISTENT
    /// needs a region that can persist.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
    ) -> Result<Keys, MemError> {
        self.use_pd(pd)?;
        check_registration(iova, len, access, region.as_ref())?;
        let lkey = self.fresh_key()?;
        self.index.insert(lkey, KeyRef::MrLocal);
        let rkey = match self.fresh_key() {
            Ok(rkey) => rkey,
            Err(e) => {
                self.index.remove(&lkey);
                return Err(e);
            }
        };
        self.index.insert(rkey, KeyRef::MrRemote(lkey));
        let keys = Keys { lkey, rkey };
        self.insert_mr(pd, keys, iova, len, access, region)
    }

    /// Records a checked registration whose keys are already indexed.
    fn insert_mr(
        &mut self,
        pd: PdId,
        keys: Keys,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
    ) -> Result<Keys, MemError> {
        let mr = Mr {
            pd,
            keys,
            iova,
            len,
            access,
            region,
            bound_mws: 0,
        };
        self.mrs.insert(keys.lkey, mr);
        *self.use_pd(pd)? += 1;
        Ok(keys)
    }

    /// Deregister the region with this lkey; [`MemError::Busy`] while windows are bound to it.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), MemError> {
        let mr = self
            .mrs
            .get(&lkey)
            .ok_or(MemError::UnknownKey { key: lkey })?;
        if mr.bound_mws > 0 {
            return Err(MemError::Busy);
        }
        let (pd, keys) = (mr.pd, mr.keys);
        self.mrs.remove(&lkey);
        self.drop_key(keys.lkey);
        self.drop_key(keys.rkey);
        self.release_pd(pd);
        Ok(())
    }

    /// A new, unbound type-2 memory window; returns its rkey.
    pub fn alloc_mw(&mut self, pd: PdId) -> Result<u32, MemError> {
        self.use_pd(pd)?;
        let rkey = self.fresh_key()?;
        self.insert_mw(pd, rkey)
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
            },
        );
        self.index.insert(rkey, KeyRef::Mw(id));
        *self.use_pd(pd)? += 1;
        Ok(rkey)
    }

    fn mw_by_rkey(&self, rkey: u32) -> Result<(u64, &Mw), MemError> {
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
        self.bind(pd, mw_rkey, mr_lkey, addr, len, access, false)
    }

    /// Binds the free window `mw_rkey` as [`MemTable::bind_mw`] does, under the same rules,
    /// but the window keeps its rkey, for reproducing captures: a replay of another
    /// device's traffic must reach a bound window through the rkey that device handed out.
    /// Never use this for real traffic: a window whose rkey does not change on a bind is
    /// reachable by a peer that kept the old key.
    pub fn bind_mw_keeping_key(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, MemError> {
        self.bind(pd, mw_rkey, mr_lkey, addr, len, access, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn bind(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
        keep_key: bool,
    ) -> Result<u32, MemError> {
        let (id, mw) = self.mw_by_rkey(mw_rkey)?;
        if mw.pd != pd {
            return Err(MemError::WrongPd);
        }
        if mw.binding.is_some() {
            return Err(MemError::MwBound);
        }
        let mr = self
            .mrs
            .get(&mr_lkey)
            .ok_or(MemError::UnknownKey { key: mr_lkey })?;
        if mr.pd != pd {
            return Err(MemError::WrongPd);
        }
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
    /// is [`MemError::NotInvalidatable`], after which rxe moves the responder QP to error.
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
            Some(_) => {}
        }
        self.unbind(id);
        Ok(())
    }

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
        let mr = self
            .mrs
            .get(&lkey)
            .ok_or(MemError::UnknownKey { key: lkey })?;
        if mr.pd != pd {
            return Err(MemError::WrongPd);
        }
        let have = mr.access & LOCAL;
        if !have.contains(need) {
            return Err(MemError::AccessDenied { need, have });
        }
        let offset = within(addr, len, mr.iova, mr.len)?;
        Ok(Target::new(&mr.region, offset, len))
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

    /// Registers a memory region under keys the caller chooses, for reproducing captures:
    /// a replay of another device's traffic must accept the rkeys that device handed out.
    ///
    /// Same rules as [`MemTable::reg_mr`]; in addition both keys must be non-zero, differ
    /// from each other and from every live key ([`MemError::InvalidAccess`] otherwise).
    /// Never use this for real traffic: chosen keys are guessable.
    pub fn reg_mr_with_keys(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
        keys: Keys,
    ) -> Result<Keys, MemError> {
        self.use_pd(pd)?;
        if keys.lkey == 0 || keys.rkey == 0 || keys.lkey == keys.rkey {
            return Err(MemError::InvalidAccess(
                "chosen keys must be non-zero and distinct",
            ));
        }
        if self.index.contains_key(&keys.lkey) || self.index.contains_key(&keys.rkey) {
            return Err(MemError::InvalidAccess("a chosen key is already in use"));
        }
        check_registration(iova, len, access, region.as_ref())?;
        self.index.insert(keys.lkey, KeyRef::MrLocal);
        self.index.insert(keys.rkey, KeyRef::MrRemote(keys.lkey));
        self.insert_mr(pd, keys, iova, len, access, region)
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

impl fmt::Debug for MemTable {
    /// Counts only: keys and generator state are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("pds", &self.pds.len())
            .field("mrs", &self.mrs.len())
            .field("mws", &self.mws.len())
            .finish_non_exhaustive()
    }
}

/// The verbs rules for a registration: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE,
/// FLUSH_PERSISTENT needs memory that can persist, and the range must fit the region.
fn check_registration(
    iova: u64,
    len: u64,
    access: Access,
    region: &dyn Region,
) -> Result<(), MemError> {
    if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(MemError::InvalidAccess(
            "remote write and remote atomic access need local write",
        ));
    }
    if access.contains(Access::FLUSH_PERSISTENT) && !region.persistent() {
        return Err(MemError::InvalidAccess(
            "persistent flush needs memory that can persist",
        ));
    }
    iova.checked_add(len).ok_or(MemError::Overflow)?;
    let available = region.len();
    if len > available {
        return Err(MemError::RegionTooShort { len, available });
    }
    Ok(())
}
