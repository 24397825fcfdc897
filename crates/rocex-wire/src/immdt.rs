//! Immediate data (IBTA Vol. 1 §9.3.7): 4 bytes the receiver gets in its completion.

use core::fmt;

use crate::Layer;
use crate::field::{Field, header_view, set_u32, u32_at};

const DATA: Field = 0..4;

header_view!("A zero-copy view of an ImmDt header.", Layer::ImmDt, 4);

impl<T: AsRef<[u8]>> Header<T> {
    /// The immediate data, as the 32-bit big-endian number on the wire.
    pub fn data(&self) -> u32 {
        u32_at(self.buffer.as_ref(), DATA)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the immediate data.
    pub fn set_data(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), DATA, v);
    }
}

/// Immediate data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The immediate data in network order as a number (verbs' `imm_data` is this value).
    pub data: u32,
}

impl Repr {
    /// Reads an ImmDt.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self { data: h.data() })
    }

    /// Writes the ImmDt.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_data(self.data);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "imm={:#010x}", self.data)
    }
}
