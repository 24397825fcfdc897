//! Datagram Extended Transport Header (IBTA Vol. 1 §9.3.2): Q_Key and source QP of a UD
//! packet.

use core::fmt;

use crate::field::{fields, header_view};
use crate::{Error, ErrorKind, Layer};

/// The Q_Key that QP1 (the GSI, carrying CM MADs) uses.
pub const GSI_QKEY: u32 = 0x8001_0000;

header_view!("A zero-copy view of a DETH.", Layer::Deth, 8);

fields! {
    /// Queue key.
    qkey / set_qkey: u32 = 0..4;
    /// The reserved byte.
    reserved / set_reserved: u8 = 4..5;
    /// Source QP number (24 bits).
    src_qp / set_src_qp: u32 = 5..8;
}

/// A DETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Queue key.
    pub qkey: u32,
    /// Source QP, 0..2^24.
    pub src_qp: u32,
    /// The reserved byte, kept so that emission reproduces the input.
    pub reserved: u8,
}

impl Repr {
    /// Reads a DETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self {
            qkey: h.qkey(),
            src_qp: h.src_qp(),
            reserved: h.reserved(),
        })
    }

    /// Writes the DETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        if self.src_qp > crate::bth::QPN_MASK {
            return Err(Error::new(
                Layer::Deth,
                0,
                ErrorKind::BadValue("the source QPN exceeds 24 bits"),
            ));
        }
        h.check_len()?;
        h.set_qkey(self.qkey);
        h.set_reserved(self.reserved);
        h.set_src_qp(self.src_qp);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "qkey={:#x} src_qp={:#x}", self.qkey, self.src_qp)
    }
}
