//! [`RemoteBuffer`]: the token that names a peer's buffer, and its byte and string forms.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result, Side};

/// A peer's buffer as this end names it in RDMA operations: its address, rkey and length.
///
/// The peer gets one from [`Buffer::share`](crate::Buffer::share) and hands it over however
/// it likes: in a [`Connection::send`](crate::Connection::send), in a file, in a
/// configuration string. It is a plain value, not a capability check: the peer's device
/// checks the rkey, the range and the rights on every access, and refuses a wrong one with
/// [`Error::RemoteAccess`].
///
/// Byte form ([`RemoteBuffer::to_bytes`], 20 bytes, big-endian): `addr: u64`, `rkey: u32`,
/// `len: u64`. String form ([`fmt::Display`] and [`FromStr`]):
/// `rocex:<addr, 16 hex digits>:<rkey, 8 hex digits>:<len, 16 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteBuffer {
    addr: u64,
    rkey: u32,
    len: u64,
}

const PREFIX: &str = "rocex:";

impl RemoteBuffer {
    /// Bytes of the byte form.
    pub const LEN: usize = 20;

    /// A token from its parts (as another transport carried them).
    pub const fn new(addr: u64, rkey: u32, len: u64) -> Self {
        Self { addr, rkey, len }
    }

    /// The address of the buffer's first byte, in the peer's address space of the rkey.
    pub const fn addr(&self) -> u64 {
        self.addr
    }

    /// The remote key.
    pub const fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Bytes the token covers.
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// True for a token of no bytes.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The token for `len` bytes at `offset` of this one (to hand on only part of it; the
    /// rkey still grants the whole buffer).
    pub fn slice(&self, offset: u64, len: u64) -> Result<Self> {
        self.check(offset, len)?;
        Ok(Self::new(self.addr + offset, self.rkey, len))
    }

    /// The byte form.
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..20].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// A token from its byte form; exactly [`RemoteBuffer::LEN`] bytes.
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let b: &[u8; Self::LEN] = b
            .try_into()
            .map_err(|_| Error::BadToken("the byte form is 20 bytes"))?;
        let mut addr = [0u8; 8];
        let mut rkey = [0u8; 4];
        let mut len = [0u8; 8];
        addr.copy_from_slice(&b[0..8]);
        rkey.copy_from_slice(&b[8..12]);
        len.copy_from_slice(&b[12..20]);
        Ok(Self::new(
            u64::from_be_bytes(addr),
            u32::from_be_bytes(rkey),
            u64::from_be_bytes(len),
        ))
    }

    /// Checks that `len` bytes at `offset` lie inside the token; returns the remote address.
    pub(crate) fn check(&self, offset: u64, len: u64) -> Result<u64> {
        let inside = offset.checked_add(len).is_some_and(|end| end <= self.len);
        let addr = self.addr.checked_add(offset).filter(|_| inside);
        addr.ok_or(Error::OutOfRange {
            side: Side::Remote,
            offset,
            len,
            size: self.len,
        })
    }
}

impl fmt::Display for RemoteBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}{:016x}:{:08x}:{:016x}",
            self.addr, self.rkey, self.len
        )
    }
}

impl FromStr for RemoteBuffer {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let rest = s
            .strip_prefix(PREFIX)
            .ok_or(Error::BadToken("the string form starts with \"rocex:\""))?;
        let mut parts = rest.split(':');
        let mut field = |digits: usize| {
            parts
                .next()
                .filter(|p| p.len() == digits && p.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|p| u64::from_str_radix(p, 16).ok())
                .ok_or(Error::BadToken(
                    "the string form is rocex:ADDR:RKEY:LEN with 16, 8 and 16 hex digits",
                ))
        };
        let addr = field(16)?;
        let rkey = field(8)? as u32;
        let len = field(16)?;
        if parts.next().is_some() {
            return Err(Error::BadToken("trailing text after the length"));
        }
        Ok(Self::new(addr, rkey, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: RemoteBuffer = RemoteBuffer::new(0x0000_0100_0000_1000, 0x89ab_cdef, 4096);

    #[test]
    fn byte_form() {
        let b = T.to_bytes();
        assert_eq!(
            b,
            [
                0, 0, 1, 0, 0, 0, 0x10, 0, 0x89, 0xab, 0xcd, 0xef, 0, 0, 0, 0, 0, 0, 0x10, 0
            ]
        );
        assert_eq!(RemoteBuffer::from_bytes(&b).unwrap(), T);
        assert!(matches!(
            RemoteBuffer::from_bytes(&b[..19]),
            Err(Error::BadToken(_))
        ));
    }

    #[test]
    fn string_form() {
        let s = T.to_string();
        assert_eq!(s, "rocex:0000010000001000:89abcdef:0000000000001000");
        assert_eq!(s.parse::<RemoteBuffer>().unwrap(), T);
        for bad in [
            "",
            "rocex:",
            "rocex:0000010000001000:89abcdef",
            "rocex:0000010000001000:89abcdef:0000000000001000:",
            "rocex:000001000000100g:89abcdef:0000000000001000",
            "rocex:10000001000:89abcdef:0000000000001000",
            "rocex:+000010000001000:89abcdef:0000000000001000",
            "x:0000010000001000:89abcdef:0000000000001000",
        ] {
            assert!(
                matches!(bad.parse::<RemoteBuffer>(), Err(Error::BadToken(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges() {
        assert_eq!(T.check(4088, 8).unwrap(), T.addr() + 4088);
        assert!(matches!(
            T.check(4089, 8),
            Err(Error::OutOfRange {
                side: Side::Remote,
                ..
            })
        ));
        assert!(T.check(u64::MAX, 2).is_err());
        let s = T.slice(1024, 512).unwrap();
        assert_eq!((s.addr(), s.len()), (T.addr() + 1024, 512));
        assert!(T.slice(4000, 100).is_err());
    }
}
