//! The ECN field of the IP header (RFC 3168 §5: the low two bits of the IPv4 TOS byte and
//! of the IPv6 traffic class), and the traffic class byte RoCE v2 takes from the QP.
//!
//! rdma-core passes an address handle's `grh.traffic_class` to the kernel, which puts it in
//! the IP header whole (rxe `prepare4`/`prepare6`: the IPv4 TOS, the IPv6 traffic class):
//! its upper six bits are the DSCP, its lower two the ECN field.

use core::fmt;

/// An ECN codepoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// Not ECN-capable transport (0b00): a congested router drops rather than marks.
    #[default]
    NotEct,
    /// ECT(1) (0b01).
    Ect1,
    /// ECT(0) (0b10): what DCQCN senders set.
    Ect0,
    /// Congestion experienced (0b11): a router marked the packet instead of dropping it.
    Ce,
}

impl Ecn {
    /// The codepoint in the low two bits of `tos` (a TOS or traffic class byte).
    pub const fn from_tos(tos: u8) -> Self {
        match tos & 3 {
            0 => Self::NotEct,
            1 => Self::Ect1,
            2 => Self::Ect0,
            _ => Self::Ce,
        }
    }

    /// The two bits.
    pub const fn bits(self) -> u8 {
        match self {
            Self::NotEct => 0,
            Self::Ect1 => 1,
            Self::Ect0 => 2,
            Self::Ce => 3,
        }
    }

    /// Whether the sender said it understands ECN.
    pub const fn is_ect(self) -> bool {
        matches!(self, Self::Ect0 | Self::Ect1)
    }
}

impl fmt::Display for Ecn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotEct => "not-ect",
            Self::Ect1 => "ect1",
            Self::Ect0 => "ect0",
            Self::Ce => "ce",
        })
    }
}

/// The TOS (IPv4) or traffic class (IPv6) byte of a packet: `dscp` in the upper six bits,
/// `ecn` in the lower two.
pub const fn tos(dscp: u8, ecn: Ecn) -> u8 {
    (dscp & 0x3f) << 2 | ecn.bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codepoints_are_rfc_3168s() {
        assert_eq!(Ecn::from_tos(0xc2), Ecn::Ect0); // the ConnectX-4 CNP's TOS
        assert_eq!(Ecn::from_tos(0x03), Ecn::Ce);
        assert_eq!(Ecn::from_tos(0x01), Ecn::Ect1);
        assert_eq!(tos(48, Ecn::Ect0), 0xc2);
        assert_eq!(tos(26, Ecn::NotEct), 0x68);
        for b in 0..=255u8 {
            assert_eq!(Ecn::from_tos(b).bits(), b & 3);
        }
    }
}
