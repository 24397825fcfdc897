//! Flush Extended Transport Header (IBTA Vol. 1 Release 1.5, memory placement extensions;
//! rxe `feth_init`): which placement a FLUSH asks for and over what.

use core::fmt;

use crate::Layer;
use crate::field::{fields, header_view};

const PLT_MASK: u32 = 0x0f;
const SEL_MASK: u32 = 0x30;
const SEL_SHIFT: u32 = 4;

/// Placement type bit: make the data globally visible.
pub const PLT_GLOBAL_VISIBILITY: u8 = 1;
/// Placement type bit: make the data persistent.
pub const PLT_PERSISTENCE: u8 = 2;
/// Selectivity level: the range the RETH names.
pub const SEL_MEMORY_REGION_RANGE: u8 = 0;
/// Selectivity level: the whole memory region.
pub const SEL_MEMORY_REGION: u8 = 1;

header_view!("A zero-copy view of a FETH.", Layer::Feth, 4);

fields! {
    /// The whole 32-bit word.
    word / set_word: u32 = 0..4;
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Placement type (bits 3-0).
    pub fn placement(&self) -> u8 {
        (self.word() & PLT_MASK) as u8
    }
    /// Selectivity level (bits 5-4).
    pub fn selectivity(&self) -> u8 {
        ((self.word() & SEL_MASK) >> SEL_SHIFT) as u8
    }
}

/// A FETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Placement type bits.
    pub placement: u8,
    /// Selectivity level.
    pub selectivity: u8,
    /// Bits 31-6, reserved, kept so that emission reproduces the input.
    pub reserved: u32,
}

impl Repr {
    /// Reads a FETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self {
            placement: h.placement(),
            selectivity: h.selectivity(),
            reserved: h.word() >> 6,
        })
    }

    /// Writes the FETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_word(
            (self.reserved << 6)
                | ((u32::from(self.selectivity) << SEL_SHIFT) & SEL_MASK)
                | (u32::from(self.placement) & PLT_MASK),
        );
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "placement={:#x} selectivity={}",
            self.placement, self.selectivity
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_rxe() {
        // rxe feth_init(level = 1, type = persistence): (1 << 4) | 2.
        let bytes = [0, 0, 0, 0x12];
        let r = Repr::parse(&Header::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            (r.placement, r.selectivity, r.reserved),
            (PLT_PERSISTENCE, SEL_MEMORY_REGION, 0)
        );
        let mut out = [0xa5u8; 4];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, bytes);
    }
}
