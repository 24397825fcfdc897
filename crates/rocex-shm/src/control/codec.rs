//! The field writer and the hostile-input-safe field reader every body goes through, and the
//! error a body that does not decode gets.

use core::fmt;

/// A body that does not decode. The daemon answers `EINVAL` (or closes the connection for
/// a length fault, as §6.1 says of a malformed frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The body ends before the field.
    Short {
        /// Message kind.
        kind: u16,
        /// The field being read.
        field: &'static str,
    },
    /// Bytes after the last field.
    Trailing {
        /// Message kind.
        kind: u16,
        /// Extra bytes.
        extra: usize,
    },
    /// A field holds a value the ABI does not define.
    BadValue {
        /// Message kind.
        kind: u16,
        /// The field.
        field: &'static str,
        /// The value, widened.
        value: u64,
    },
    /// A kind that has no body of this direction (a response kind in a request, ...).
    Kind(u16),
    /// The error detail is not UTF-8.
    Utf8,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { kind, field } => {
                write!(f, "message kind {kind:#x}: body ends before `{field}`")
            }
            Self::Trailing { kind, extra } => {
                write!(
                    f,
                    "message kind {kind:#x}: {extra} bytes after the last field"
                )
            }
            Self::BadValue { kind, field, value } => {
                write!(
                    f,
                    "message kind {kind:#x}: `{field}` = {value} is not defined"
                )
            }
            Self::Kind(k) => write!(f, "message kind {k:#x} has no body in this direction"),
            Self::Utf8 => f.write_str("error detail is not UTF-8"),
        }
    }
}

impl std::error::Error for BodyError {}

/// Little-endian field writer.
#[derive(Debug, Default)]
pub(super) struct Put(pub(super) Vec<u8>);

impl Put {
    pub(super) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(super) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(super) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
}

/// Reads a struct whose fields lie on the wire in the order listed, each with the [`Get`]
/// reader its type names and called by its own name in errors:
/// `read_fields!(g, Foo { a: u32, b: arr })` is `Foo { a: g.u32("a")?, b: g.arr("b")? }`.
macro_rules! read_fields {
    ($g:ident, $($ty:ident)::+ { $($field:ident: $read:ident),* $(,)? }) => {
        $($ty)::+ { $($field: $g.$read(stringify!($field))?),* }
    };
}
pub(super) use read_fields;

/// Little-endian field reader over a hostile body: every read is bounds-checked.
pub(super) struct Get<'a> {
    pub(super) kind: u16,
    pub(super) b: &'a [u8],
}

impl<'a> Get<'a> {
    pub(super) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], BodyError> {
        if self.b.len() < n {
            return Err(BodyError::Short {
                kind: self.kind,
                field,
            });
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    pub(super) fn arr<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], BodyError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, BodyError> {
        Ok(self.arr::<1>(field)?[0])
    }
    pub(super) fn u16(&mut self, field: &'static str) -> Result<u16, BodyError> {
        Ok(u16::from_le_bytes(self.arr(field)?))
    }
    /// A byte that is 0 or 1.
    pub(super) fn flag(&mut self, field: &'static str) -> Result<bool, BodyError> {
        match self.u8(field)? {
            v @ 2.. => Err(self.bad(field, v.into())),
            v => Ok(v == 1),
        }
    }
    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, BodyError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, BodyError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    pub(super) fn bad(&self, field: &'static str, value: u64) -> BodyError {
        BodyError::BadValue {
            kind: self.kind,
            field,
            value,
        }
    }
    pub(super) fn finish(self) -> Result<(), BodyError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(BodyError::Trailing {
                kind: self.kind,
                extra: self.b.len(),
            })
        }
    }
}
