//! A whole InfiniBand transport packet as RoCE v2 carries it in UDP: BTH, the extension
//! headers the opcode table names, payload, pad and ICRC.

use core::fmt;

use crate::opcode::{Ext, ExtSet};
use crate::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, CnpRepr, DethRepr, Error, ErrorKind,
    FethRepr, IethRepr, ImmDtRepr, Layer, Opcode, OpcodeInfo, Result, RethRepr, SackRepr,
    SrEthRepr, aeth, atomic_ack_eth, atomic_eth, bth, cnp, deth, feth, ieth, immdt, reth, sack,
    sreth,
};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

/// The pad count that aligns `payload_len` to 4 bytes.
pub const fn pad_for(payload_len: usize) -> u8 {
    (payload_len.wrapping_neg() & 3) as u8
}

/// A parsed transport packet. `payload` borrows from the parsed buffer and excludes the pad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRepr<'a> {
    /// Base transport header.
    pub bth: BthRepr,
    /// Datagram ETH (UD).
    pub deth: Option<DethRepr>,
    /// Flush ETH.
    pub feth: Option<FethRepr>,
    /// RDMA ETH.
    pub reth: Option<RethRepr>,
    /// Selective-repeat ETH (rocex's SR SEND and WRITE packets).
    pub sreth: Option<SrEthRepr>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEthRepr>,
    /// ACK ETH.
    pub aeth: Option<AethRepr>,
    /// Selective acknowledgement (rocex's SR_ACKNOWLEDGE).
    pub sack: Option<SackRepr>,
    /// Atomic ACK ETH.
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// Immediate data.
    pub immdt: Option<ImmDtRepr>,
    /// Invalidate ETH.
    pub ieth: Option<IethRepr>,
    /// CNP body.
    pub cnp: Option<CnpRepr>,
    /// Payload without pad.
    pub payload: &'a [u8],
}

impl<'a> PacketRepr<'a> {
    /// A packet with only a BTH; add the extension headers its opcode needs, then the payload.
    pub const fn new(bth: BthRepr) -> Self {
        Self {
            bth,
            deth: None,
            feth: None,
            reth: None,
            sreth: None,
            atomic_eth: None,
            aeth: None,
            sack: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            cnp: None,
            payload: &[],
        }
    }

    /// A congestion notification for `dest_qp` (annex A17.9.3): opcode 0x81, BECN set, PSN
    /// 0, P_Key 0xFFFF and 16 zero bytes, as a ConnectX-4 sends it.
    pub const fn cnp(dest_qp: u32) -> Self {
        let mut bth = BthRepr::new(Opcode::CNP, dest_qp, crate::Psn::new(0));
        bth.becn = true;
        let mut p = Self::new(bth);
        p.cnp = Some(CnpRepr {
            reserved: [0; crate::cnp::LEN],
        });
        p
    }

    /// The opcode's table entry.
    pub fn info(&self) -> Result<&'static OpcodeInfo> {
        self.bth.opcode.info().ok_or(Error::new(
            Layer::Bth,
            0,
            ErrorKind::UnknownOpcode(self.bth.opcode.0),
        ))
    }

    /// Parses a packet from the UDP payload `buf` (BTH through ICRC). Returns the packet and
    /// the ICRC found on the wire, unchecked: checking it needs the IP and UDP headers.
    pub fn parse(buf: &'a [u8]) -> Result<(Self, u32)> {
        let bth = BthRepr::parse(&bth::Header::new_checked(buf)?)?;
        let op = bth.opcode;
        let info = op
            .info()
            .ok_or(Error::new(Layer::Bth, 0, ErrorKind::UnknownOpcode(op.0)))?;
        let mut p = Self::new(bth);
        let mut at = bth::LEN;
        for ext in info.exts.iter() {
            let rest = &buf[at..];
            p.parse_ext(ext, rest).map_err(|e| e.shifted(at))?;
            at += ext.header_len();
        }
        let body = buf.len() - at;
        if body < ICRC_LEN {
            return Err(Error::truncated(Layer::Icrc, at, ICRC_LEN, body));
        }
        let with_pad = body - ICRC_LEN;
        if usize::from(bth.pad) > with_pad {
            return Err(Error::new(
                Layer::Payload,
                at,
                ErrorKind::PadTooLong {
                    pad: bth.pad,
                    payload: with_pad,
                },
            ));
        }
        if !info.payload && with_pad != 0 {
            return Err(Error::new(
                Layer::Payload,
                at,
                ErrorKind::UnexpectedPayload(with_pad),
            ));
        }
        p.payload = &buf[at..at + with_pad - usize::from(bth.pad)];
        let mut icrc = [0; ICRC_LEN];
        icrc.copy_from_slice(&buf[at + with_pad..]);
        Ok((p, crate::icrc::from_wire(icrc)))
    }

    fn parse_ext(&mut self, ext: Ext, b: &[u8]) -> Result<()> {
        match ext {
            Ext::Deth => self.deth = Some(DethRepr::parse(&deth::Header::new_checked(b)?)?),
            Ext::Feth => self.feth = Some(FethRepr::parse(&feth::Header::new_checked(b)?)?),
            Ext::Reth => self.reth = Some(RethRepr::parse(&reth::Header::new_checked(b)?)?),
            Ext::SrEth => self.sreth = Some(SrEthRepr::parse(&sreth::Header::new_checked(b)?)?),
            Ext::Sack => self.sack = Some(SackRepr::parse(&sack::Header::new_checked(b)?)?),
            Ext::AtomicEth => {
                self.atomic_eth = Some(AtomicEthRepr::parse(&atomic_eth::Header::new_checked(b)?)?)
            }
            Ext::Aeth => self.aeth = Some(AethRepr::parse(&aeth::Header::new_checked(b)?)?),
            Ext::AtomicAckEth => {
                self.atomic_ack_eth = Some(AtomicAckEthRepr::parse(
                    &atomic_ack_eth::Header::new_checked(b)?,
                )?);
            }
            Ext::ImmDt => self.immdt = Some(ImmDtRepr::parse(&immdt::Header::new_checked(b)?)?),
            Ext::Ieth => self.ieth = Some(IethRepr::parse(&ieth::Header::new_checked(b)?)?),
            Ext::Cnp => self.cnp = Some(CnpRepr::parse(&cnp::Header::new_checked(b)?)?),
        }
        Ok(())
    }

    /// The extension headers present in this representation.
    pub fn exts(&self) -> ExtSet {
        [
            (self.deth.is_some(), Ext::Deth),
            (self.feth.is_some(), Ext::Feth),
            (self.reth.is_some(), Ext::Reth),
            (self.sreth.is_some(), Ext::SrEth),
            (self.atomic_eth.is_some(), Ext::AtomicEth),
            (self.aeth.is_some(), Ext::Aeth),
            (self.sack.is_some(), Ext::Sack),
            (self.atomic_ack_eth.is_some(), Ext::AtomicAckEth),
            (self.immdt.is_some(), Ext::ImmDt),
            (self.ieth.is_some(), Ext::Ieth),
            (self.cnp.is_some(), Ext::Cnp),
        ]
        .into_iter()
        .fold(
            ExtSet::EMPTY,
            |set, (on, e)| if on { set.with(e) } else { set },
        )
    }

    /// Length of BTH and extension headers.
    pub fn header_len(&self) -> usize {
        bth::LEN + self.exts().header_len()
    }

    /// Bytes the packet takes in a UDP payload: headers, payload, pad and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len() + usize::from(self.bth.pad) + ICRC_LEN
    }

    /// Sets the BTH pad count to what the payload needs.
    #[must_use]
    pub fn with_canonical_pad(mut self) -> Self {
        self.bth.pad = pad_for(self.payload.len());
        self
    }

    /// Checks that the headers present are the ones the opcode carries.
    pub fn check(&self) -> Result<&'static OpcodeInfo> {
        self.check_for(self.payload.len())
    }

    /// [`Self::check`] for a payload of `payload_len` bytes.
    fn check_for(&self, payload_len: usize) -> Result<&'static OpcodeInfo> {
        let info = self.info()?;
        if self.exts() != info.exts {
            return Err(Error::new(
                Layer::Bth,
                0,
                ErrorKind::Inconsistent("the extension headers differ from the opcode's"),
            ));
        }
        if !info.payload && (payload_len != 0 || self.bth.pad != 0) {
            return Err(Error::new(
                Layer::Payload,
                self.header_len(),
                ErrorKind::UnexpectedPayload(payload_len),
            ));
        }
        Ok(info)
    }

    /// Writes headers, payload and zero pad into `buf`, which must hold [`Self::buffer_len`]
    /// bytes; the ICRC's four bytes are left for the frame layer, which knows the IP header.
    /// Returns the length written, ICRC included.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let (at, len) = self.emit_around(buf, self.payload.len())?;
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        Ok(len)
    }

    /// Writes what [`Self::emit`] writes but the payload, for a payload of `payload_len`
    /// bytes (in place of [`Self::payload`]) that the caller writes at the offset
    /// returned: a sender gathers data from memory straight into the packet. Returns that
    /// offset and the packet's length, ICRC included.
    pub fn emit_around(&self, buf: &mut [u8], payload_len: usize) -> Result<(usize, usize)> {
        let info = self.check_for(payload_len)?;
        // The headers are the opcode's (checked): their length needs no second look.
        let at = bth::LEN + info.exts.header_len();
        let len = at + payload_len + usize::from(self.bth.pad) + ICRC_LEN;
        Error::check_room(Layer::Bth, len, buf.len())?;
        self.bth
            .emit(&mut bth::Header::new_unchecked(&mut buf[..]))?;
        let mut ext_at = bth::LEN;
        for ext in info.exts.iter() {
            self.emit_ext(ext, &mut buf[ext_at..])
                .map_err(|e| e.shifted(ext_at))?;
            ext_at += ext.header_len();
        }
        let pad_at = at + payload_len;
        buf[pad_at..pad_at + usize::from(self.bth.pad)].fill(0);
        Ok((at, len))
    }

    fn emit_ext(&self, ext: Ext, b: &mut [u8]) -> Result<()> {
        // Built only when needed: this runs for every header of every packet sent.
        let missing = || {
            Error::new(
                Layer::Bth,
                0,
                ErrorKind::Inconsistent("an extension header is missing"),
            )
        };
        match ext {
            Ext::Deth => self
                .deth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut deth::Header::new_unchecked(b)),
            Ext::Feth => self
                .feth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut feth::Header::new_unchecked(b)),
            Ext::Reth => self
                .reth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut reth::Header::new_unchecked(b)),
            Ext::SrEth => self
                .sreth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut sreth::Header::new_unchecked(b)),
            Ext::Sack => self
                .sack
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut sack::Header::new_unchecked(b)),
            Ext::AtomicEth => self
                .atomic_eth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut atomic_eth::Header::new_unchecked(b)),
            Ext::Aeth => self
                .aeth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut aeth::Header::new_unchecked(b)),
            Ext::AtomicAckEth => self
                .atomic_ack_eth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut atomic_ack_eth::Header::new_unchecked(b)),
            Ext::ImmDt => self
                .immdt
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut immdt::Header::new_unchecked(b)),
            Ext::Ieth => self
                .ieth
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut ieth::Header::new_unchecked(b)),
            Ext::Cnp => self
                .cnp
                .as_ref()
                .ok_or_else(missing)?
                .emit(&mut cnp::Header::new_unchecked(b)),
        }
    }

    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        self.bth.opcode
    }
}

impl fmt::Display for PacketRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bth)?;
        let exts: [Option<&dyn fmt::Display>; 11] = [
            self.deth.as_ref().map(|h| h as &dyn fmt::Display),
            self.feth.as_ref().map(|h| h as &dyn fmt::Display),
            self.reth.as_ref().map(|h| h as &dyn fmt::Display),
            self.sreth.as_ref().map(|h| h as &dyn fmt::Display),
            self.atomic_eth.as_ref().map(|h| h as &dyn fmt::Display),
            self.aeth.as_ref().map(|h| h as &dyn fmt::Display),
            self.sack.as_ref().map(|h| h as &dyn fmt::Display),
            self.atomic_ack_eth.as_ref().map(|h| h as &dyn fmt::Display),
            self.immdt.as_ref().map(|h| h as &dyn fmt::Display),
            self.ieth.as_ref().map(|h| h as &dyn fmt::Display),
            None,
        ];
        for h in exts.into_iter().flatten() {
            write!(f, " {h}")?;
        }
        write!(f, " payload={}", self.payload.len())
    }
}
