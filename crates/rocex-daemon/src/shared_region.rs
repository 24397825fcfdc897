//! A memory region backed by a client's memfd, mapped by the daemon (zero copy).
//!
//! The engine moves data through [`rocex_proto::Region`]; this implementation reads and
//! writes the client's pages through [`rocex_shm::ShmView`], the bounds-checked atomic
//! view, so a client that scribbles on its buffer while the daemon copies it can corrupt
//! only its own data, never the daemon. The view works in aligned 4-byte words; unaligned
//! edges are merged with a compare-and-swap loop so bytes next to a transfer that the
//! client owns are not overwritten.
//!
//! The 8-byte atomics (FETCH_ADD, CMP_SWAP, ATOMIC_WRITE) are atomic with respect to every
//! other RDMA atomic on this device (`IBV_ATOMIC_HCA`), because one engine thread executes
//! all of them; they are not atomic with respect to the CPU of the client, as with most
//! hardware RNICs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rocex_proto::Region;
use rocex_shm::{SharedRegion, ShmView};

/// `len` bytes at byte `base` of a mapped client memfd.
#[derive(Debug)]
pub(crate) struct MappedRegion {
    map: Arc<SharedRegion>,
    base: usize,
    len: usize,
}

impl MappedRegion {
    /// The range `[base, base + len)` of `map`; `None` when it does not lie inside.
    pub(crate) fn new(map: Arc<SharedRegion>, base: u64, len: u64) -> Option<Self> {
        let base = usize::try_from(base).ok()?;
        let len = usize::try_from(len).ok()?;
        (base.checked_add(len)? <= map.len()).then_some(Self { map, base, len })
    }

    fn view(&self) -> ShmView<'_> {
        self.map.view()
    }

    /// The absolute byte range of an access, or `None` outside the region.
    fn span(&self, offset: u64, n: usize) -> Option<usize> {
        let off = usize::try_from(offset).ok()?;
        (off.checked_add(n)? <= self.len).then_some(self.base + off)
    }

    fn word(&self, at: usize) -> u32 {
        self.view()
            .word(at)
            .map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// Stores bytes `data` at `shift..` of the word at `at`, leaving the other bytes.
    fn merge(&self, at: usize, shift: usize, data: &[u8]) {
        let Ok(w) = self.view().word(at) else { return };
        let _ = w.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            let mut b = old.to_ne_bytes();
            b[shift..shift + data.len()].copy_from_slice(data);
            Some(u32::from_ne_bytes(b))
        });
    }

    fn read_u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.word(at).to_ne_bytes());
        b[4..].copy_from_slice(&self.word(at + 4).to_ne_bytes());
        u64::from_ne_bytes(b)
    }

    fn write_u64(&self, at: usize, v: u64) {
        let b = v.to_ne_bytes();
        let _ = self.view().write(at, &b);
    }

    /// Runs a read-modify-write of the 8 bytes at `offset` (8-aligned in the mapping,
    /// as the engine checks the remote address's alignment and the library aligns MRs).
    fn update(&self, offset: u64, f: impl FnOnce(u64) -> u64) -> u64 {
        let Some(at) = self.span(offset, 8).filter(|a| a % 4 == 0) else {
            return 0;
        };
        let old = self.read_u64(at);
        self.write_u64(at, f(old));
        old
    }
}

impl Region for MappedRegion {
    fn len(&self) -> u64 {
        self.len as u64
    }

    fn read(&self, offset: u64, buf: &mut [u8]) {
        let Some(mut at) = self.span(offset, buf.len()) else {
            return;
        };
        let mut out = &mut buf[..];
        // Leading partial word.
        if at % 4 != 0 && !out.is_empty() {
            let shift = at % 4;
            let n = (4 - shift).min(out.len());
            let w = self.word(at - shift).to_ne_bytes();
            out[..n].copy_from_slice(&w[shift..shift + n]);
            out = &mut out[n..];
            at += n;
        }
        let whole = out.len() & !3;
        let _ = self.view().read(at, &mut out[..whole]);
        at += whole;
        let out = &mut out[whole..];
        if !out.is_empty() {
            let w = self.word(at).to_ne_bytes();
            let n = out.len();
            out.copy_from_slice(&w[..n]);
        }
    }

    fn write(&self, offset: u64, data: &[u8]) {
        let Some(mut at) = self.span(offset, data.len()) else {
            return;
        };
        let mut data = data;
        if at % 4 != 0 && !data.is_empty() {
            let shift = at % 4;
            let n = (4 - shift).min(data.len());
            self.merge(at - shift, shift, &data[..n]);
            data = &data[n..];
            at += n;
        }
        let whole = data.len() & !3;
        let _ = self.view().write(at, &data[..whole]);
        at += whole;
        let rest = &data[whole..];
        if !rest.is_empty() {
            self.merge(at, 0, rest);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_reads_and_writes_round_trip_and_keep_neighbours() {
        let map = Arc::new(SharedRegion::create("t", 4096).unwrap());
        let r = MappedRegion::new(map.clone(), 8, 100).unwrap();
        let data: Vec<u8> = (1..=23).collect();
        r.write(0, &[0xee; 100]);
        r.write(3, &data);
        let mut back = vec![0u8; 23];
        r.read(3, &mut back);
        assert_eq!(back, data);
        let mut all = [0u8; 30];
        r.read(0, &mut all);
        assert_eq!(&all[..3], &[0xee; 3]);
        assert_eq!(all[26], 0xee);
        // Out of range: nothing happens.
        r.write(99, &[1, 2]);
        r.read(u64::MAX, &mut back);
        assert!(MappedRegion::new(map, 4000, 100).is_none());
    }

    #[test]
    fn atomics() {
        let map = Arc::new(SharedRegion::create("t", 4096).unwrap());
        let r = MappedRegion::new(map, 0, 64).unwrap();
        r.atomic_write(8, 5);
        assert_eq!(r.fetch_add(8, 3), 5);
        assert_eq!(r.compare_swap(8, 8, 100), 8);
        assert_eq!(r.compare_swap(8, 8, 1), 100);
        assert_eq!(r.fetch_add(60, 1), 0);
    }
}
