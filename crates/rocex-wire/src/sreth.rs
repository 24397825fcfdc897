//! Selective-repeat ETH (rocex's, manufacturer-specific opcodes 0xC0-0xFF; `docs/wire.md`,
//! "Selective repeat"): where a SEND or WRITE packet's data belongs in its message, so a
//! responder can place it whatever arrived before it.
//!
//! `msg` numbers the messages that consume a receive WQE (SEND and WRITE with immediate)
//! in the order the requester began them, so a SEND packet names its receive WQE; `offset`
//! is the byte of the message the packet's payload starts at.

use core::fmt;

use crate::Layer;
use crate::field::{Field, header_view, set_u32, u32_at};

mod field {
    use super::Field;
    pub(super) const MSG: Field = 0..4;
    pub(super) const OFFSET: Field = 4..8;
}

header_view!(
    "A zero-copy view of a selective-repeat ETH.",
    Layer::SrEth,
    8
);

impl<T: AsRef<[u8]>> Header<T> {
    /// Receive message number.
    pub fn msg(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::MSG)
    }
    /// Byte offset of the payload in its message.
    pub fn offset(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::OFFSET)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the receive message number.
    pub fn set_msg(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::MSG, v);
    }
    /// Sets the byte offset.
    pub fn set_offset(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::OFFSET, v);
    }
}

/// A selective-repeat ETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Receive message number (SEND and WRITE with immediate, counted from 0 on the QP).
    pub msg: u32,
    /// Byte offset of the payload in its message.
    pub offset: u32,
}

impl Repr {
    /// Reads a selective-repeat ETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self {
            msg: h.msg(),
            offset: h.offset(),
        })
    }

    /// Writes the selective-repeat ETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_msg(self.msg);
        h.set_offset(self.offset);
        Ok(())
    }
}

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
