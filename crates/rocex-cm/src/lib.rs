/*! The InfiniBand communication manager, without I/O.

rdma_cm connects RC queue pairs by exchanging CM messages in management datagrams (MADs)
on QP1, the GSI: UD SEND_ONLY packets with Q_Key 0x80010000 from QP1 to QP1. This crate
holds what goes into those MADs and the state machines that exchange them:

* [`mad`], the 24-byte MAD common header; [`req`], [`mra`], [`rej`], [`rep`],
  [`disconnect`] (RTU, DREQ, DREP) and [`sidr`] (SIDR_REQ, SIDR_REP), the CM messages of
  IBTA Vol. 1 chapter 12 with their fields at the spec's bit offsets, each with a
  zero-copy view and a `Repr`;
* [`cma`], rdma_cm's addressing: service IDs of port spaces and the private-data header
  (IP addresses and port) a REQ carries;
* [`Mad`], a whole CM MAD (header and message) parsed and emitted in one call;
* [`conn`], the active and passive connection state machines: messages and time in,
  messages out, and the QP attributes of the connection;
* [`query`], one SIDR exchange (rdma_cm over UD): the active side's resends and outcome,
  and the passive side's answer.

# Guarantees
No `unsafe`, no panic on any input: every view has `check_len`, after which its accessors
do not panic, and every parser returns an [`Error`] that names the message, the byte
offset in the MAD and the reason. Reserved bits are emitted as zero and ignored on
receipt.
*/
#![forbid(unsafe_code)]

mod bits;
pub mod cma;
pub mod conn;
pub mod disconnect;
mod error;
pub mod mad;
pub mod mra;
pub mod path;
pub mod query;
pub mod rej;
pub mod rep;
pub mod req;
pub mod sidr;

use core::fmt;

pub use disconnect::{DreqRepr, IdsRepr};
pub use error::{Error, ErrorKind, Part};
pub use mad::{HEADER_LEN, MAD_LEN};
pub use mra::Repr as MraRepr;
pub use rej::{MsgKind, Repr as RejRepr};
pub use rep::Repr as RepRepr;
pub use req::Repr as ReqRepr;
pub use sidr::{RepRepr as SidrRepRepr, ReqRepr as SidrReqRepr};

/// Result of CM parsing and emission.
pub type Result<T> = core::result::Result<T, Error>;

/// Attribute ID of a REQ (IBTA §12.6: the CM's attributes 0x0010 to 0x0016).
pub const ATTR_REQ: u16 = 0x0010;
/// Attribute ID of an MRA.
pub const ATTR_MRA: u16 = 0x0011;
/// Attribute ID of a REJ.
pub const ATTR_REJ: u16 = 0x0012;
/// Attribute ID of a REP.
pub const ATTR_REP: u16 = 0x0013;
/// Attribute ID of an RTU.
pub const ATTR_RTU: u16 = 0x0014;
/// Attribute ID of a DREQ.
pub const ATTR_DREQ: u16 = 0x0015;
/// Attribute ID of a DREP.
pub const ATTR_DREP: u16 = 0x0016;
/// Attribute ID of a SIDR_REQ (IBTA §12.11).
pub const ATTR_SIDR_REQ: u16 = 0x0017;
/// Attribute ID of a SIDR_REP.
pub const ATTR_SIDR_REP: u16 = 0x0018;

/// A CM message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// ConnectRequest.
    Req(ReqRepr),
    /// MessageReceiptAcknowledgement.
    Mra(MraRepr),
    /// ConnectReject.
    Rej(RejRepr),
    /// ConnectReply.
    Rep(RepRepr),
    /// ReadyToUse.
    Rtu(IdsRepr),
    /// DisconnectRequest.
    Dreq(DreqRepr),
    /// DisconnectReply.
    Drep(IdsRepr),
    /// ServiceIDResolutionRequest.
    SidrReq(SidrReqRepr),
    /// ServiceIDResolutionResponse.
    SidrRep(SidrRepRepr),
}

impl Message {
    /// The message's attribute ID.
    pub const fn attr_id(&self) -> u16 {
        match self {
            Self::Req(_) => ATTR_REQ,
            Self::Mra(_) => ATTR_MRA,
            Self::Rej(_) => ATTR_REJ,
            Self::Rep(_) => ATTR_REP,
            Self::Rtu(_) => ATTR_RTU,
            Self::Dreq(_) => ATTR_DREQ,
            Self::Drep(_) => ATTR_DREP,
            Self::SidrReq(_) => ATTR_SIDR_REQ,
            Self::SidrRep(_) => ATTR_SIDR_REP,
        }
    }

    /// The message's name.
    pub const fn part(&self) -> Part {
        match self {
            Self::Req(_) => Part::Req,
            Self::Mra(_) => Part::Mra,
            Self::Rej(_) => Part::Rej,
            Self::Rep(_) => Part::Rep,
            Self::Rtu(_) => Part::Rtu,
            Self::Dreq(_) => Part::Dreq,
            Self::Drep(_) => Part::Drep,
            Self::SidrReq(_) => Part::SidrReq,
            Self::SidrRep(_) => Part::SidrRep,
        }
    }

    /// The sender's communication ID (a SIDR_REQ's request ID; 0 for a SIDR_REP).
    pub const fn local_comm_id(&self) -> u32 {
        match self {
            Self::SidrReq(m) => m.request_id,
            Self::SidrRep(_) => 0,
            Self::Req(m) => m.local_comm_id,
            Self::Mra(m) => m.local_comm_id,
            Self::Rej(m) => m.local_comm_id,
            Self::Rep(m) => m.local_comm_id,
            Self::Rtu(m) | Self::Drep(m) => m.local_comm_id,
            Self::Dreq(m) => m.local_comm_id,
        }
    }

    /// The receiver's communication ID (0 for a REQ or SIDR_REQ, which does not know it
    /// yet; a SIDR_REP's request ID).
    pub const fn remote_comm_id(&self) -> u32 {
        match self {
            Self::Req(_) | Self::SidrReq(_) => 0,
            Self::SidrRep(m) => m.request_id,
            Self::Mra(m) => m.remote_comm_id,
            Self::Rej(m) => m.remote_comm_id,
            Self::Rep(m) => m.remote_comm_id,
            Self::Rtu(m) | Self::Drep(m) => m.remote_comm_id,
            Self::Dreq(m) => m.remote_comm_id,
        }
    }
}

/// A whole CM MAD: the header's transaction ID and the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mad {
    /// Transaction ID.
    pub tid: u64,
    /// The message.
    pub msg: Message,
}

impl Mad {
    /// Parses a MAD (the payload of a UD SEND to QP1; at least 256 bytes).
    pub fn parse(buf: &[u8]) -> Result<Self> {
        if buf.len() < MAD_LEN {
            return Err(Error::truncated(Part::Mad, 0, MAD_LEN, buf.len()));
        }
        let hdr = mad::Repr::parse(&mad::Header::new_unchecked(&buf[..HEADER_LEN]))?;
        let body = &buf[HEADER_LEN..MAD_LEN];
        let at = |part: Part| {
            move |e: Error| Error {
                part,
                ..e.shifted(HEADER_LEN)
            }
        };
        let msg = match hdr.attr_id {
            ATTR_REQ => {
                Message::Req(ReqRepr::parse(&req::Req::new_unchecked(body)).map_err(at(Part::Req))?)
            }
            ATTR_MRA => {
                Message::Mra(MraRepr::parse(&mra::Mra::new_unchecked(body)).map_err(at(Part::Mra))?)
            }
            ATTR_REJ => {
                Message::Rej(RejRepr::parse(&rej::Rej::new_unchecked(body)).map_err(at(Part::Rej))?)
            }
            ATTR_REP => {
                Message::Rep(RepRepr::parse(&rep::Rep::new_unchecked(body)).map_err(at(Part::Rep))?)
            }
            ATTR_RTU => Message::Rtu(
                IdsRepr::parse(&disconnect::Ids::new_unchecked(body)).map_err(at(Part::Rtu))?,
            ),
            ATTR_DREQ => Message::Dreq(
                DreqRepr::parse(&disconnect::Dreq::new_unchecked(body)).map_err(at(Part::Dreq))?,
            ),
            ATTR_DREP => Message::Drep(
                IdsRepr::parse(&disconnect::Ids::new_unchecked(body)).map_err(at(Part::Drep))?,
            ),
            ATTR_SIDR_REQ => Message::SidrReq(
                SidrReqRepr::parse(&sidr::SidrReq::new_unchecked(body))
                    .map_err(at(Part::SidrReq))?,
            ),
            ATTR_SIDR_REP => Message::SidrRep(
                SidrRepRepr::parse(&sidr::SidrRep::new_unchecked(body))
                    .map_err(at(Part::SidrRep))?,
            ),
            _ => {
                return Err(Error::new(
                    Part::Mad,
                    16,
                    ErrorKind::Unsupported(
                        "a CM attribute other than REQ, MRA, REJ, REP, RTU, DREQ, DREP, \
                         SIDR_REQ, SIDR_REP",
                    ),
                ));
            }
        };
        Ok(Self { tid: hdr.tid, msg })
    }

    /// Writes the MAD into the first 256 bytes of `buf`; returns 256.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < MAD_LEN {
            return Err(Error::truncated(Part::Mad, 0, MAD_LEN, buf.len()));
        }
        let (head, body) = buf[..MAD_LEN].split_at_mut(HEADER_LEN);
        mad::Repr {
            status: 0,
            tid: self.tid,
            attr_id: self.msg.attr_id(),
            attr_mod: 0,
        }
        .emit(&mut mad::Header::new_unchecked(head))?;
        let part = self.msg.part();
        match &self.msg {
            Message::Req(m) => m.emit(&mut req::Req::new_unchecked(body)),
            Message::Mra(m) => m.emit(&mut mra::Mra::new_unchecked(body)),
            Message::Rej(m) => m.emit(&mut rej::Rej::new_unchecked(body)),
            Message::Rep(m) => m.emit(&mut rep::Rep::new_unchecked(body)),
            Message::Rtu(m) | Message::Drep(m) => m.emit(&mut disconnect::Ids::new_unchecked(body)),
            Message::Dreq(m) => m.emit(&mut disconnect::Dreq::new_unchecked(body)),
            Message::SidrReq(m) => m.emit(&mut sidr::SidrReq::new_unchecked(body)),
            Message::SidrRep(m) => m.emit(&mut sidr::SidrRep::new_unchecked(body)),
        }
        .map_err(|e| Error {
            part,
            ..e.shifted(HEADER_LEN)
        })?;
        Ok(MAD_LEN)
    }
}

impl fmt::Display for Mad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CM {} tid={:#x} local_comm_id={:#010x} remote_comm_id={:#010x}",
            self.msg.part().name(),
            self.tid,
            self.msg.local_comm_id(),
            self.msg.remote_comm_id()
        )
    }
}

/// Refuses a value wider than its field: each check is `(byte offset, value, width in
/// bits, what)`. A setter would cut the value silently; the error names the field instead.
pub(crate) fn check_widths(part: Part, checks: &[(usize, u64, u32, &'static str)]) -> Result<()> {
    for &(offset, v, width, what) in checks {
        if v >> width != 0 {
            return Err(Error::new(part, offset, ErrorKind::BadValue(what)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtu() -> Mad {
        Mad {
            tid: 0x2_d597_86b9,
            msg: Message::Rtu(IdsRepr::new(0xb986_97d5, 0x040e_e0df)),
        }
    }

    #[test]
    fn an_rtu_round_trips_with_its_header_as_the_kernel_writes_it() {
        let mut b = [0xa5u8; MAD_LEN];
        assert_eq!(rtu().emit(&mut b), Ok(MAD_LEN));
        assert_eq!(
            b[..32],
            [
                0x01, 0x07, 0x02, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xd5, 0x97, 0x86, 0xb9, 0x00,
                0x14, 0, 0, 0, 0, 0, 0, 0xb9, 0x86, 0x97, 0xd5, 0x04, 0x0e, 0xe0, 0xdf
            ]
        );
        assert!(b[32..].iter().all(|&x| x == 0));
        assert_eq!(Mad::parse(&b), Ok(rtu()));
    }

    #[test]
    fn bad_input_gets_an_error_that_says_where() {
        let mut b = [0u8; MAD_LEN];
        rtu().emit(&mut b).unwrap();
        let e = Mad::parse(&b[..255]).unwrap_err();
        assert_eq!(
            (e.part, e.kind),
            (
                Part::Mad,
                ErrorKind::Truncated {
                    need: 256,
                    have: 255
                }
            )
        );
        let mut other = b;
        other[1] = 0x04; // the performance management class
        assert_eq!(Mad::parse(&other).unwrap_err().offset, 1);
        let mut lap = b;
        lap[17] = 0x19; // LAP
        let e = Mad::parse(&lap).unwrap_err();
        assert_eq!((e.part, e.offset), (Part::Mad, 16));
        let mut rej = [0u8; MAD_LEN];
        Mad {
            tid: 1,
            msg: Message::Rej(RejRepr::new(1, 2, MsgKind::Req, rej::REASON_CONSUMER)),
        }
        .emit(&mut rej)
        .unwrap();
        rej[HEADER_LEN + 8] = 0xc0; // message rejected 3
        let e = Mad::parse(&rej).unwrap_err();
        assert_eq!((e.part, e.offset), (Part::Rej, HEADER_LEN + 8));
        let mut dreq = Mad {
            tid: 1,
            msg: Message::Dreq(DreqRepr::new(1, 2, 1 << 24)),
        };
        let e = dreq.emit(&mut b).unwrap_err();
        assert_eq!((e.part, e.offset), (Part::Dreq, HEADER_LEN + 8));
        dreq.msg = Message::Dreq(DreqRepr::new(1, 2, 0x11));
        assert!(dreq.emit(&mut b).is_ok());
        let e = cma::Repr::parse(&cma::Hdr::new_unchecked(&[0u8; 35][..])).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Truncated { need: 36, have: 35 });
        let mut hdr = [0u8; 36];
        hdr[1] = 0x50;
        let e = cma::Repr::parse(&cma::Hdr::new_unchecked(&hdr[..])).unwrap_err();
        assert_eq!((e.part, e.offset), (Part::CmaHdr, 1));
    }
}
