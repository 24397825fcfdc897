//! Immediate data (IBTA Vol. 1 §9.3.7): 4 bytes the receiver gets in its completion.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("an ImmDt header", Layer::ImmDt, 4, {
    /// The immediate data, as the 32-bit big-endian number on the wire (verbs' `imm_data`
    /// is this value).
    data / set_data: u32 = 0..4;
});

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "imm={:#010x}", self.data)
    }
}
