//! Byte ranges and big-endian accessors shared by the header views.
//!
//! Callers check the buffer length first (`check_len`); these helpers then index within it.

pub(crate) type Field = core::ops::Range<usize>;

pub(crate) fn u16_at(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

pub(crate) fn u24_at(b: &[u8], f: Field) -> u32 {
    u32::from_be_bytes([0, b[f.start], b[f.start + 1], b[f.start + 2]])
}

pub(crate) fn u32_at(b: &[u8], f: Field) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[f]);
    u32::from_be_bytes(v)
}

pub(crate) fn u64_at(b: &[u8], f: Field) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[f]);
    u64::from_be_bytes(v)
}

pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn set_u24(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes()[1..]);
}

pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn set_u64(b: &mut [u8], f: Field, v: u64) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Declares a fixed-length header view `Header<T>` with the smoltcp-style constructors.
///
/// After `new_checked` (or `check_len`) succeeds, no accessor of the view panics.
macro_rules! header_view {
    ($doc:literal, $layer:expr, $len:expr) => {
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
