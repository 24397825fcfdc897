//! A checked place in a region: what a successful lkey or rkey check hands the engine.
//!
//! A [`Target`] owns an `Arc` of its region, so the engine can keep it across calls (a
//! multi-packet WRITE, a READ response stream) without borrowing the table. Every access
//! through it is bounds-checked again against the target's own range, so an arithmetic
//! slip in the engine cannot reach bytes the check did not grant.

use std::sync::Arc;

use crate::{MemError, Region};

/// A checked place: a region, the byte offset in it and the length the check granted.
///
/// Offsets given to the methods (`rel`) count from the target's first byte.
#[derive(Clone, Debug, Default)]
pub struct Target {
    region: Option<Arc<dyn Region>>,
    offset: u64,
    len: u64,
}

impl Target {
    /// The target of a zero-length access, which touches no region.
    pub(crate) const fn empty() -> Self {
        Self {
            region: None,
            offset: 0,
            len: 0,
        }
    }

    /// `[offset, offset + len)` of `region`; the caller has checked it lies inside.
    pub(crate) fn new(region: &Arc<dyn Region>, offset: u64, len: u64) -> Self {
        Self {
            region: Some(Arc::clone(region)),
            offset,
            len,
        }
    }

    /// Length in bytes.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Whether the target has no bytes.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte offset of the target's first byte in its region.
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// The backing region, or `None` for a zero-length target.
    pub fn region(&self) -> Option<&Arc<dyn Region>> {
        self.region.as_ref()
    }

    /// The absolute region offset of `[rel, rel + len)`, if it lies inside the target.
    fn locate(&self, rel: u64, len: u64) -> Result<(u64, &Arc<dyn Region>), MemError> {
        let end = rel.checked_add(len).ok_or(MemError::Overflow)?;
        let out = MemError::OutOfBounds { addr: rel, len };
        if end > self.len {
            return Err(out);
        }
        let region = self.region.as_ref().ok_or(out)?;
        // Cannot overflow: the table checked offset + self.len <= region.len().
        Ok((self.offset + rel, region))
    }

    /// The part `[rel, rel + len)` of this target.
    pub fn slice(&self, rel: u64, len: u64) -> Result<Self, MemError> {
        if len == 0 && rel <= self.len {
            return Ok(Self::empty());
        }
        let (offset, region) = self.locate(rel, len)?;
        Ok(Self::new(region, offset, len))
    }

    /// Copy `buf.len()` bytes from `rel` into `buf`.
    pub fn read_at(&self, rel: u64, buf: &mut [u8]) -> Result<(), MemError> {
        if buf.is_empty() && rel <= self.len {
            return Ok(());
        }
        let (offset, region) = self.locate(rel, buf.len() as u64)?;
        Ok(region.try_read(offset, buf)?)
    }

    /// Copy `data` into the target at `rel`.
    pub fn write_at(&self, rel: u64, data: &[u8]) -> Result<(), MemError> {
        if data.is_empty() && rel <= self.len {
            return Ok(());
        }
        let (offset, region) = self.locate(rel, data.len() as u64)?;
        Ok(region.try_write(offset, data)?)
    }

    /// The 8 bytes at `rel`, which must be 8-aligned in the region.
    fn word(&self, rel: u64) -> Result<(u64, &Arc<dyn Region>), MemError> {
        let (offset, region) = self.locate(rel, 8)?;
        if offset % 8 != 0 {
            return Err(MemError::Misaligned { offset });
        }
        Ok((offset, region))
    }

    /// Atomic compare-and-swap of the 8 bytes at `rel` (host byte order); returns the
    /// original value.
    pub fn compare_swap(&self, rel: u64, compare: u64, swap: u64) -> Result<u64, MemError> {
        let (offset, region) = self.word(rel)?;
        Ok(region.try_compare_swap(offset, compare, swap)?)
    }

    /// Atomic wrapping add to the 8 bytes at `rel`; returns the original value.
    pub fn fetch_add(&self, rel: u64, add: u64) -> Result<u64, MemError> {
        let (offset, region) = self.word(rel)?;
        Ok(region.try_fetch_add(offset, add)?)
    }

    /// Atomic store of the 8 bytes at `rel` (ATOMIC_WRITE).
    pub fn atomic_write(&self, rel: u64, value: u64) -> Result<(), MemError> {
        let (offset, region) = self.word(rel)?;
        Ok(region.try_atomic_write(offset, value)?)
    }

    /// Make the whole target visible (global) or persistent.
    pub fn flush(&self, persistent: bool) -> Result<(), MemError> {
        match &self.region {
            Some(region) if self.len > 0 => Ok(region.flush(self.offset, self.len, persistent)?),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Target;
    use crate::{MemError, Region, VecRegion};

    fn target(offset: u64, len: u64) -> Target {
        let region: Arc<dyn Region> = Arc::new(VecRegion::new(64));
        Target::new(&region, offset, len)
    }

    #[test]
    fn accesses_stay_inside_the_target() {
        let t = target(8, 16);
        t.write_at(0, &[1; 16]).unwrap();
        assert_eq!(
            t.write_at(1, &[1; 16]),
            Err(MemError::OutOfBounds { addr: 1, len: 16 })
        );
        assert_eq!(t.read_at(u64::MAX, &mut [0; 2]), Err(MemError::Overflow));
        assert_eq!(t.read_at(16, &mut []), Ok(()));
        assert!(t.read_at(17, &mut []).is_err());
        let s = t.slice(8, 8).unwrap();
        assert_eq!((s.offset(), s.len()), (16, 8));
        assert_eq!(s.fetch_add(0, 1), Ok(0x0101_0101_0101_0101));
        assert!(t.slice(9, 8).is_err());
    }

    #[test]
    fn atomics_need_region_alignment() {
        let t = target(4, 16);
        assert_eq!(t.fetch_add(0, 1), Err(MemError::Misaligned { offset: 4 }));
        assert_eq!(t.compare_swap(4, 0, 9), Ok(0));
        assert_eq!(
            t.atomic_write(12, 0),
            Err(MemError::OutOfBounds { addr: 12, len: 8 })
        );
    }

    #[test]
    fn an_empty_target_touches_nothing() {
        let t = Target::empty();
        assert_eq!(t.read_at(0, &mut []), Ok(()));
        assert_eq!(t.flush(true), Ok(()));
        assert!(t.write_at(0, &[0]).is_err());
        assert!(t.fetch_add(0, 1).is_err());
        assert!(t.region().is_none());
    }
}
