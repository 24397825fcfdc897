//! Congestion Notification Packet body (IBTA annex A17, RoCE v2 §A17.9.3): 16 reserved
//! bytes after a BTH with opcode 0x81 and BECN set. rxe neither sends nor handles CNPs;
//! RNICs with DCQCN do.

use core::fmt;

use crate::Layer;
use crate::field::header_view;

header_view!("A zero-copy view of a CNP's reserved body.", Layer::Cnp, 16);

impl<T: AsRef<[u8]>> Header<T> {
    /// The 16 reserved bytes.
    pub fn reserved(&self) -> &[u8] {
        &self.buffer.as_ref()[..LEN]
    }
}

/// A CNP body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The reserved bytes (zero when sent), kept so that emission reproduces the input.
    pub reserved: [u8; LEN],
}

impl Repr {
    /// Reads a CNP body.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        let mut reserved = [0; LEN];
        reserved.copy_from_slice(h.reserved());
        Ok(Self { reserved })
    }

    /// Writes the CNP body.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.buffer.as_mut()[..LEN].copy_from_slice(&self.reserved);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cnp")
    }
}
