//! RDMA Extended Transport Header (IBTA Vol. 1 §9.3.3): virtual address, R_Key and DMA
//! length of an RDMA WRITE, READ, FLUSH or ATOMIC_WRITE.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("a RETH", Layer::Reth, 16, {
    /// Virtual address.
    va / set_va: u64 = 0..8;
    /// Remote key.
    rkey / set_rkey: u32 = 8..12;
    /// DMA length: the whole message's length.
    dma_len / set_dma_len: u32 = 12..16;
});

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "va={:#x} rkey={:#x} len={}",
            self.va, self.rkey, self.dma_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: [u8; 16] = [
        0x00, 0x00, 0x55, 0x5d, 0x4c, 0x2e, 0x10, 0x00, 0x00, 0x00, 0x06, 0x3a, 0x00, 0x00, 0x00,
        0x40,
    ];

    #[test]
    fn round_trip() {
        let h = Header::new_checked(&BYTES[..]).unwrap();
        let r = Repr::parse(&h).unwrap();
        assert_eq!(
            r,
            Repr {
                va: 0x555d_4c2e_1000,
                rkey: 0x63a,
                dma_len: 64
            }
        );
        let mut out = [0xa5u8; 16];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, BYTES);
    }
}
