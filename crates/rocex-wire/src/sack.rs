//! Selective acknowledgement ETH (rocex's SR_ACKNOWLEDGE, `docs/wire.md`, "Selective
//! repeat"): which PSNs past the cumulative acknowledgement a responder holds.
//!
//! The BTH PSN of an SR_ACKNOWLEDGE is the cumulative point: that PSN and every one before
//! it arrived. Bit `i` of the bitmap (byte `i / 8`, most significant bit first) stands for
//! PSN + 1 + `i`. A responder that knows more by the time the acknowledgement leaves than
//! when it decided to send it sets the bits of the PSNs it has since taken in order.

use core::fmt;

use crate::field::header_view;
use crate::{Layer, Psn};

/// PSNs past the cumulative point the bitmap covers.
pub const SPAN: u32 = 256;

header_view!(
    "A zero-copy view of a selective acknowledgement ETH.",
    Layer::Sack,
    32
);

impl<T: AsRef<[u8]>> Header<T> {
    /// The bitmap's bytes.
    pub fn bitmap(&self) -> [u8; LEN] {
        let mut b = [0; LEN];
        b.copy_from_slice(&self.buffer.as_ref()[..LEN]);
        b
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the bitmap.
    pub fn set_bitmap(&mut self, v: &[u8; LEN]) {
        self.buffer.as_mut()[..LEN].copy_from_slice(v);
    }
}

/// A selective acknowledgement's bitmap.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Bit `i` (byte `i / 8`, MSB first): PSN cumulative + 1 + `i` received.
    pub bitmap: [u8; LEN],
}

impl Repr {
    /// Reads a selective acknowledgement ETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self { bitmap: h.bitmap() })
    }

    /// Writes the selective acknowledgement ETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_bitmap(&self.bitmap);
        Ok(())
    }

    /// Whether bit `i` (PSN cumulative + 1 + `i`) is set; false past the span.
    pub fn get(&self, i: u32) -> bool {
        i < SPAN && self.bitmap[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
    }

    /// Sets bit `i`; ignored past the span.
    pub fn set(&mut self, i: u32) {
        if i < SPAN {
            self.bitmap[(i / 8) as usize] |= 0x80 >> (i % 8);
        }
    }

    /// The PSNs the bitmap holds, for a cumulative point `cumulative`.
    pub fn psns(&self, cumulative: Psn) -> impl Iterator<Item = Psn> + '_ {
        (0..SPAN)
            .filter(|&i| self.get(i))
            .map(move |i| cumulative.add(1 + i))
    }

    /// Whether no bit is set.
    pub fn is_empty(&self) -> bool {
        self.bitmap.iter().all(|&b| b == 0)
    }
}

impl fmt::Debug for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Repr({self})")
    }
}

/// The set bits as ranges of offsets from the cumulative PSN: `sack=+2-+5,+9`.
impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sack=")?;
        let mut first = true;
        let mut i = 0;
        while i < SPAN {
            if !self.get(i) {
                i += 1;
                continue;
            }
            let start = i;
            while i + 1 < SPAN && self.get(i + 1) {
                i += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == i {
                write!(f, "+{}", start + 1)?;
            } else {
                write!(f, "+{}-+{}", start + 1, i + 1)?;
            }
            i += 1;
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_msb_first_from_the_psn_after_the_cumulative_one() {
        let mut r = Repr::default();
        r.set(1);
        r.set(2);
        r.set(9);
        r.set(SPAN);
        assert_eq!(r.bitmap[0], 0b0110_0000);
        assert_eq!(r.bitmap[1], 0b0100_0000);
        assert_eq!(r.to_string(), "sack=+2-+3,+10");
        let psns: Vec<u32> = r.psns(Psn::new(0xff_fffe)).map(|p| p.value()).collect();
        assert_eq!(psns, [0x00_0000, 0x00_0001, 0x00_0008]);
        let mut out = [0u8; LEN];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(
            Repr::parse(&Header::new_checked(&out[..]).unwrap()).unwrap(),
            r
        );
        assert_eq!(Repr::default().to_string(), "sack=-");
    }
}
