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
//!
//! The table's methods by what they do: here PDs and regions, `window` the type-2 windows
//! (allocation, binding, invalidation), `check` the checks of local and remote keys.

mod check;
mod window;

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
    /// A type-1 window: bound again while bound, never invalidated.
    type1: bool,
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
