//! Atomic ACK Extended Transport Header (IBTA Vol. 1 §9.3.6): the original value an atomic
//! operation found.

use core::fmt;

use crate::Layer;
use crate::field::plain_header;

plain_header!("an AtomicAckETH", Layer::AtomicAckEth, 8, {
    /// The value at the target before the operation.
    orig / set_orig: u64 = 0..8;
});

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "orig={:#x}", self.orig)
    }
}
