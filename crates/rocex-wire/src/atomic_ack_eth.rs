//! Atomic ACK Extended Transport Header (IBTA Vol. 1 §9.3.6): the original value an atomic
//! operation found.

use core::fmt;

use crate::Layer;
use crate::field::{Field, header_view, set_u64, u64_at};

const ORIG: Field = 0..8;

header_view!(
    "A zero-copy view of an AtomicAckETH.",
    Layer::AtomicAckEth,
    8
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The value at the target before the operation.
    pub fn orig(&self) -> u64 {
        u64_at(self.buffer.as_ref(), ORIG)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the original value.
    pub fn set_orig(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), ORIG, v);
    }
}

/// An AtomicAckETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The original value.
    pub orig: u64,
}

impl Repr {
    /// Reads an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self { orig: h.orig() })
    }

    /// Writes the AtomicAckETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_orig(self.orig);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "orig={:#x}", self.orig)
    }
}
