//! The frame around every control message (`docs/abi.md` §6.1): a 16-byte header (length,
//! kind, flags, sequence number) and the body.

use core::fmt;

use super::kind;

/// Largest `len` a frame may declare (bytes after the length field).
pub const MAX_FRAME: u32 = 65536;

/// Bytes of the frame header, length field included.
pub const HEADER_LEN: usize = 16;

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Message kind.
    pub kind: u16,
    /// Echoed by the response.
    pub seq: u64,
    /// Bytes of body that follow the header.
    pub body_len: usize,
}

/// A malformed frame; rocexd closes the connection on any of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// `len` is under 12 or over [`MAX_FRAME`].
    Length(u32),
    /// A kind neither defined nor a response to a defined one.
    Kind(u16),
    /// Nonzero flags.
    Flags(u16),
    /// Fewer bytes than a header.
    Short(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length(n) => write!(f, "frame length {n} is out of range"),
            Self::Kind(k) => write!(f, "unknown message kind {k:#x}"),
            Self::Flags(b) => write!(f, "reserved frame flags {b:#x}"),
            Self::Short(n) => write!(f, "{n} bytes is shorter than a frame header"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Error, or a request kind or its response's, `Hello` to the newest (`CmEstablish`).
fn known(kind: u16) -> bool {
    let base = kind & !kind::RESPONSE;
    kind == kind::ERROR || (kind::HELLO..=kind::CM_ESTABLISH).contains(&base)
}

/// One frame: header and body.
pub fn encode_frame(kind: u16, seq: u64, body: &[u8]) -> Result<Vec<u8>, FrameError> {
    let len = u32::try_from(body.len() + 12)
        .ok()
        .filter(|&l| l <= MAX_FRAME)
        .ok_or(FrameError::Length(u32::MAX))?;
    if !known(kind) {
        return Err(FrameError::Kind(kind));
    }
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(body);
    Ok(out)
}

/// Decodes the first [`HEADER_LEN`] bytes of a frame.
pub fn decode_header(b: &[u8]) -> Result<FrameHeader, FrameError> {
    let h: &[u8; HEADER_LEN] = b
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(FrameError::Short(b.len()))?;
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if !(12..=MAX_FRAME).contains(&len) {
        return Err(FrameError::Length(len));
    }
    let kind = u16::from_le_bytes([h[4], h[5]]);
    if !known(kind) {
        return Err(FrameError::Kind(kind));
    }
    let flags = u16::from_le_bytes([h[6], h[7]]);
    if flags != 0 {
        return Err(FrameError::Flags(flags));
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&h[8..16]);
    Ok(FrameHeader {
        kind,
        seq: u64::from_le_bytes(seq),
        body_len: len as usize - 12,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let f = encode_frame(kind::CREATE_QP, 7, &[1, 2, 3]).unwrap();
        assert_eq!(
            decode_header(&f).unwrap(),
            FrameHeader {
                kind: kind::CREATE_QP,
                seq: 7,
                body_len: 3
            }
        );
        assert_eq!(&f[HEADER_LEN..], &[1, 2, 3]);
        let r = encode_frame(kind::CREATE_QP | kind::RESPONSE, 7, &[]).unwrap();
        assert_eq!(decode_header(&r).unwrap().body_len, 0);
    }

    #[test]
    fn hostile_headers_are_refused() {
        let good = encode_frame(kind::HELLO, 1, &[0; 4]).unwrap();
        assert_eq!(decode_header(&good[..10]), Err(FrameError::Short(10)));
        let mut b = good.clone();
        b[..4].copy_from_slice(&11u32.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Length(11)));
        b[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Length(u32::MAX)));
        let mut b = good.clone();
        b[4..6].copy_from_slice(&99u16.to_le_bytes());
        assert_eq!(decode_header(&b), Err(FrameError::Kind(99)));
        let mut b = good;
        b[6] = 1;
        assert_eq!(decode_header(&b), Err(FrameError::Flags(1)));
        assert_eq!(encode_frame(0, 0, &[]), Err(FrameError::Kind(0)));
        assert!(encode_frame(kind::HELLO, 0, &vec![0; MAX_FRAME as usize]).is_err());
    }
}
