//! Byte ranges and big-endian accessors shared by the header views.
//!
//! Callers check the buffer length first (`check_len`); these helpers then index within it.

pub(crate) type Field = core::ops::Range<usize>;

/// A big-endian integer that a field of at most its own width holds: a 3-byte field reads
/// into a `u32` (a QPN, a PSN, an MSN), and writing one keeps the value's low bytes.
pub(crate) trait BigEndian: Copy {
    /// Reads the field's bytes, zero-extended.
    fn from_field(b: &[u8]) -> Self;
    /// Writes the value's low `b.len()` bytes.
    fn to_field(self, b: &mut [u8]);
}

macro_rules! big_endian {
    ($($t:ty),*) => {$(
        impl BigEndian for $t {
            fn from_field(b: &[u8]) -> Self {
                let mut v = [0u8; size_of::<$t>()];
                v[size_of::<$t>() - b.len()..].copy_from_slice(b);
                <$t>::from_be_bytes(v)
            }
            fn to_field(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_be_bytes()[size_of::<$t>() - b.len()..]);
            }
        }
    )*};
}
big_endian!(u8, u16, u32, u64);

/// Reads the big-endian integer in `f`.
pub(crate) fn get<I: BigEndian>(b: &[u8], f: Field) -> I {
    I::from_field(&b[f])
}

/// Writes `v` into `f`, big-endian, cut to the field's width.
pub(crate) fn set<I: BigEndian>(b: &mut [u8], f: Field, v: I) {
    v.to_field(&mut b[f]);
}

/// Declares a header view's getters and setters for its whole-byte integer fields, each a
/// byte range of the header (IBTA's tables give them so).
macro_rules! fields {
    ($( $(#[$doc:meta])* $get:ident / $set:ident : $ty:ty = $field:expr; )*) => {
        impl<T: AsRef<[u8]>> Header<T> {
            $(
                $(#[$doc])*
                pub fn $get(&self) -> $ty {
                    $crate::field::get(self.buffer.as_ref(), $field)
                }
            )*
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
            $(
                #[doc = concat!("Sets `", stringify!($get), "` (cut to its field's width).")]
                pub fn $set(&mut self, v: $ty) {
                    $crate::field::set(self.buffer.as_mut(), $field, v);
                }
            )*
        }
    };
}
pub(crate) use fields;

/// Declares a fixed-length header view `Header<T>` with the smoltcp-style constructors.
///
/// After `new_checked` (or `check_len`) succeeds, no accessor of the view panics.
macro_rules! header_view {
    ($doc:expr, $layer:expr, $len:expr) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Header<T: AsRef<[u8]>> {
            buffer: T,
        }

        /// Length of the header in bytes.
        pub const LEN: usize = $len;

        impl<T: AsRef<[u8]>> Header<T> {
            /// Wraps a buffer without checking its length.
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer, checking that it holds the whole header.
            pub fn new_checked(buffer: T) -> $crate::Result<Self> {
                let h = Self::new_unchecked(buffer);
                h.check_len()?;
                Ok(h)
            }

            /// Checks that the buffer holds the whole header.
            pub fn check_len(&self) -> $crate::Result<()> {
                let len = self.buffer.as_ref().len();
                if len < LEN {
                    return Err($crate::Error::truncated($layer, 0, LEN, len));
                }
                Ok(())
            }

            /// Returns the underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}
pub(crate) use header_view;

/// Declares a header whose `Repr` is its integer fields and nothing more: the view (as
/// `header_view!`), its accessors (as `fields!`), and a `Repr` whose `parse` and `emit`
/// read and write each field in turn. `$what` names the header in the docs ("a RETH").
macro_rules! plain_header {
    ($what:literal, $layer:expr, $len:expr, {
        $( $(#[$doc:meta])* $get:ident / $set:ident : $ty:ty = $field:expr; )*
    }) => {
        $crate::field::header_view!(concat!("A zero-copy view of ", $what, "."), $layer, $len);

        $crate::field::fields! { $( $(#[$doc])* $get / $set : $ty = $field; )* }

        #[doc = concat!("The fields of ", $what, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            $( $(#[$doc])* pub $get: $ty, )*
        }

        impl Repr {
            #[doc = concat!("Reads ", $what, ".")]
            pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> $crate::Result<Self> {
                h.check_len()?;
                Ok(Self { $( $get: h.$get(), )* })
            }

            #[doc = concat!("Writes ", $what, ".")]
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
                &self,
                h: &mut Header<T>,
            ) -> $crate::Result<()> {
                h.check_len()?;
                $( h.$set(self.$get); )*
                Ok(())
            }
        }
    };
}
pub(crate) use plain_header;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_narrower_than_its_integer_holds_the_low_bytes() {
        let mut b = [0xa5u8; 5];
        set(&mut b, 1..4, 0x1234_5678u32);
        assert_eq!(b, [0xa5, 0x34, 0x56, 0x78, 0xa5]);
        assert_eq!(get::<u32>(&b, 1..4), 0x34_5678);
        assert_eq!(get::<u16>(&b, 3..5), 0x78a5);
    }
}
