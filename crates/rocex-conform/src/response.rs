//! The part of a response packet the comparison looks at.

use core::fmt;

use rocex_wire::{NakCode, Opcode, PacketRepr, Psn, Syndrome};

/// What is compared of one response: opcode, PSN, AETH syndrome and MSN, payload length and
/// the atomic original value. The destination QPN, pad and ICRC are not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Opcode (ACK, atomic ACK, or one of the READ responses).
    pub opcode: Opcode,
    /// PSN.
    pub psn: Psn,
    /// AETH syndrome byte and MSN, when the opcode carries an AETH.
    pub aeth: Option<(u8, u32)>,
    /// Payload bytes (READ responses).
    pub payload_len: usize,
    /// Original value (atomic ACK).
    pub orig: Option<u64>,
}

impl Response {
    /// The compared fields of a parsed response packet.
    pub fn of(p: &PacketRepr<'_>) -> Self {
        Self {
            opcode: p.bth.opcode,
            psn: p.bth.psn,
            aeth: p.aeth.map(|a| (a.syndrome.to_byte(), a.msn)),
            payload_len: p.payload.len(),
            orig: p.atomic_ack_eth.map(|a| a.orig),
        }
    }

    /// The AETH syndrome byte, if any.
    pub fn syndrome(&self) -> Option<u8> {
        self.aeth.map(|(s, _)| s)
    }

    /// The AETH syndrome, decoded, if any.
    pub fn aeth_syndrome(&self) -> Option<Syndrome> {
        self.syndrome().map(Syndrome::from_byte)
    }

    /// True for a NAK with this code.
    pub fn is_nak(&self, code: NakCode) -> bool {
        self.aeth_syndrome() == Some(Syndrome::Nak(code))
    }
}

impl fmt::Display for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.opcode.name().unwrap_or("?");
        write!(f, "{name} psn={}", self.psn.value())?;
        if let Some((s, msn)) = self.aeth {
            write!(f, " aeth={s:#04x} msn={msn}")?;
        }
        write!(f, " len={}", self.payload_len)?;
        if let Some(o) = self.orig {
            write!(f, " orig={o:#x}")?;
        }
        Ok(())
    }
}
