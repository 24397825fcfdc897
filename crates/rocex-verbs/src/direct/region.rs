//! The engine's view of memory registered on a direct context: bytes of this process,
//! reached through a pointer, as `ibv_reg_mr` promises a device may reach them until the
//! region is deregistered.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rocex_proto::Region;
use rocex_shm::SharedRegion;

/// `len` bytes of this process at `base`: a library-allocated memfd mapping (kept alive
/// by `keep`) or memory the caller registered and keeps valid until it deregisters.
#[derive(Debug)]
pub(crate) struct LocalRegion {
    base: *mut u8,
    len: usize,
    _keep: Option<Arc<SharedRegion>>,
}

// SAFETY: the region is plain memory of this process, valid for as long as it is
// registered (a mapping it owns, or the caller's promise); every access goes through a
// raw pointer under the engine's lock, as the device's accesses do, and the 8-byte
// atomics are hardware atomics, so sharing it between threads adds no race the
// application did not already accept by registering the memory.
unsafe impl Send for LocalRegion {}
// SAFETY: as above.
unsafe impl Sync for LocalRegion {}

impl LocalRegion {
    /// `len` bytes at byte `offset` of `map`; `None` when they do not lie inside it.
    pub(crate) fn in_map(map: Arc<SharedRegion>, offset: u64, len: usize) -> Option<Self> {
        let off = usize::try_from(offset).ok()?;
        if off.checked_add(len)? > map.len() {
            return None;
        }
        let word = map.view().word(0).ok()?;
        // The mapping's first word: the whole mapping lies behind it, and the view hands
        // out its words as cells that may be written through a shared pointer.
        let base = word.as_ptr().cast::<u8>().wrapping_add(off);
        Some(Self {
            base,
            len,
            _keep: Some(map),
        })
    }

    /// `len` bytes at `addr` of this process.
    ///
    /// # Safety
    ///
    /// The memory must stay mapped and writable until the region is dropped (the MR
    /// deregistered), and the program must hold no Rust reference into it meanwhile.
    pub(crate) unsafe fn process(addr: u64, len: usize) -> Self {
        Self {
            base: addr as usize as *mut u8,
            len,
            _keep: None,
        }
    }

    /// The pointer to `n` bytes at `offset`, or `None` outside the region.
    fn at(&self, offset: u64, n: usize) -> Option<*mut u8> {
        let off = usize::try_from(offset).ok()?;
        (off.checked_add(n)? <= self.len).then(|| self.base.wrapping_add(off))
    }

    /// The 8 bytes at `offset` as an atomic word, when they lie inside and are aligned
    /// (the engine checks an atomic's address for 8-byte alignment).
    fn word(&self, offset: u64) -> Option<&AtomicU64> {
        let p = self.at(offset, 8)?;
        if p.align_offset(8) != 0 {
            return None;
        }
        // SAFETY: `p` is 8-aligned and its 8 bytes lie inside the region, which is live
        // memory (see `LocalRegion`); any bit pattern is a valid u64, and every access
        // the engine makes to these bytes while it holds the word is atomic.
        Some(unsafe { AtomicU64::from_ptr(p.cast()) })
    }
}

impl Region for LocalRegion {
    fn len(&self) -> u64 {
        self.len as u64
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        if let Some(p) = self.at(offset, buf.len()) {
            // SAFETY: `p` covers `buf.len()` bytes of the live region; `buf` is the
            // engine's own memory, so the two do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(p, buf.as_mut_ptr(), buf.len()) };
        }
    }

    fn write(&self, offset: u64, data: &[u8]) {
        if let Some(p) = self.at(offset, data.len()) {
            // SAFETY: as in `read`, the other way.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        }
    }

    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.word(offset).map_or(0, |w| {
            match w.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            }
        })
    }

    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.word(offset)
            .map_or(0, |w| w.fetch_add(add, Ordering::AcqRel))
    }

    fn atomic_write(&self, offset: u64, value: u64) {
        if let Some(w) = self.word(offset) {
            w.store(value, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_bounds_copies_and_atomics() {
        let map = Arc::new(SharedRegion::create("t", 4096).unwrap());
        let r = LocalRegion::in_map(map.clone(), 8, 100).unwrap();
        r.write(3, &[1, 2, 3]);
        let mut b = [0u8; 5];
        r.read(2, &mut b);
        assert_eq!(b, [0, 1, 2, 3, 0]);
        let mut w = [0u8; 4];
        map.view().read(8, &mut w).unwrap();
        assert_eq!(
            w,
            [0, 0, 0, 1],
            "the bytes land in the mapping at the offset"
        );
        // Outside: nothing moves.
        r.write(99, &[9, 9]);
        r.read(u64::MAX, &mut b);
        assert_eq!(b, [0, 1, 2, 3, 0]);
        assert!(LocalRegion::in_map(map, 4000, 100).is_none());
        r.atomic_write(8, 5);
        assert_eq!(r.fetch_add(8, 3), 5);
        assert_eq!(r.compare_swap(8, 8, 100), 8);
        assert_eq!(r.compare_swap(8, 8, 1), 100);
        assert_eq!(r.fetch_add(9, 1), 0, "a misaligned atomic touches nothing");
    }
}
