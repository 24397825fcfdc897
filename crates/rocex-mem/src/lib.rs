/*! RoCE v2 memory protection, without I/O.

Every byte a peer or the local engine touches goes through this crate first. It keeps the
protection domains, memory regions (MRs) and type-2 memory windows (MWs) of one device, hands
out their keys, and checks each access against them:

* [`MemTable::check_lkey`] for local scatter/gather entries (send data, receive buffers,
  READ and atomic response targets);
* [`MemTable::check_rkey`] for the rkey, address and length a peer sends in a RETH or
  AtomicETH (READ, WRITE, atomics, ATOMIC_WRITE, FLUSH), through an MR or a bound MW, and
  [`MemTable::check_rkey_whole`] for a FLUSH of everything an rkey covers;
* [`MemTable::invalidate`] for SEND_WITH_INV and LOCAL_INV.

A successful check returns a [`Target`]: the region and the byte range the check granted.
The engine reads, writes, runs atomics and flushes only through it, and the target checks
bounds again on every call.

The memory itself sits behind the [`Region`] trait: the daemon implements it over the shared
memory an application registered, tests use [`VecRegion`]. So the crate opens no socket,
reads no clock, starts no thread and maps no memory; its only randomness is ChaCha20 seeded
by the caller ([`MemTable::new`]), which makes keys unpredictable to a peer and runs
reproducible for tests.

# Guarantees
* No `unsafe`, and no panic on any input: hostile keys, addresses and lengths, including
  ranges whose end would pass `u64::MAX`, come back as a [`MemError`].
* Keys are 32 random bits, never 0, unique among live keys, an MR's lkey differs from its
  rkey, and a retired key is not reissued for the next few thousand retirements.
* An `Ok` target lies inside the MR (and the MW) the key names.

# Rules
* REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE, on an MR and on the MR under an MW with
  those rights; FLUSH_PERSISTENT needs a region whose [`Region::persistent`] is true.
* ZERO_BASED makes remote addresses count from 0 at the MR's (or MW's) first byte; local
  addresses always start at the MR's iova.
* A zero-length local entry is valid without any lookup (rxe `copy_data` skips it). A
  remote key is always looked up: a zero-byte READ or WRITE, which needs no valid key
  (IBTA C9-88), is for the engine to skip. [`MemTable::check_rkey_whole`] checks a key
  for a FLUSH of its whole region.
* A type-2 MW is bound only while free; each bind gives it a new rkey and the old one stops
  working. Invalidation frees it. An MR's rkey cannot be invalidated
  ([`MemError::NotInvalidatable`]).
* A PD cannot be freed while MRs or MWs use it, nor an MR while MWs are bound to it.
*/
#![forbid(unsafe_code)]

mod error;
mod key;
mod region;
mod table;
mod target;

pub use error::MemError;
pub use region::{AccessFault, FlushError, Region, SubRegion, VecRegion};
pub use rocex_verbs_types::Access;
pub use table::{Keys, MemTable, MrInfo, MwBinding, MwInfo, PdId};
pub use target::Target;
