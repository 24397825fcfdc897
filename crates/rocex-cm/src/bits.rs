//! Fields at the spec's (byte, bit) offsets: chapter 12's tables number bits from the most
//! significant bit of each byte, and a field may span bytes (a 20-bit flow label, a 24-bit
//! QPN followed by an 8-bit count in the same word).
//!
//! Callers check the buffer length first (`check_len`); these helpers index within it.

/// A field: first byte, first bit within it (0 = most significant), width in bits (1..=64).
pub(crate) type Field = (usize, u32, u32);

/// Reads a field, big-endian.
pub(crate) fn get(b: &[u8], (byte, bit, width): Field) -> u64 {
    let span = (bit + width).div_ceil(8) as usize;
    let mut acc: u128 = 0;
    for &x in &b[byte..byte + span] {
        acc = (acc << 8) | u128::from(x);
    }
    let shift = span as u32 * 8 - bit - width;
    ((acc >> shift) & mask(width)) as u64
}

/// Writes a field, big-endian, leaving the bits around it unchanged; `v` is cut to `width`.
pub(crate) fn set(b: &mut [u8], (byte, bit, width): Field, v: u64) {
    let span = (bit + width).div_ceil(8) as usize;
    let mut acc: u128 = 0;
    for &x in &b[byte..byte + span] {
        acc = (acc << 8) | u128::from(x);
    }
    let shift = span as u32 * 8 - bit - width;
    acc = (acc & !(mask(width) << shift)) | ((u128::from(v) & mask(width)) << shift);
    for (i, x) in b[byte..byte + span].iter_mut().enumerate() {
        *x = (acc >> ((span - 1 - i) * 8)) as u8;
    }
}

/// Copies out the `N` bytes at `at`.
pub(crate) fn block<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

const fn mask(width: u32) -> u128 {
    (1u128 << width) - 1
}

/// Declares getters and setters for a view's fields.
macro_rules! fields {
    ($view:ident { $( $(#[$doc:meta])* $get:ident / $set:ident : $ty:ty = $field:expr; )* }) => {
        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[$doc])*
                pub fn $get(&self) -> $ty {
                    $crate::bits::get(self.buffer.as_ref(), $field) as $ty
                }
            )*
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            $(
                #[doc = concat!("Sets `", stringify!($get), "` (cut to its width).")]
                pub fn $set(&mut self, v: $ty) {
                    $crate::bits::set(self.buffer.as_mut(), $field, u64::from(v));
                }
            )*
        }
    };
}
pub(crate) use fields;

/// Declares getters and setters for a view's byte blocks (GIDs, ARI, private data), each
/// `N` bytes from a byte offset: the getter copies the block out, the setter copies one in.
macro_rules! blocks {
    ($view:ident { $( $(#[$doc:meta])* $get:ident / $set:ident : [u8; $len:expr] = $at:expr; )* }) => {
        impl<T: AsRef<[u8]>> $view<T> {
            $(
                $(#[$doc])*
                pub fn $get(&self) -> [u8; $len] {
                    $crate::bits::block(self.buffer.as_ref(), $at)
                }
            )*
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            $(
                #[doc = concat!("Sets `", stringify!($get), "`.")]
                pub fn $set(&mut self, v: &[u8; $len]) {
                    self.buffer.as_mut()[$at..$at + $len].copy_from_slice(v);
                }
            )*
        }
    };
}
pub(crate) use blocks;

/// Declares a fixed-length view `$view<T>` with the smoltcp-style constructors.
///
/// After `new_checked` (or `check_len`) succeeds, no accessor of the view panics.
macro_rules! view {
    ($(#[$doc:meta])* $view:ident, $part:expr, $len:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $view<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $view<T> {
            /// Bytes the view covers.
            pub const LEN: usize = $len;

            /// Wraps a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer, checking that it holds the whole part.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }

            /// Checks that the buffer holds the whole part.
            pub fn check_len(&self) -> $crate::Result<()> {
                let have = self.buffer.as_ref().len();
                if have < Self::LEN {
                    return Err($crate::Error::truncated($part, 0, Self::LEN, have));
                }
                Ok(())
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use view;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_at_bit_offsets_read_and_write_in_place() {
        let mut b = [0xa5u8; 8];
        set(&mut b, (0, 0, 20), 0x53224);
        assert_eq!(b[..3], [0x53, 0x22, 0x45]);
        assert_eq!(get(&b, (0, 0, 20)), 0x53224);
        set(&mut b, (3, 2, 6), 0x3f);
        assert_eq!(b[3], 0xbf);
        set(&mut b, (4, 5, 3), 7);
        assert_eq!(get(&b, (4, 5, 3)), 7);
        assert_eq!(get(&b, (4, 0, 5)), 0xa5 >> 3);
        set(&mut b, (0, 0, 64), u64::MAX);
        assert_eq!(b, [0xff; 8]);
    }
}
