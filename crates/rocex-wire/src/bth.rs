//! Base Transport Header (IBTA Vol. 1 §9.2, figure 96): 12 bytes on every packet.

use core::fmt;

use crate::field::{Field, fields, get, header_view, set};
use crate::{Error, Layer, Opcode, Psn, Result};

mod field {
    use super::Field;
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const ECN: usize = 4;
    pub(super) const ACK_REQ: usize = 8;
    pub(super) const PSN: Field = 9..12;
}

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const PAD_MASK: u8 = 0x30;
const TVER_MASK: u8 = 0x0f;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const RESV6A_MASK: u8 = 0x3f;
const ACK_REQ: u8 = 0x80;
const RESV7_MASK: u8 = 0x7f;

/// The default partition key: full membership of the default partition.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Mask of the 24 bits a QP number has on the wire (the BTH's DestQP, the DETH's SrcQP).
pub const QPN_MASK: u32 = 0x00ff_ffff;

header_view!("A zero-copy view of a BTH.", Layer::Bth, 12);

fields! {
    /// Partition key.
    pkey / set_pkey: u16 = 2..4;
    /// Destination queue pair number (24 bits).
    dest_qp / set_dest_qp: u32 = 5..8;
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited Event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }
    /// Migration request.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIG_REQ != 0
    }
    /// Pad count: bytes added to the payload to align it to 4.
    pub fn pad(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] & PAD_MASK) >> 4
    }
    /// Transport header version (0).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & TVER_MASK
    }
    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::ECN] & FECN != 0
    }
    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::ECN] & BECN != 0
    }
    /// The six reserved bits after BECN.
    pub fn reserved6(&self) -> u8 {
        self.buffer.as_ref()[field::ECN] & RESV6A_MASK
    }
    /// Acknowledge request.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & ACK_REQ != 0
    }
    /// The seven reserved bits after AckReq.
    pub fn reserved7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK_REQ] & RESV7_MASK
    }
    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(get(self.buffer.as_ref(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.0;
    }
    /// Sets SE, MigReq, pad count and TVer in one byte.
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = (if solicited { SE } else { 0 })
            | (if mig_req { MIG_REQ } else { 0 })
            | ((pad << 4) & PAD_MASK)
            | (tver & TVER_MASK);
    }
    /// Sets FECN, BECN and the six reserved bits.
    pub fn set_ecn(&mut self, fecn: bool, becn: bool, reserved6: u8) {
        self.buffer.as_mut()[field::ECN] = (if fecn { FECN } else { 0 })
            | (if becn { BECN } else { 0 })
            | (reserved6 & RESV6A_MASK);
    }
    /// Sets AckReq and the seven reserved bits.
    pub fn set_ack_req(&mut self, ack_req: bool, reserved7: u8) {
        self.buffer.as_mut()[field::ACK_REQ] =
            (if ack_req { ACK_REQ } else { 0 }) | (reserved7 & RESV7_MASK);
    }
    /// Sets the PSN.
    pub fn set_psn(&mut self, psn: Psn) {
        set(self.buffer.as_mut(), field::PSN, psn.value());
    }
}

/// A BTH's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Opcode.
    pub opcode: Opcode,
    /// Solicited Event.
    pub solicited: bool,
    /// Migration request (rxe sends 0).
    pub mig_req: bool,
    /// Pad count, 0..=3.
    pub pad: u8,
    /// Transport header version, 0..=15 (0 today).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Reserved bits after BECN (6 bits), kept so that emission reproduces the input.
    pub reserved6: u8,
    /// Destination QP number, 0..2^24.
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Reserved bits after AckReq (7 bits).
    pub reserved7: u8,
    /// Packet sequence number.
    pub psn: Psn,
}

impl Repr {
    /// Header length.
    pub const LEN: usize = LEN;

    /// A BTH with default fields (P_Key 0xFFFF, no flags) for `opcode` to `dest_qp` at `psn`.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> Self {
        Self {
            opcode,
            solicited: false,
            mig_req: false,
            pad: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            reserved6: 0,
            dest_qp: dest_qp & QPN_MASK,
            ack_req: false,
            reserved7: 0,
            psn,
        }
    }

    /// Reads a BTH from the start of `buf`.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self> {
        h.check_len()?;
        Ok(Self {
            opcode: h.opcode(),
            solicited: h.solicited(),
            mig_req: h.mig_req(),
            pad: h.pad(),
            tver: h.tver(),
            pkey: h.pkey(),
            fecn: h.fecn(),
            becn: h.becn(),
            reserved6: h.reserved6(),
            dest_qp: h.dest_qp(),
            ack_req: h.ack_req(),
            reserved7: h.reserved7(),
            psn: h.psn(),
        })
    }

    /// Writes the BTH into the start of `h`'s buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Header<T>) -> Result<()> {
        if self.pad > 3
            || self.tver > 15
            || self.reserved6 > RESV6A_MASK
            || self.reserved7 > RESV7_MASK
        {
            return Err(Error::new(
                Layer::Bth,
                0,
                crate::ErrorKind::BadValue("a field exceeds its bit width"),
            ));
        }
        if self.dest_qp > QPN_MASK {
            return Err(Error::new(
                Layer::Bth,
                0,
                crate::ErrorKind::BadValue("the QPN exceeds 24 bits"),
            ));
        }
        h.check_len()?;
        h.set_opcode(self.opcode);
        h.set_flags(self.solicited, self.mig_req, self.pad, self.tver);
        h.set_pkey(self.pkey);
        h.set_ecn(self.fecn, self.becn, self.reserved6);
        h.set_dest_qp(self.dest_qp);
        h.set_ack_req(self.ack_req, self.reserved7);
        h.set_psn(self.psn);
        Ok(())
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} qp={:#08x} psn={}",
            self.opcode, self.dest_qp, self.psn
        )?;
        for (on, name) in [
            (self.ack_req, " ack"),
            (self.solicited, " se"),
            (self.mig_req, " mig"),
            (self.fecn, " fecn"),
            (self.becn, " becn"),
        ] {
            if on {
                f.write_str(name)?;
            }
        }
        if self.pad != 0 {
            write!(f, " pad={}", self.pad)?;
        }
        if self.pkey != DEFAULT_PKEY {
            write!(f, " pkey={:#06x}", self.pkey)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RC_RDMA_WRITE_ONLY to QP 0x11, PSN 0x4567ab, AckReq, pad 2, from a kernel rxe capture.
    static BYTES: [u8; 12] = [
        0x0a, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x45, 0x67, 0xab,
    ];

    #[test]
    fn deconstruct() {
        let h = Header::new_checked(&BYTES[..]).unwrap();
        assert_eq!(h.opcode(), Opcode::RC_RDMA_WRITE_ONLY);
        assert_eq!(h.pad(), 2);
        assert!(!h.solicited() && !h.mig_req() && !h.fecn() && !h.becn());
        assert_eq!(h.pkey(), 0xffff);
        assert_eq!(h.dest_qp(), 0x11);
        assert!(h.ack_req());
        assert_eq!(h.psn(), Psn::new(0x4567ab));
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 12];
        let mut repr = Repr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x11, Psn::new(0x4567ab));
        repr.ack_req = true;
        repr.pad = 2;
        repr.emit(&mut Header::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, BYTES);
        assert_eq!(Repr::parse(&Header::new_unchecked(&buf[..])).unwrap(), repr);
    }

    #[test]
    fn short_buffer_is_an_error() {
        let e = Header::new_checked(&BYTES[..11]).unwrap_err();
        assert_eq!(e.layer, Layer::Bth);
        assert_eq!(
            e.kind,
            crate::ErrorKind::Truncated {
                required: 12,
                available: 11
            }
        );
    }
}
