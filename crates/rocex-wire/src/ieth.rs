//! Invalidate Extended Transport Header (IBTA Vol. 1 §9.3.8): the R_Key that a
//! SEND_WITH_INVALIDATE asks the responder to invalidate.

use core::fmt;

use crate::Layer;
use crate::field::{Field, header_view, set_u32, u32_at};

const RKEY: Field = 0..4;

header_view!("A zero-copy view of an IETH.", Layer::Ieth, 4);

impl<T: AsRef<[u8]>> Header<T> {
    /// The R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), RKEY)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the R_Key to invalidate.
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), RKEY, v);
    }
}

/// An IETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl Repr {
    /// Reads an IETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self { rkey: h.rkey() })
    }

    /// Writes the IETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_rkey(self.rkey);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "inv_rkey={:#x}", self.rkey)
    }
}
