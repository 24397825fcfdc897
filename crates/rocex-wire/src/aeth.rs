//! ACK Extended Transport Header (IBTA Vol. 1 §9.3.5, table 45): a syndrome and the
//! message sequence number of the last message the responder completed.

use core::fmt;

use crate::Layer;
use crate::field::{fields, header_view};

header_view!("A zero-copy view of an AETH.", Layer::Aeth, 4);

fields! {
    /// Raw syndrome byte.
    syndrome / set_syndrome: u8 = 0..1;
    /// Message sequence number (24 bits).
    msn / set_msn: u32 = 1..4;
}

/// NAK codes (IBTA Vol. 1 table 45; rxe `enum aeth_syndrome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// PSN sequence error: the responder expected an earlier PSN.
    PsnSequenceError,
    /// Invalid request (unsupported opcode, bad length, missing FIRST/LAST...).
    InvalidRequest,
    /// Remote access error (R_Key, bounds, access rights).
    RemoteAccessError,
    /// Remote operational error.
    RemoteOperationalError,
    /// Invalid RD request.
    InvalidRdRequest,
    /// A reserved code.
    Reserved(u8),
}

impl NakCode {
    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        match self {
            Self::PsnSequenceError => 0,
            Self::InvalidRequest => 1,
            Self::RemoteAccessError => 2,
            Self::RemoteOperationalError => 3,
            Self::InvalidRdRequest => 4,
            Self::Reserved(c) => c & 0x1f,
        }
    }

    /// The code's meaning from its 5 bits.
    pub const fn from_code(c: u8) -> Self {
        match c & 0x1f {
            0 => Self::PsnSequenceError,
            1 => Self::InvalidRequest,
            2 => Self::RemoteAccessError,
            3 => Self::RemoteOperationalError,
            4 => Self::InvalidRdRequest,
            c => Self::Reserved(c),
        }
    }
}

/// The meaning of an AETH syndrome byte: bits 6-5 give the type, bits 4-0 its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a credit count code (rxe always sends 31: unlimited).
    Ack {
        /// End-to-end credit code (5 bits).
        credits: u8,
    },
    /// Receiver not ready: retry after the time the 5-bit timer code gives.
    RnrNak {
        /// RNR timer code (IBTA table 46).
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// The reserved type (bits 6-5 = 10) or bit 7 set.
    Reserved(u8),
}

/// The credit code that means "unlimited": rxe does no end-to-end flow control.
pub const CREDITS_UNLIMITED: u8 = 0x1f;

impl Syndrome {
    /// The syndrome an ACK with unlimited credit carries (0x1F).
    pub const ACK: Self = Self::Ack {
        credits: CREDITS_UNLIMITED,
    };

    /// Decodes a syndrome byte.
    pub const fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 {
            return Self::Reserved(b);
        }
        match (b >> 5) & 0x3 {
            0 => Self::Ack { credits: b & 0x1f },
            1 => Self::RnrNak { timer: b & 0x1f },
            3 => Self::Nak(NakCode::from_code(b)),
            _ => Self::Reserved(b),
        }
    }

    /// Encodes the syndrome byte.
    pub const fn to_byte(self) -> u8 {
        match self {
            Self::Ack { credits } => credits & 0x1f,
            Self::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Self::Nak(code) => 0x60 | code.code(),
            Self::Reserved(b) => b,
        }
    }

    /// True for a positive acknowledgement.
    pub const fn is_ack(self) -> bool {
        matches!(self, Self::Ack { .. })
    }
}

impl fmt::Display for Syndrome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ack { credits } => write!(f, "ACK credits={credits}"),
            Self::RnrNak { timer } => write!(f, "RNR-NAK timer={timer}"),
            Self::Nak(NakCode::PsnSequenceError) => f.write_str("NAK psn-sequence-error"),
            Self::Nak(NakCode::InvalidRequest) => f.write_str("NAK invalid-request"),
            Self::Nak(NakCode::RemoteAccessError) => f.write_str("NAK remote-access-error"),
            Self::Nak(NakCode::RemoteOperationalError) => {
                f.write_str("NAK remote-operational-error")
            }
            Self::Nak(NakCode::InvalidRdRequest) => f.write_str("NAK invalid-rd-request"),
            Self::Nak(NakCode::Reserved(c)) => write!(f, "NAK reserved-code={c}"),
            Self::Reserved(b) => write!(f, "reserved-syndrome={b:#04x}"),
        }
    }
}

/// An AETH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Syndrome.
    pub syndrome: Syndrome,
    /// Message sequence number, 0..2^24.
    pub msn: u32,
}

impl Repr {
    /// Reads an AETH.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> crate::Result<Self> {
        h.check_len()?;
        Ok(Self {
            syndrome: Syndrome::from_byte(h.syndrome()),
            msn: h.msn(),
        })
    }

    /// Writes the AETH.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> crate::Result<()> {
        h.check_len()?;
        h.set_syndrome(self.syndrome.to_byte());
        h.set_msn(self.msn);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} msn={}", self.syndrome, self.msn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_seen_from_rxe() {
        for (byte, syndrome) in [
            (0x1f, Syndrome::ACK),
            (0x2c, Syndrome::RnrNak { timer: 12 }),
            (0x60, Syndrome::Nak(NakCode::PsnSequenceError)),
            (0x61, Syndrome::Nak(NakCode::InvalidRequest)),
            (0x62, Syndrome::Nak(NakCode::RemoteAccessError)),
            (0x63, Syndrome::Nak(NakCode::RemoteOperationalError)),
            (0x40, Syndrome::Reserved(0x40)),
        ] {
            assert_eq!(Syndrome::from_byte(byte), syndrome, "{byte:#x}");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b, "{b:#x}");
        }
    }

    #[test]
    fn round_trip() {
        let bytes = [0x1f, 0x00, 0x01, 0x02];
        let r = Repr::parse(&Header::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                syndrome: Syndrome::ACK,
                msn: 0x102
            }
        );
        let mut out = [0xa5u8; 4];
        r.emit(&mut Header::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, bytes);
    }
}
