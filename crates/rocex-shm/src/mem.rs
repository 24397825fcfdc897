//! A safe, bounds-checked view of shared memory.
//!
//! Everything above the mapping goes through [`ShmView`]: a slice of `AtomicU32` words. The
//! other process may write any byte at any time, so every offset is checked, every failure
//! is a [`MemError`], never a panic, and no Rust reference to the bytes is ever formed.
//! Accesses of up to [`BULK`] bytes are atomic loads and stores of whole words. A longer
//! copy is one `memcpy` between the view and private memory, as vm-memory copies guest
//! memory: one pass at `memcpy`'s speed rather than a word loop's third of it, and no less
//! atomic than that loop, whose copy was never atomic as a whole either. Bytes are packed
//! into words in native byte order, which is what a `#[repr(C)]` struct laid over the same
//! memory sees.
//!
//! [`HeapMem`] backs a view with an ordinary allocation, for tests and for loom.

use crate::sync::{AtomicU32, Ordering};
use core::fmt;

/// Copies longer than this many bytes are one `memcpy`; shorter ones go word by word.
pub const BULK: usize = 8;

/// An access outside the view, or at an offset the access cannot use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemError {
    /// Byte offset of the access.
    pub offset: usize,
    /// Bytes the access wanted.
    pub len: usize,
    /// Bytes in the view.
    pub size: usize,
}

impl fmt::Display for MemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shared-memory access of {} bytes at offset {} is outside a {}-byte view or not 4-byte aligned",
            self.len, self.offset, self.size
        )
    }
}

impl std::error::Error for MemError {}

/// A view of shared memory as 32-bit atomic words.
#[derive(Clone, Copy)]
pub struct ShmView<'a> {
    words: &'a [AtomicU32],
}

impl fmt::Debug for ShmView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmView")
            .field("bytes", &self.len())
            .finish()
    }
}

impl<'a> ShmView<'a> {
    /// A view of these words.
    pub fn new(words: &'a [AtomicU32]) -> Self {
        Self { words }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.words.len() * 4
    }

    /// True when the view has no bytes.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    fn err(&self, offset: usize, len: usize) -> MemError {
        MemError {
            offset,
            len,
            size: self.len(),
        }
    }

    /// The sub-view of `len` bytes at `offset`; both must be multiples of 4.
    pub fn sub(&self, offset: usize, len: usize) -> Result<Self, MemError> {
        let words = self.word_range(offset, len)?;
        Ok(Self {
            words: &self.words[words],
        })
    }

    fn word_range(&self, offset: usize, len: usize) -> Result<core::ops::Range<usize>, MemError> {
        if offset % 4 != 0 || len % 4 != 0 {
            return Err(self.err(offset, len));
        }
        let end = offset.checked_add(len).ok_or(self.err(offset, len))?;
        if end > self.len() {
            return Err(self.err(offset, len));
        }
        Ok(offset / 4..end / 4)
    }

    /// The atomic word at byte `offset` (a multiple of 4).
    pub fn word(&self, offset: usize) -> Result<&'a AtomicU32, MemError> {
        let r = self.word_range(offset, 4)?;
        Ok(&self.words[r.start])
    }

    /// Copies `out.len()` bytes (a multiple of 4) from `offset`. The copy is a snapshot the
    /// caller can check and use without the other side changing it in between.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), MemError> {
        let r = self.word_range(offset, out.len())?;
        #[cfg(not(loom))]
        if out.len() > BULK {
            let src = self.words[r].as_ptr().cast::<u8>();
            // SAFETY: `src` covers the `out.len()` bytes of the checked range, which lie in
            // the view's words (AtomicU32 has u32's size, and any bit pattern is a valid u8);
            // `out` is private memory, so the two do not overlap. The words are UnsafeCells
            // that this process changes only through the view, and never under a reference.
            unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
            return Ok(());
        }
        for (w, chunk) in self.words[r].iter().zip(out.chunks_exact_mut(4)) {
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        Ok(())
    }

    /// Copies `data` (a multiple of 4 bytes) to `offset`; a later release store of an
    /// index publishes it.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), MemError> {
        let r = self.word_range(offset, data.len())?;
        #[cfg(not(loom))]
        if data.len() > BULK {
            // A pointer from the slice (not one word) spans the whole range; the words are
            // UnsafeCells, so a shared borrow of them may be written through it.
            let dst = self.words[r].as_ptr().cast::<u8>().cast_mut();
            // SAFETY: as in `read`: `dst` covers the checked range inside the view, `data`
            // is private memory, and nothing holds a reference to the words' contents.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
            return Ok(());
        }
        for (w, chunk) in self.words[r].iter().zip(data.chunks_exact(4)) {
            let mut b = [0u8; 4];
            b.copy_from_slice(chunk);
            w.store(u32::from_ne_bytes(b), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Zeroes `len` bytes at `offset`.
    pub fn zero(&self, offset: usize, len: usize) -> Result<(), MemError> {
        let r = self.word_range(offset, len)?;
        for w in &self.words[r] {
            w.store(0, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Shared memory on the heap: the same view type, without a mapping.
pub struct HeapMem {
    words: Box<[AtomicU32]>,
}

impl fmt::Debug for HeapMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeapMem")
            .field("bytes", &(self.words.len() * 4))
            .finish()
    }
}

impl HeapMem {
    /// `bytes` zeroed bytes, rounded up to a multiple of 4.
    pub fn new(bytes: usize) -> Self {
        Self {
            words: (0..bytes.div_ceil(4)).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The whole allocation.
    pub fn view(&self) -> ShmView<'_> {
        ShmView::new(&self.words)
    }
}
