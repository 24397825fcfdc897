//! The out-of-band exchange: what two ends tell each other to connect their RC QPs, and
//! its wire format (documented in the crate docs, "The exchange").
//!
//! The exchange is three messages in the order of the CM's REQ, REP and RTU: the client's
//! [`Params`], the server's [`Params`] (sent once the server's QP is ready to receive),
//! and [`Message::Ready`] (sent once the client's QP is). The steps ([`dial`], [`answer`])
//! only see a [`Carrier`], so a transport other than this crate's TCP stream (rdma_cm's
//! REQ/REP/RTU with these parameters as private data) can carry the same steps.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;

use rocex_verbs::verbs::Mtu;

/// The first bytes of every message.
pub(crate) const MAGIC: [u8; 4] = *b"RCXQ";
/// The version this crate speaks.
pub(crate) const VERSION: u8 = 1;
/// Bytes of the message header.
pub(crate) const HEADER_LEN: usize = 8;
/// Bytes of a [`Params`] body.
pub(crate) const PARAMS_LEN: usize = 32;

/// Byte ranges of the header and of the `Params` body.
mod field {
    use core::ops::Range;
    pub(super) const MAGIC: Range<usize> = 0..4;
    pub(super) const VERSION: usize = 4;
    pub(super) const KIND: usize = 5;
    pub(super) const BODY_LEN: Range<usize> = 6..8;

    pub(super) const QPN: Range<usize> = 0..4;
    pub(super) const PSN: Range<usize> = 4..8;
    pub(super) const GID: Range<usize> = 8..24;
    pub(super) const MTU: usize = 24;
    pub(super) const RD_ATOMIC: usize = 25;
    pub(super) const RESERVED: Range<usize> = 26..28;
    pub(super) const RECV_SIZE: Range<usize> = 28..32;
}

/// Message kinds.
mod kind {
    pub(super) const PARAMS: u8 = 1;
    pub(super) const READY: u8 = 2;
}

/// What one end tells the other about its QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    /// The QP number (24 bits).
    pub(crate) qpn: u32,
    /// The first PSN this end sends (24 bits): the peer's expected PSN.
    pub(crate) psn: u32,
    /// The device's GID: its IP address, IPv4-mapped for IPv4.
    pub(crate) gid: [u8; 16],
    /// The device's MTU; the path uses the smaller of the two.
    pub(crate) mtu: Mtu,
    /// READs and atomics this end accepts at once as responder.
    pub(crate) rd_atomic: u8,
    /// Bytes of each receive buffer this end posts: the longest message it accepts.
    pub(crate) recv_size: u32,
}

/// One message of the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Message {
    /// An end's parameters.
    Params(Params),
    /// The client's QP is ready: the server may send.
    Ready,
}

/// A malformed or out-of-order message from the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The message does not start with `RCXQ`: the peer is not a rocex endpoint.
    BadMagic([u8; 4]),
    /// The peer speaks another version of the exchange.
    Version(u8),
    /// A message kind this version does not define.
    UnknownKind(u8),
    /// A body whose length does not match its kind.
    BadLength {
        /// The kind.
        kind: u8,
        /// The length given.
        len: u16,
    },
    /// A QPN or PSN over 24 bits.
    OutOfRange(&'static str),
    /// An MTU code outside 1..=5.
    BadMtu(u8),
    /// Reserved bytes that are not zero.
    Reserved,
    /// A message other than the one the exchange expects next.
    Unexpected {
        /// What was expected.
        expected: &'static str,
    },
    /// The peer closed the TCP connection during the exchange.
    Closed,
    /// The peer did not answer within the configured time.
    Timeout,
    /// The peer's CM rejected the rdma_cm connection (IBTA table 112's reason: 8 when
    /// nobody listens on the port, 28 when the listener refused).
    Rejected {
        /// The REJ's reason.
        reason: u16,
    },
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic(m) => write!(f, "the peer is not a rocex endpoint (magic {m:02x?})"),
            Self::Version(v) => write!(
                f,
                "the peer speaks exchange version {v}; this end speaks {VERSION}"
            ),
            Self::UnknownKind(k) => write!(f, "unknown exchange message kind {k}"),
            Self::BadLength { kind, len } => {
                write!(f, "exchange message kind {kind} with a {len}-byte body")
            }
            Self::OutOfRange(what) => write!(f, "the peer's {what} is over 24 bits"),
            Self::BadMtu(m) => write!(f, "the peer's MTU code {m} is not 1..=5"),
            Self::Reserved => f.write_str("reserved bytes of the peer's parameters are not zero"),
            Self::Unexpected { expected } => {
                write!(f, "the peer sent another message where {expected} belongs")
            }
            Self::Closed => f.write_str("the peer closed the connection during the exchange"),
            Self::Timeout => f.write_str("the peer did not answer the exchange in time"),
            Self::Rejected { reason: 8 } => {
                f.write_str("the peer rejected the connection: nobody listens on the port")
            }
            Self::Rejected { reason } => {
                write!(f, "the peer rejected the connection (REJ reason {reason})")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

impl Message {
    /// The message's bytes: header, then body.
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        let (k, body) = match self {
            Self::Params(p) => (kind::PARAMS, p.to_bytes().to_vec()),
            Self::Ready => (kind::READY, Vec::new()),
        };
        let mut out = vec![0u8; HEADER_LEN];
        out[field::MAGIC].copy_from_slice(&MAGIC);
        out[field::VERSION] = VERSION;
        out[field::KIND] = k;
        out[field::BODY_LEN].copy_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Checks a header; returns the kind and the body length to read next.
    pub(crate) fn parse_header(h: &[u8; HEADER_LEN]) -> Result<(u8, usize), HandshakeError> {
        let magic: [u8; 4] = h[field::MAGIC].try_into().unwrap_or_default();
        if magic != MAGIC {
            return Err(HandshakeError::BadMagic(magic));
        }
        if h[field::VERSION] != VERSION {
            return Err(HandshakeError::Version(h[field::VERSION]));
        }
        let k = h[field::KIND];
        let len = u16::from_be_bytes([h[field::BODY_LEN.start], h[field::BODY_LEN.start + 1]]);
        let want = match k {
            kind::PARAMS => PARAMS_LEN,
            kind::READY => 0,
            _ => return Err(HandshakeError::UnknownKind(k)),
        };
        if usize::from(len) != want {
            return Err(HandshakeError::BadLength { kind: k, len });
        }
        Ok((k, want))
    }

    /// The message of kind `k` (from [`Message::parse_header`]) with `body`.
    pub(crate) fn parse_body(k: u8, body: &[u8]) -> Result<Self, HandshakeError> {
        match k {
            kind::PARAMS => Params::parse(body).map(Self::Params),
            kind::READY if body.is_empty() => Ok(Self::Ready),
            _ => Err(HandshakeError::BadLength {
                kind: k,
                len: body.len() as u16,
            }),
        }
    }

    /// The peer's parameters, or the error for any other message.
    pub(crate) fn params(self) -> Result<Params, HandshakeError> {
        match self {
            Self::Params(p) => Ok(p),
            Self::Ready => Err(HandshakeError::Unexpected {
                expected: "parameters",
            }),
        }
    }

    /// `Ok` for [`Message::Ready`], the error for any other message.
    pub(crate) fn ready(self) -> Result<(), HandshakeError> {
        match self {
            Self::Ready => Ok(()),
            Self::Params(_) => Err(HandshakeError::Unexpected { expected: "ready" }),
        }
    }
}

impl Params {
    fn to_bytes(self) -> [u8; PARAMS_LEN] {
        let mut b = [0u8; PARAMS_LEN];
        b[field::QPN].copy_from_slice(&self.qpn.to_be_bytes());
        b[field::PSN].copy_from_slice(&self.psn.to_be_bytes());
        b[field::GID].copy_from_slice(&self.gid);
        b[field::MTU] = self.mtu as u8;
        b[field::RD_ATOMIC] = self.rd_atomic;
        b[field::RECV_SIZE].copy_from_slice(&self.recv_size.to_be_bytes());
        b
    }

    fn parse(b: &[u8]) -> Result<Self, HandshakeError> {
        if b.len() != PARAMS_LEN {
            return Err(HandshakeError::BadLength {
                kind: kind::PARAMS,
                len: b.len() as u16,
            });
        }
        let u32_at = |r: core::ops::Range<usize>| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[r]);
            u32::from_be_bytes(w)
        };
        let qpn = u32_at(field::QPN);
        let psn = u32_at(field::PSN);
        if qpn >> 24 != 0 {
            return Err(HandshakeError::OutOfRange("QPN"));
        }
        if psn >> 24 != 0 {
            return Err(HandshakeError::OutOfRange("PSN"));
        }
        if b[field::RESERVED].iter().any(|&x| x != 0) {
            return Err(HandshakeError::Reserved);
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[field::GID]);
        Ok(Self {
            qpn,
            psn,
            gid,
            mtu: Mtu::from_ibv(b[field::MTU]).ok_or(HandshakeError::BadMtu(b[field::MTU]))?,
            rd_atomic: b[field::RD_ATOMIC],
            recv_size: u32_at(field::RECV_SIZE),
        })
    }
}

/// What carries the exchange's messages: a TCP stream here; rdma_cm's REQ, REP and RTU
/// later.
pub(crate) trait Carrier {
    /// Sends one message.
    fn send(&mut self, m: Message) -> crate::Result<()>;
    /// Receives the next message.
    fn recv(&mut self) -> crate::Result<Message>;
}

/// The client's steps: send ours, take the server's, bring the QP up with `up`, say ready.
pub(crate) fn dial<C: Carrier>(
    c: &mut C,
    ours: Params,
    up: impl FnOnce(&Params) -> crate::Result<()>,
) -> crate::Result<Params> {
    c.send(Message::Params(ours))?;
    let peer = c.recv()?.params()?;
    up(&peer)?;
    c.send(Message::Ready)?;
    Ok(peer)
}

/// The server's steps: take the client's, bring the QP up with `up`, send ours, wait for
/// ready (the client's QP can receive only then).
pub(crate) fn answer<C: Carrier>(
    c: &mut C,
    ours: Params,
    up: impl FnOnce(&Params) -> crate::Result<()>,
) -> crate::Result<Params> {
    let peer = c.recv()?.params()?;
    up(&peer)?;
    c.send(Message::Params(ours))?;
    c.recv()?.ready()?;
    Ok(peer)
}

/// A timed-out or closed socket is a handshake error; others stay I/O errors.
fn io_error(e: io::Error) -> crate::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeError::Timeout.into(),
        io::ErrorKind::UnexpectedEof => HandshakeError::Closed.into(),
        _ => e.into(),
    }
}

impl Carrier for &TcpStream {
    fn send(&mut self, m: Message) -> crate::Result<()> {
        self.write_all(&m.to_bytes()).map_err(io_error)
    }

    fn recv(&mut self) -> crate::Result<Message> {
        let mut h = [0u8; HEADER_LEN];
        self.read_exact(&mut h).map_err(io_error)?;
        let (k, len) = Message::parse_header(&h)?;
        let mut body = [0u8; PARAMS_LEN];
        self.read_exact(&mut body[..len]).map_err(io_error)?;
        Ok(Message::parse_body(k, &body[..len])?)
    }
}

/// The async counterparts of [`dial`] and [`answer`] over a tokio stream, each message
/// bounded by `timeout`.
#[cfg(feature = "tokio")]
pub(crate) mod nonblocking {
    use super::{HEADER_LEN, Message, PARAMS_LEN, Params, io_error};
    use crate::exchange::HandshakeError;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    async fn send(s: &mut TcpStream, m: Message, t: Duration) -> crate::Result<()> {
        match tokio::time::timeout(t, s.write_all(&m.to_bytes())).await {
            Ok(r) => r.map_err(io_error),
            Err(_) => Err(HandshakeError::Timeout.into()),
        }
    }

    async fn recv(s: &mut TcpStream, t: Duration) -> crate::Result<Message> {
        let read = async {
            let mut h = [0u8; HEADER_LEN];
            s.read_exact(&mut h).await.map_err(io_error)?;
            let (k, len) = Message::parse_header(&h)?;
            let mut body = [0u8; PARAMS_LEN];
            s.read_exact(&mut body[..len]).await.map_err(io_error)?;
            Ok(Message::parse_body(k, &body[..len])?)
        };
        tokio::time::timeout(t, read)
            .await
            .unwrap_or(Err(HandshakeError::Timeout.into()))
    }

    /// [`super::dial`] on a tokio stream.
    pub(crate) async fn dial(
        s: &mut TcpStream,
        ours: Params,
        t: Duration,
        up: impl FnOnce(&Params) -> crate::Result<()>,
    ) -> crate::Result<Params> {
        send(s, Message::Params(ours), t).await?;
        let peer = recv(s, t).await?.params()?;
        up(&peer)?;
        send(s, Message::Ready, t).await?;
        Ok(peer)
    }

    /// [`super::answer`] on a tokio stream.
    pub(crate) async fn answer(
        s: &mut TcpStream,
        ours: Params,
        t: Duration,
        up: impl FnOnce(&Params) -> crate::Result<()>,
    ) -> crate::Result<Params> {
        let peer = recv(s, t).await?.params()?;
        up(&peer)?;
        send(s, Message::Params(ours), t).await?;
        recv(s, t).await?.ready()?;
        Ok(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            qpn: 0x12,
            psn: 0xabcdef,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 7, 1],
            mtu: Mtu::M1024,
            rd_atomic: 16,
            recv_size: 65536,
        }
    }

    #[test]
    fn params_bytes_are_the_documented_layout() {
        let b = Message::Params(params()).to_bytes();
        let want: Vec<u8> = [
            &b"RCXQ"[..],
            &[1, 1, 0, 32],
            &[0, 0, 0, 0x12],
            &[0, 0xab, 0xcd, 0xef],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 7, 1],
            &[3, 16, 0, 0],
            &[0, 1, 0, 0],
        ]
        .concat();
        assert_eq!(b, want);
        assert_eq!(Message::Ready.to_bytes(), b"RCXQ\x01\x02\x00\x00");
    }

    #[test]
    fn round_trip() {
        for m in [Message::Params(params()), Message::Ready] {
            let b = m.to_bytes();
            let (k, len) = Message::parse_header(b[..HEADER_LEN].try_into().unwrap()).unwrap();
            assert_eq!(len, b.len() - HEADER_LEN);
            assert_eq!(Message::parse_body(k, &b[HEADER_LEN..]).unwrap(), m);
        }
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        let good = Message::Params(params()).to_bytes();
        let header = |b: &[u8]| Message::parse_header(b[..HEADER_LEN].try_into().unwrap());
        let mut b = good.clone();
        b[0] = b'X';
        assert!(matches!(header(&b), Err(HandshakeError::BadMagic(_))));
        let mut b = good.clone();
        b[4] = 2;
        assert_eq!(header(&b), Err(HandshakeError::Version(2)));
        let mut b = good.clone();
        b[5] = 9;
        assert_eq!(header(&b), Err(HandshakeError::UnknownKind(9)));
        let mut b = good.clone();
        b[7] = 31;
        assert_eq!(
            header(&b),
            Err(HandshakeError::BadLength { kind: 1, len: 31 })
        );
        let body = |f: &dyn Fn(&mut [u8])| {
            let mut b = good[HEADER_LEN..].to_vec();
            f(&mut b);
            Message::parse_body(1, &b)
        };
        assert_eq!(body(&|b| b[0] = 1), Err(HandshakeError::OutOfRange("QPN")));
        assert_eq!(body(&|b| b[4] = 1), Err(HandshakeError::OutOfRange("PSN")));
        assert_eq!(body(&|b| b[24] = 6), Err(HandshakeError::BadMtu(6)));
        assert_eq!(body(&|b| b[27] = 1), Err(HandshakeError::Reserved));
        assert!(Message::Ready.params().is_err());
        assert!(Message::Params(params()).ready().is_err());
    }
}
