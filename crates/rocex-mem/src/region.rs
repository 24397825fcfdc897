//! The bytes behind a memory region, kept behind a trait so this crate never maps memory.
//!
//! The daemon implements [`Region`] over the shared memory an application registered; tests
//! and simulations use [`VecRegion`]. [`MemTable`](crate::MemTable) checks every offset
//! before it calls a `Region`, so an implementation may assume its arguments are in bounds.

use core::fmt;
use std::sync::{Mutex, MutexGuard};

/// Backing bytes of a region. The daemon implements it over shared memory; tests over a Vec.
///
/// Callers (through [`Target`](crate::Target)) guarantee `offset + len <= self.len()` for
/// every call, and an 8-aligned offset for the 8-byte atomics.
pub trait Region: Send + Sync + fmt::Debug {
    /// Length in bytes.
    fn len(&self) -> u64;

    /// Whether the region has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `buf.len()` bytes starting at `offset` into `buf`.
    fn read(&self, offset: u64, buf: &mut [u8]);

    /// Copy `data` into the region starting at `offset`.
    fn write(&self, offset: u64, data: &[u8]);

    /// Atomically replace the 8 bytes at `offset` (host byte order) with `swap` if they equal
    /// `compare`; return the original value.
    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64;

    /// Atomically add `add` (wrapping) to the 8 bytes at `offset`; return the original value.
    fn fetch_add(&self, offset: u64, add: u64) -> u64;

    /// Atomically store the 8 bytes at `offset`.
    fn atomic_write(&self, offset: u64, value: u64);

    /// Make `[offset, offset + len)` visible (global) or persistent. By default the
    /// region's stores are visible as soon as they are made, so a global flush has nothing
    /// to do, and a persistent one succeeds only where [`persistent`](Self::persistent)
    /// says so.
    fn flush(&self, _offset: u64, _len: u64, persistent: bool) -> Result<(), FlushError> {
        if persistent && !self.persistent() {
            Err(FlushError::NotPersistent)
        } else {
            Ok(())
        }
    }

    /// Whether `flush(persistent = true)` can succeed (file-backed or pmem memory).
    fn persistent(&self) -> bool {
        false
    }

    /// [`read`](Self::read) for memory that can become unreachable (another process's
    /// pages, which it may unmap): the engine calls these, and such a region overrides them.
    fn try_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessFault> {
        self.read(offset, buf);
        Ok(())
    }

    /// [`write`](Self::write), failing when the memory is unreachable.
    fn try_write(&self, offset: u64, data: &[u8]) -> Result<(), AccessFault> {
        self.write(offset, data);
        Ok(())
    }

    /// [`compare_swap`](Self::compare_swap), failing when the memory is unreachable.
    fn try_compare_swap(&self, offset: u64, compare: u64, swap: u64) -> Result<u64, AccessFault> {
        Ok(self.compare_swap(offset, compare, swap))
    }

    /// [`fetch_add`](Self::fetch_add), failing when the memory is unreachable.
    fn try_fetch_add(&self, offset: u64, add: u64) -> Result<u64, AccessFault> {
        Ok(self.fetch_add(offset, add))
    }

    /// [`atomic_write`](Self::atomic_write), failing when the memory is unreachable.
    fn try_atomic_write(&self, offset: u64, value: u64) -> Result<(), AccessFault> {
        self.atomic_write(offset, value);
        Ok(())
    }
}

/// The memory behind a region could not be reached: its owner unmapped it or exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessFault {
    /// Offset in the region of the access that failed.
    pub offset: u64,
    /// Length of the access.
    pub len: u64,
    /// What the operating system answered.
    pub kind: std::io::ErrorKind,
}

impl fmt::Display for AccessFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "The {} bytes at offset {:#x} of the region could not be reached: {}.",
            self.len, self.offset, self.kind
        )
    }
}

impl std::error::Error for AccessFault {}

/// Why a region could not flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlushError {
    /// Persistence was asked of memory that cannot persist.
    NotPersistent,
    /// The operating system refused the flush.
    Io(std::io::ErrorKind),
}

impl fmt::Display for FlushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotPersistent => f.write_str("The region's memory cannot be made persistent."),
            Self::Io(kind) => write!(f, "The flush failed with an I/O error: {kind}."),
        }
    }
}

impl std::error::Error for FlushError {}

/// A [`Region`] over a `Vec<u8>` behind a mutex, for tests and simulations.
///
/// Calls outside the bounds the trait promises do nothing (reads leave `buf` as it was,
/// atomics return 0) rather than panic.
#[derive(Debug, Default)]
pub struct VecRegion {
    bytes: Mutex<Vec<u8>>,
    persistent: bool,
}

impl VecRegion {
    /// A zero-filled, non-persistent region of `len` bytes.
    pub fn new(len: usize) -> Self {
        Self::from_bytes(vec![0; len])
    }

    /// A non-persistent region holding `bytes`.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            bytes: Mutex::new(bytes.into()),
            persistent: false,
        }
    }

    /// The same region, reporting itself persistent (or not) to [`Region::persistent`].
    #[must_use]
    pub fn with_persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// A copy of the current contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        // Every write leaves the bytes whole, so a poisoned lock still guards valid data.
        self.bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The eight bytes at `offset`, or `None` when they are not all inside `bytes`.
    fn word(bytes: &mut [u8], offset: u64) -> Option<&mut [u8; 8]> {
        let start = usize::try_from(offset).ok()?;
        bytes.get_mut(start..start.checked_add(8)?)?.try_into().ok()
    }

    fn update(&self, offset: u64, f: impl FnOnce(u64) -> u64) -> u64 {
        let mut bytes = self.lock();
        match Self::word(&mut bytes, offset) {
            Some(word) => {
                let old = u64::from_ne_bytes(*word);
                *word = f(old).to_ne_bytes();
                old
            }
            None => 0,
        }
    }
}

/// The bytes `[offset, offset + len)` of another region, as a region of its own: several
/// memory regions can then be registered over the same memory at different addresses, as
/// an application registers parts of one buffer (and as a replay of a capture must, when
/// the peer's rkeys reach the same bytes).
#[derive(Debug)]
pub struct SubRegion {
    inner: std::sync::Arc<dyn Region>,
    offset: u64,
    len: u64,
}

impl SubRegion {
    /// `[offset, offset + len)` of `inner`, or `None` when that range is not inside it.
    pub fn new(inner: std::sync::Arc<dyn Region>, offset: u64, len: u64) -> Option<Self> {
        (offset.checked_add(len)? <= inner.len()).then_some(Self { inner, offset, len })
    }
}

impl Region for SubRegion {
    fn len(&self) -> u64 {
        self.len
    }
    // Callers keep offset + len within self.len, so offset + self.offset stays inside
    // `inner` (checked in `new`).
    fn read(&self, offset: u64, buf: &mut [u8]) {
        self.inner.read(self.offset + offset, buf);
    }
    fn write(&self, offset: u64, data: &[u8]) {
        self.inner.write(self.offset + offset, data);
    }
    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.inner.compare_swap(self.offset + offset, compare, swap)
    }
    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.inner.fetch_add(self.offset + offset, add)
    }
    fn atomic_write(&self, offset: u64, value: u64) {
        self.inner.atomic_write(self.offset + offset, value);
    }
    fn flush(&self, offset: u64, len: u64, persistent: bool) -> Result<(), FlushError> {
        self.inner.flush(self.offset + offset, len, persistent)
    }
    fn persistent(&self) -> bool {
        self.inner.persistent()
    }
    fn try_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessFault> {
        self.inner.try_read(self.offset + offset, buf)
    }
    fn try_write(&self, offset: u64, data: &[u8]) -> Result<(), AccessFault> {
        self.inner.try_write(self.offset + offset, data)
    }
    fn try_compare_swap(&self, offset: u64, compare: u64, swap: u64) -> Result<u64, AccessFault> {
        self.inner
            .try_compare_swap(self.offset + offset, compare, swap)
    }
    fn try_fetch_add(&self, offset: u64, add: u64) -> Result<u64, AccessFault> {
        self.inner.try_fetch_add(self.offset + offset, add)
    }
    fn try_atomic_write(&self, offset: u64, value: u64) -> Result<(), AccessFault> {
        self.inner.try_atomic_write(self.offset + offset, value)
    }
}

/// The byte range `[offset, offset + len)` as indices, if it fits in `usize`.
fn span(offset: u64, len: usize) -> Option<core::ops::Range<usize>> {
    let start = usize::try_from(offset).ok()?;
    Some(start..start.checked_add(len)?)
}

impl Region for VecRegion {
    fn len(&self) -> u64 {
        self.lock().len() as u64
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        let bytes = self.lock();
        if let Some(src) = span(offset, buf.len()).and_then(|r| bytes.get(r)) {
            buf.copy_from_slice(src);
        }
    }

    fn write(&self, offset: u64, data: &[u8]) {
        let mut bytes = self.lock();
        if let Some(dst) = span(offset, data.len()).and_then(|r| bytes.get_mut(r)) {
            dst.copy_from_slice(data);
        }
    }

    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.update(offset, |old| if old == compare { swap } else { old })
    }

    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.update(offset, |old| old.wrapping_add(add))
    }

    fn atomic_write(&self, offset: u64, value: u64) {
        self.update(offset, |_| value);
    }

    fn persistent(&self) -> bool {
        self.persistent
    }
}

#[cfg(test)]
mod tests {
    use super::{FlushError, Region, VecRegion};

    #[test]
    fn vec_region_round_trips_and_ignores_out_of_contract_calls() {
        let r = VecRegion::new(16);
        r.write(8, &7u64.to_ne_bytes());
        assert_eq!(r.fetch_add(8, 3), 7);
        assert_eq!(r.compare_swap(8, 10, 99), 10);
        assert_eq!(r.compare_swap(8, 10, 5), 99);
        r.atomic_write(0, u64::MAX);
        let mut buf = [0u8; 16];
        r.read(0, &mut buf);
        assert_eq!(buf, *r.snapshot());
        // Out of contract: nothing happens, nothing panics.
        r.write(u64::MAX, &[1, 2]);
        r.read(12, &mut [0u8; 8]);
        assert_eq!(r.fetch_add(12, 1), 0);
        assert_eq!(r.snapshot(), buf);
    }

    #[test]
    fn a_sub_region_is_a_view_of_the_same_bytes() {
        use std::sync::Arc;
        let whole = Arc::new(VecRegion::new(32).with_persistent(true));
        let sub = super::SubRegion::new(whole.clone(), 8, 16).unwrap();
        assert_eq!((sub.len(), sub.persistent()), (16, true));
        sub.write(8, &7u64.to_ne_bytes());
        assert_eq!(whole.fetch_add(16, 1), 7);
        assert_eq!(sub.compare_swap(8, 8, 9), 8);
        let mut b = [0u8; 8];
        whole.read(16, &mut b);
        assert_eq!(u64::from_ne_bytes(b), 9);
        assert!(super::SubRegion::new(whole.clone(), 17, 16).is_none());
        assert!(super::SubRegion::new(whole, u64::MAX, 2).is_none());
    }

    #[test]
    fn flush_persistence_follows_the_flag() {
        let plain = VecRegion::new(8);
        assert_eq!(plain.flush(0, 8, false), Ok(()));
        assert_eq!(plain.flush(0, 8, true), Err(FlushError::NotPersistent));
        let pmem = VecRegion::new(8).with_persistent(true);
        assert!(pmem.persistent());
        assert_eq!(pmem.flush(0, 8, true), Ok(()));
    }
}
