//! Atomic Extended Transport Header (IBTA Vol. 1 §9.3.4): the 28 bytes of a CMP_SWAP or
//! FETCH_ADD request.

use core::fmt;

use crate::Layer;
use crate::field::{Field, header_view, set_u32, set_u64, u32_at, u64_at};

mod field {
    use super::Field;
    pub(super) const VA: Field = 0..8;
    pub(super) const RKEY: Field = 8..12;
    pub(super) const SWAP_ADD: Field = 12..20;
    pub(super) const COMPARE: Field = 20..28;
}

header_view!("A zero-copy view of an AtomicETH.", Layer::AtomicEth, 28);

impl<T: AsRef<[u8]>> Header<T> {
    /// Virtual address of the 8-byte target.
    pub fn va(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::VA)
    }
    /// Remote key.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::RKEY)
    }
    /// Swap value (CMP_SWAP) or addend (FETCH_ADD).
    pub fn swap_add(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SWAP_ADD)
    }
    /// Compare value (CMP_SWAP only).
    pub fn compare(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the virtual address.
    pub fn set_va(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VA, v);
    }
    /// Sets the remote key.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RKEY, v);
    }
    /// Sets the swap value or addend.
    pub fn set_swap_add(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SWAP_ADD, v);
    }
    /// Sets the compare value.
    pub fn set_compare(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::COMPARE, v);
    }
}

/// An AtomicETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Virtual address (must be 8-byte aligned, C9-179).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value or addend.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

impl Repr {
    /// Reads an AtomicETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self {
            va: h.va(),
            rkey: h.rkey(),
            swap_add: h.swap_add(),
            compare: h.compare(),
        })
    }

    /// Writes the AtomicETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_va(self.va);
        h.set_rkey(self.rkey);
        h.set_swap_add(self.swap_add);
        h.set_compare(self.compare);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "va={:#x} rkey={:#x} swap_add={:#x} compare={:#x}",
            self.va, self.rkey, self.swap_add, self.compare
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let r = Repr {
            va: 0x7f00_0000_1008,
            rkey: 0x1234,
            swap_add: 5,
            compare: 0xdead_beef,
        };
        let mut out = [0xa5u8; LEN];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(&out[..8], &0x7f00_0000_1008u64.to_be_bytes());
        assert_eq!(&out[8..12], &0x1234u32.to_be_bytes());
        assert_eq!(&out[12..20], &5u64.to_be_bytes());
        assert_eq!(&out[20..], &0xdead_beefu64.to_be_bytes());
        assert_eq!(
            Repr::parse(&Header::new_checked(&out[..]).unwrap()).unwrap(),
            r
        );
    }
}
