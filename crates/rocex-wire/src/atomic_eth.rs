//! Atomic Extended Transport Header (IBTA Vol. 1 §9.3.4): the 28 bytes of a CMP_SWAP or
//! FETCH_ADD request.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("an AtomicETH", Layer::AtomicEth, 28, {
    /// Virtual address of the 8-byte target (which must be 8-byte aligned, C9-179).
    va / set_va: u64 = 0..8;
    /// Remote key.
    rkey / set_rkey: u32 = 8..12;
    /// Swap value (CMP_SWAP) or addend (FETCH_ADD).
    swap_add / set_swap_add: u64 = 12..20;
    /// Compare value (CMP_SWAP only).
    compare / set_compare: u64 = 20..28;
});

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
