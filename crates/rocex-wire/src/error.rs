//! Errors that say which header failed, where, and why.

use core::fmt;

/// The header (or part of a frame) in which a parse or emit failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// Ethernet II header.
    Ethernet,
    /// 802.1Q VLAN tag.
    Vlan,
    /// IPv4 header.
    Ipv4,
    /// IPv6 header.
    Ipv6,
    /// UDP header.
    Udp,
    /// Base Transport Header.
    Bth,
    /// Datagram Extended Transport Header.
    Deth,
    /// Flush Extended Transport Header.
    Feth,
    /// RDMA Extended Transport Header.
    Reth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Atomic ACK Extended Transport Header.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// rocex's selective-repeat ETH.
    SrEth,
    /// rocex's selective acknowledgement bitmap.
    Sack,
    /// Invalidate Extended Transport Header.
    Ieth,
    /// The reserved body of a congestion notification packet.
    Cnp,
    /// Payload and pad.
    Payload,
    /// Invariant CRC.
    Icrc,
}

impl Layer {
    /// The header's name as the IBTA spec and tcpdump-like output spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ethernet => "Ethernet",
            Self::Vlan => "802.1Q",
            Self::Ipv4 => "IPv4",
            Self::Ipv6 => "IPv6",
            Self::Udp => "UDP",
            Self::Bth => "BTH",
            Self::Deth => "DETH",
            Self::Feth => "FETH",
            Self::Reth => "RETH",
            Self::AtomicEth => "AtomicETH",
            Self::Aeth => "AETH",
            Self::AtomicAckEth => "AtomicAckETH",
            Self::ImmDt => "ImmDt",
            Self::SrEth => "SRETH",
            Self::Sack => "SACK",
            Self::Ieth => "IETH",
            Self::Cnp => "CNP",
            Self::Payload => "payload",
            Self::Icrc => "ICRC",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The header needs more bytes than there are.
    Truncated {
        /// Bytes the header needs.
        required: usize,
        /// Bytes available from the header's start.
        available: usize,
    },
    /// The BTH opcode is not one this crate knows (RD and reserved codes).
    UnknownOpcode(u8),
    /// The opcode carries no payload but bytes remain before the ICRC.
    UnexpectedPayload(usize),
    /// The BTH pad count is larger than the payload.
    PadTooLong {
        /// Pad count from the BTH.
        pad: u8,
        /// Payload bytes, pad included.
        payload: usize,
    },
    /// The frame is not RoCE v2 (not UDP, or not to a RoCE port).
    NotRoce(&'static str),
    /// A field holds a value the layer rejects.
    BadValue(&'static str),
    /// A representation does not fit its opcode (a header missing or extra).
    Inconsistent(&'static str),
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        required: usize,
        /// Bytes given.
        available: usize,
    },
    /// etherparse rejected the Ethernet, VLAN, IP or UDP layer.
    Link(&'static str),
}

/// A wire error: the layer that failed, its byte offset in the input, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The header that failed.
    pub layer: Layer,
    /// Byte offset of that header from the start of the parsed input.
    pub offset: usize,
    /// Why it failed.
    pub kind: ErrorKind,
}

impl Error {
    pub(crate) const fn new(layer: Layer, offset: usize, kind: ErrorKind) -> Self {
        Self {
            layer,
            offset,
            kind,
        }
    }

    pub(crate) const fn truncated(
        layer: Layer,
        offset: usize,
        required: usize,
        available: usize,
    ) -> Self {
        Self::new(
            layer,
            offset,
            ErrorKind::Truncated {
                required,
                available,
            },
        )
    }

    /// Checks that an output buffer of `available` bytes takes the `required` bytes of a
    /// write that starts with `layer`.
    pub(crate) fn check_room(layer: Layer, required: usize, available: usize) -> Result<(), Self> {
        if available < required {
            return Err(Self::new(
                layer,
                0,
                ErrorKind::BufferTooSmall {
                    required,
                    available,
                },
            ));
        }
        Ok(())
    }

    /// The same error, moved `by` bytes further into an enclosing buffer.
    #[must_use]
    pub(crate) fn shifted(mut self, by: usize) -> Self {
        self.offset += by;
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (layer, offset) = (self.layer, self.offset);
        match &self.kind {
            ErrorKind::Truncated {
                required,
                available,
            } => write!(
                f,
                "{layer} at byte {offset} is truncated: it needs {required} bytes but only {available} remain."
            ),
            ErrorKind::UnknownOpcode(op) => {
                write!(
                    f,
                    "{layer} at byte {offset} has opcode {op:#04x}, which is reserved or not supported."
                )
            }
            ErrorKind::UnexpectedPayload(n) => write!(
                f,
                "{layer} at byte {offset} holds {n} bytes, but the opcode carries no payload."
            ),
            ErrorKind::PadTooLong { pad, payload } => write!(
                f,
                "{layer} at byte {offset} has a pad count of {pad}, more than its {payload} payload bytes."
            ),
            ErrorKind::NotRoce(why) => write!(f, "{layer} at byte {offset} is not RoCE v2: {why}."),
            ErrorKind::BadValue(why) => {
                write!(f, "{layer} at byte {offset} has a bad value: {why}.")
            }
            ErrorKind::Inconsistent(why) => {
                write!(
                    f,
                    "{layer} at byte {offset} does not fit its opcode: {why}."
                )
            }
            ErrorKind::BufferTooSmall {
                required,
                available,
            } => write!(
                f,
                "{layer} at byte {offset} cannot be written: it needs {required} bytes but the buffer has {available}."
            ),
            ErrorKind::Link(msg) => write!(f, "{layer} at byte {offset} is malformed: {msg}."),
        }
    }
}

impl std::error::Error for Error {}
