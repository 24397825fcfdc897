//! Invalidate Extended Transport Header (IBTA Vol. 1 §9.3.8): the R_Key that a
//! SEND_WITH_INVALIDATE asks the responder to invalidate.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("an IETH", Layer::Ieth, 4, {
    /// The R_Key to invalidate.
    rkey / set_rkey: u32 = 0..4;
});

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "inv_rkey={:#x}", self.rkey)
    }
}
