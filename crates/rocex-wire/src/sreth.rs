//! Selective-repeat ETH (rocex's, manufacturer-specific opcodes 0xC0-0xFF; `docs/wire.md`,
//! "Selective repeat"): where a SEND or WRITE packet's data belongs in its message, so a
//! responder can place it whatever arrived before it, and on a READ request whether it
//! may be answered before a hole fills.
//!
//! On SEND and WRITE packets `msg` numbers the messages that consume a receive WQE (SEND
//! and WRITE with immediate) in the order the requester began them, so a SEND packet names
//! its receive WQE; `offset` is the byte of the message the packet's payload starts at. On
//! a READ request `msg` is the PSN of the run of READs it ends (every request from that
//! PSN to this one is a READ), and `offset` the byte of the READ its range starts at.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("a selective-repeat ETH", Layer::SrEth, 8, {
    /// Receive message number (SEND and WRITE with immediate, counted from 0 on the QP);
    /// on a READ request, the PSN its run of READs starts at.
    msg / set_msg: u32 = 0..4;
    /// Byte offset of the payload in its message (of the range asked, on a READ request).
    offset / set_offset: u32 = 4..8;
});

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "msg={} offset={}", self.msg, self.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = [0, 0, 0, 7, 0, 0, 0x10, 0];
        let r = Repr::parse(&Header::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                msg: 7,
                offset: 4096
            }
        );
        let mut out = [0xa5u8; 8];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, bytes);
        assert!(Header::new_checked(&bytes[..7]).is_err());
    }
}
