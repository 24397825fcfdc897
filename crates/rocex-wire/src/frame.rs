//! Whole RoCE v2 frames: Ethernet II (with or without one 802.1Q tag), IPv4 or IPv6, UDP to
//! port 4791, and the transport packet (IBTA annex A17.4). The Ethernet, IP and UDP headers
//! are etherparse's (read in place on the receive path); this module stacks them and checks
//! the ICRC across them.

use core::net::IpAddr;
use core::ops::Range;

use etherparse::checksum::Sum16BitWords;
use etherparse::{
    EtherType, Ethernet2Header, Ethernet2HeaderSlice, IpDscp, IpEcn, IpNumber, Ipv4Header,
    Ipv4HeaderSlice, Ipv6Header, Ipv6HeaderSlice, SingleVlanHeader, SingleVlanHeaderSlice,
    UdpHeader, UdpHeaderSlice, VlanId, err,
};

use crate::icrc::{self, IcrcForm};
use crate::packet::ICRC_LEN;
use crate::{Error, ErrorKind, Layer, Opcode, PacketRepr, Result, bth};

/// The UDP destination port of RoCE v2 (IANA).
pub const ROCE_V2_PORT: u16 = 4791;

/// The UDP source port of a connected QP: the kernel's `rdma_get_udp_sport` with flow
/// label 0, which rxe uses. The flow label is derived from the product of both QPNs, so
/// both ends of a connection use the same port (0x11 <-> 0x12 gives 49458 in rxe captures).
pub const fn udp_source_port(local_qpn: u32, remote_qpn: u32) -> u16 {
    let mut v = local_qpn as u64 * remote_qpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    let label = (v & 0xf_ffff) as u32;
    let low = (label & 0x3fff) ^ ((label & 0xf_c000) >> 14);
    (low | 0xc000) as u16
}

/// Ethernet II header and an optional 802.1Q tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRepr {
    /// Ethernet II header; its EtherType is the VLAN TPID when `vlan` is set.
    pub eth: Ethernet2Header,
    /// 802.1Q tag, whose EtherType names the IP version.
    pub vlan: Option<SingleVlanHeader>,
}

impl LinkRepr {
    /// Length on the wire.
    pub fn header_len(&self) -> usize {
        Ethernet2Header::LEN + self.vlan.as_ref().map_or(0, |_| SingleVlanHeader::LEN)
    }

    /// The EtherType that names the network layer.
    pub fn inner_ether_type(&self) -> EtherType {
        self.vlan
            .as_ref()
            .map_or(self.eth.ether_type, |v| v.ether_type)
    }

    fn set_inner_ether_type(&mut self, t: EtherType) {
        match &mut self.vlan {
            Some(v) => {
                self.eth.ether_type = EtherType::VLAN_TAGGED_FRAME;
                v.ether_type = t;
            }
            None => self.eth.ether_type = t,
        }
    }
}

/// The IP header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpRepr {
    /// IPv4 (options allowed, fragments not).
    V4(Ipv4Header),
    /// IPv6 (extension headers not allowed: UDP must follow).
    V6(Ipv6Header),
}

impl IpRepr {
    /// Header length on the wire.
    pub fn header_len(&self) -> usize {
        match self {
            Self::V4(h) => h.header_len(),
            Self::V6(_) => Ipv6Header::LEN,
        }
    }
}

/// Outcome of checking a frame's ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcCheck {
    /// The ICRC matches, computed in this form.
    Valid(IcrcForm),
    /// The ICRC does not match.
    Invalid {
        /// The ICRC this crate computes (spec form).
        computed: u32,
        /// The ICRC on the wire.
        found: u32,
    },
}

impl IcrcCheck {
    /// True when the ICRC matched.
    pub const fn is_valid(self) -> bool {
        matches!(self, Self::Valid(_))
    }
}

/// A whole RoCE v2 frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRepr<'a> {
    /// Link layer.
    pub link: LinkRepr,
    /// Network layer.
    pub ip: IpRepr,
    /// UDP header.
    pub udp: UdpHeader,
    /// Transport packet.
    pub packet: PacketRepr<'a>,
    /// How [`FrameRepr::emit`] computes the ICRC ([`IcrcForm::for_opcode`] after parse
    /// and [`FrameRepr::finalize`]).
    pub icrc_form: IcrcForm,
    /// Bytes after the IP datagram (Ethernet padding of short frames), emitted as they are.
    pub trailer: &'a [u8],
}

/// Where each layer of a parsed frame lies in its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout<'a> {
    bytes: &'a [u8],
    ip: Range<usize>,
    udp: Range<usize>,
    /// The transport packet up to (without) its ICRC.
    transport: Range<usize>,
}

impl Layout<'_> {
    /// The ICRC over the bytes as received, in `form`; `!found` if the headers cannot be
    /// read back (they parsed, so they can).
    fn compute_icrc(&self, form: IcrcForm, found: u32) -> u32 {
        let (ip, udp, t) = (
            &self.bytes[self.ip.clone()],
            &self.bytes[self.udp.clone()],
            &self.bytes[self.transport.clone()],
        );
        icrc::compute(ip, udp, t, form).unwrap_or(!found)
    }

    /// Checks `found`: in the spec's form, and for FLUSH (`opcode`) also in rxe's form.
    fn check_icrc(&self, opcode: Opcode, found: u32) -> IcrcCheck {
        let computed = self.compute_icrc(IcrcForm::Spec, found);
        if computed == found {
            return IcrcCheck::Valid(IcrcForm::Spec);
        }
        if opcode == Opcode::RC_FLUSH && self.compute_icrc(IcrcForm::RxeFlush, found) == found {
            return IcrcCheck::Valid(IcrcForm::RxeFlush);
        }
        IcrcCheck::Invalid { computed, found }
    }
}

/// The IP header of a received frame, read in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpView<'a> {
    /// IPv4 (options allowed, fragments not).
    V4(Ipv4HeaderSlice<'a>),
    /// IPv6 (extension headers not allowed: UDP must follow).
    V6(Ipv6HeaderSlice<'a>),
}

impl IpView<'_> {
    /// Header length on the wire.
    pub fn header_len(&self) -> usize {
        match self {
            Self::V4(h) => h.slice().len(),
            Self::V6(h) => h.slice().len(),
        }
    }

    /// The length the header says its payload has.
    pub fn payload_len(&self) -> usize {
        match self {
            Self::V4(h) => usize::from(h.total_len()).saturating_sub(h.slice().len()),
            Self::V6(h) => usize::from(h.payload_length()),
        }
    }

    /// The source and destination addresses.
    pub fn addresses(&self) -> (IpAddr, IpAddr) {
        match self {
            Self::V4(h) => (h.source_addr().into(), h.destination_addr().into()),
            Self::V6(h) => (h.source_addr().into(), h.destination_addr().into()),
        }
    }

    /// The TOS (IPv4) or traffic class (IPv6) byte: DSCP and ECN.
    pub fn tos(&self) -> u8 {
        match self {
            Self::V4(h) => h.slice()[1],
            Self::V6(h) => h.traffic_class(),
        }
    }

    /// The ECN field (RFC 3168): CE where a router found congestion.
    pub fn ecn(&self) -> crate::Ecn {
        crate::Ecn::from_tos(self.tos())
    }

    /// Whether the IPv4 header checksum holds (RFC 791: the one's-complement sum of the
    /// header, checksum included, is all ones); IPv6 has none.
    pub fn checksum_ok(&self) -> bool {
        match self {
            Self::V4(h) => Sum16BitWords::new().add_slice(h.slice()).ones_complement() == 0,
            Self::V6(_) => true,
        }
    }

    fn to_repr(&self) -> IpRepr {
        match self {
            Self::V4(h) => IpRepr::V4(h.to_header()),
            Self::V6(h) => IpRepr::V6(h.to_header()),
        }
    }

    fn layer(&self) -> Layer {
        match self {
            Self::V4(_) => Layer::Ipv4,
            Self::V6(_) => Layer::Ipv6,
        }
    }
}

/// The Ethernet, IP and UDP headers of a RoCE v2 frame, read in place, and where its
/// transport packet lies, without parsing the transport headers: what a receive path needs
/// to check the ICRC and hand the datagram on to an engine, which parses the packet itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeaders<'a> {
    /// Ethernet II header; its EtherType is the VLAN TPID when `vlan` is set.
    pub eth: Ethernet2HeaderSlice<'a>,
    /// 802.1Q tag, whose EtherType names the IP version.
    pub vlan: Option<SingleVlanHeaderSlice<'a>>,
    /// Network layer.
    pub ip: IpView<'a>,
    /// UDP header.
    pub udp: UdpHeaderSlice<'a>,
    /// The ICRC found on the wire.
    pub icrc: u32,
    layout: Layout<'a>,
    trailer: &'a [u8],
}

impl<'a> FrameHeaders<'a> {
    /// Parses the headers of an Ethernet frame whose UDP destination port satisfies
    /// `is_roce_port` and whose UDP payload can hold a BTH and an ICRC.
    pub fn parse_with(bytes: &'a [u8], is_roce_port: impl Fn(u16) -> bool) -> Result<Self> {
        let h = Self::parse_layers(bytes, is_roce_port)?;
        let (at, body) = (h.layout.transport.start, h.datagram().len());
        if body < bth::LEN {
            return Err(Error::truncated(Layer::Bth, at, bth::LEN, body));
        }
        if body < bth::LEN + ICRC_LEN {
            return Err(Error::truncated(
                Layer::Icrc,
                at + bth::LEN,
                ICRC_LEN,
                body - bth::LEN,
            ));
        }
        Ok(h)
    }

    /// The headers, with the UDP payload unchecked: [`Frame::parse_with`] leaves that to
    /// the packet's own parse, whose errors say more.
    fn parse_layers(bytes: &'a [u8], is_roce_port: impl Fn(u16) -> bool) -> Result<Self> {
        let eth = Ethernet2HeaderSlice::from_slice(bytes)
            .map_err(|e| len_error(Layer::Ethernet, 0, &e))?;
        let mut at = Ethernet2Header::LEN;
        let mut ether_type = eth.ether_type();
        let vlan = if ether_type == EtherType::VLAN_TAGGED_FRAME {
            let v = SingleVlanHeaderSlice::from_slice(&bytes[at..])
                .map_err(|e| len_error(Layer::Vlan, at, &e))?;
            ether_type = v.ether_type();
            at += SingleVlanHeader::LEN;
            Some(v)
        } else {
            None
        };
        let ip_start = at;
        let ip = match ether_type {
            EtherType::IPV4 => IpView::V4(parse_ipv4(&bytes[at..], at)?),
            EtherType::IPV6 => IpView::V6(parse_ipv6(&bytes[at..], at)?),
            _ => {
                return Err(Error::new(
                    Layer::Ethernet,
                    0,
                    ErrorKind::NotRoce("the EtherType is neither IPv4 nor IPv6"),
                ));
            }
        };
        at += ip.header_len();
        let ip_payload_len = ip.payload_len();
        let available = bytes.len() - at;
        if ip_payload_len > available {
            return Err(Error::truncated(
                ip.layer(),
                ip_start,
                ip.header_len() + ip_payload_len,
                ip.header_len() + available,
            ));
        }
        let ip_end = at + ip_payload_len;
        let udp = UdpHeaderSlice::from_slice(&bytes[at..ip_end])
            .map_err(|e| len_error(Layer::Udp, at, &e))?;
        if usize::from(udp.length()) != ip_payload_len {
            return Err(Error::new(
                Layer::Udp,
                at,
                ErrorKind::BadValue("the UDP length disagrees with the IP length"),
            ));
        }
        if !is_roce_port(udp.destination_port()) {
            return Err(Error::new(
                Layer::Udp,
                at,
                ErrorKind::NotRoce("the destination port is not a RoCE port"),
            ));
        }
        let udp_range = at..at + UdpHeader::LEN;
        at += UdpHeader::LEN;
        // Without room for an ICRC the transport is all there is (the caller refuses it).
        let icrc_at = (ip_end - ICRC_LEN).max(at);
        let mut icrc = [0; ICRC_LEN];
        if let Some(b) = bytes.get(icrc_at..icrc_at + ICRC_LEN) {
            icrc.copy_from_slice(b);
        }
        Ok(Self {
            eth,
            vlan,
            ip,
            udp,
            icrc: icrc::from_wire(icrc),
            layout: Layout {
                bytes,
                ip: ip_start..udp_range.start,
                udp: udp_range,
                transport: at..icrc_at,
            },
            trailer: &bytes[ip_end..],
        })
    }

    /// Parses the headers of an Ethernet frame sent to UDP port 4791.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_with(bytes, |p| p == ROCE_V2_PORT)
    }

    /// The 802.1Q tag's VLAN ID, if the frame has a tag.
    pub fn vlan_id(&self) -> Option<VlanId> {
        self.vlan
            .as_ref()
            .map(SingleVlanHeaderSlice::vlan_identifier)
    }

    /// The UDP payload: the transport packet with its ICRC.
    pub fn datagram(&self) -> &'a [u8] {
        let at = self.layout.udp.end;
        &self.layout.bytes[at..at + self.udp_payload_len()]
    }

    fn udp_payload_len(&self) -> usize {
        usize::from(self.udp.length()) - UdpHeader::LEN
    }

    /// The transport packet's opcode.
    pub fn opcode(&self) -> Opcode {
        Opcode(self.layout.bytes[self.layout.transport.start])
    }

    /// Checks the ICRC: in the spec's form, and for FLUSH also in rxe's form.
    pub fn check_icrc(&self) -> IcrcCheck {
        self.layout.check_icrc(self.opcode(), self.icrc)
    }
}

/// A parsed frame: its representation and where each layer lies in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The frame's representation.
    pub repr: FrameRepr<'a>,
    /// The ICRC found on the wire.
    pub icrc: u32,
    layout: Layout<'a>,
}

impl<'a> Frame<'a> {
    /// Parses an Ethernet frame whose UDP destination port satisfies `is_roce_port`.
    pub fn parse_with(bytes: &'a [u8], is_roce_port: impl Fn(u16) -> bool) -> Result<Self> {
        let h = FrameHeaders::parse_layers(bytes, is_roce_port)?;
        let (at, end) = (
            h.layout.transport.start,
            h.layout.udp.end + h.udp_payload_len(),
        );
        let (packet, icrc) = PacketRepr::parse(&bytes[at..end]).map_err(|e| e.shifted(at))?;
        let icrc_form = IcrcForm::for_opcode(packet.opcode());
        let link = LinkRepr {
            eth: h.eth.to_header(),
            vlan: h.vlan.as_ref().map(SingleVlanHeaderSlice::to_header),
        };
        let repr = FrameRepr {
            link,
            ip: h.ip.to_repr(),
            udp: h.udp.to_header(),
            packet,
            icrc_form,
            trailer: h.trailer,
        };
        Ok(Self {
            repr,
            icrc,
            layout: h.layout,
        })
    }

    /// Parses an Ethernet frame sent to UDP port 4791.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        Self::parse_with(bytes, |p| p == ROCE_V2_PORT)
    }

    /// The frame's bytes as parsed.
    pub const fn bytes(&self) -> &'a [u8] {
        self.layout.bytes
    }

    /// Computes the ICRC over the received bytes in `form`.
    pub fn compute_icrc(&self, form: IcrcForm) -> u32 {
        self.layout.compute_icrc(form, self.icrc)
    }

    /// Checks the ICRC: in the spec's form, and for FLUSH also in rxe's form.
    pub fn check_icrc(&self) -> IcrcCheck {
        self.layout.check_icrc(self.repr.packet.opcode(), self.icrc)
    }
}

fn len_error(layer: Layer, offset: usize, e: &err::LenError) -> Error {
    Error::truncated(layer, offset, e.required_len, e.len)
}

fn parse_ipv4(b: &[u8], at: usize) -> Result<Ipv4HeaderSlice<'_>> {
    let h = Ipv4HeaderSlice::from_slice(b).map_err(|e| match e {
        err::ipv4::HeaderSliceError::Len(l) => len_error(Layer::Ipv4, at, &l),
        err::ipv4::HeaderSliceError::Content(err::ipv4::HeaderError::UnexpectedVersion {
            ..
        }) => Error::new(Layer::Ipv4, at, ErrorKind::Link("the version is not 4")),
        err::ipv4::HeaderSliceError::Content(
            err::ipv4::HeaderError::HeaderLengthSmallerThanHeader { .. },
        ) => Error::new(
            Layer::Ipv4,
            at,
            ErrorKind::Link("the header length is below 20 bytes"),
        ),
    })?;
    if usize::from(h.total_len()) < h.slice().len() {
        return Err(Error::new(
            Layer::Ipv4,
            at,
            ErrorKind::Link("the total length is below the header length"),
        ));
    }
    if h.more_fragments() || h.fragments_offset().value() != 0 {
        return Err(Error::new(
            Layer::Ipv4,
            at,
            ErrorKind::NotRoce("it is a fragment"),
        ));
    }
    if h.protocol() != IpNumber::UDP {
        return Err(Error::new(
            Layer::Ipv4,
            at,
            ErrorKind::NotRoce("the protocol is not UDP"),
        ));
    }
    Ok(h)
}

fn parse_ipv6(b: &[u8], at: usize) -> Result<Ipv6HeaderSlice<'_>> {
    let h = Ipv6HeaderSlice::from_slice(b).map_err(|e| match e {
        err::ipv6::HeaderSliceError::Len(l) => len_error(Layer::Ipv6, at, &l),
        err::ipv6::HeaderSliceError::Content(_) => {
            Error::new(Layer::Ipv6, at, ErrorKind::Link("the version is not 6"))
        }
    })?;
    if h.next_header() != IpNumber::UDP {
        return Err(Error::new(
            Layer::Ipv6,
            at,
            ErrorKind::NotRoce("the next header is not UDP"),
        ));
    }
    Ok(h)
}

impl<'a> FrameRepr<'a> {
    /// A frame as rxe sends it over IPv4: TTL 64, DF, IP ID 0, TOS 0, UDP checksum 0, no
    /// VLAN, with lengths, IPv4 checksum and pad filled in.
    pub fn ipv4(
        macs: ([u8; 6], [u8; 6]),
        addrs: ([u8; 4], [u8; 4]),
        src_port: u16,
        packet: PacketRepr<'a>,
    ) -> Result<Self> {
        let mut ip = Ipv4Header::new(0, 64, IpNumber::UDP, addrs.0, addrs.1).map_err(|_| {
            Error::new(
                Layer::Ipv4,
                0,
                ErrorKind::BadValue("the IPv4 header cannot be built"),
            )
        })?;
        ip.dont_fragment = true;
        Self::build(macs, IpRepr::V4(ip), src_port, packet)
    }

    /// A frame over IPv6: hop limit 64, traffic class and flow label 0, UDP checksum 0.
    pub fn ipv6(
        macs: ([u8; 6], [u8; 6]),
        addrs: ([u8; 16], [u8; 16]),
        src_port: u16,
        packet: PacketRepr<'a>,
    ) -> Result<Self> {
        let ip = Ipv6Header {
            traffic_class: 0,
            flow_label: Default::default(),
            payload_length: 0,
            next_header: IpNumber::UDP,
            hop_limit: 64,
            source: addrs.0,
            destination: addrs.1,
        };
        Self::build(macs, IpRepr::V6(ip), src_port, packet)
    }

    fn build(
        macs: ([u8; 6], [u8; 6]),
        ip: IpRepr,
        src_port: u16,
        packet: PacketRepr<'a>,
    ) -> Result<Self> {
        let eth = Ethernet2Header {
            source: macs.0,
            destination: macs.1,
            ether_type: EtherType::IPV4,
        };
        let udp = UdpHeader {
            source_port: src_port,
            destination_port: ROCE_V2_PORT,
            length: 0,
            checksum: 0,
        };
        let mut f = Self {
            link: LinkRepr { eth, vlan: None },
            ip,
            udp,
            packet: packet.with_canonical_pad(),
            icrc_form: IcrcForm::Spec,
            trailer: &[],
        };
        f.finalize()?;
        Ok(f)
    }

    /// Fills in what follows from the rest: EtherTypes, IP and UDP lengths, the IPv4
    /// checksum, the BTH pad count, and the ICRC form FLUSH needs to interoperate with rxe.
    pub fn finalize(&mut self) -> Result<()> {
        self.packet = self.packet.with_canonical_pad();
        let udp_len = UdpHeader::LEN + self.packet.buffer_len();
        self.udp.length = u16::try_from(udp_len).map_err(|_| {
            Error::new(
                Layer::Udp,
                0,
                ErrorKind::BadValue("the datagram exceeds 65535 bytes"),
            )
        })?;
        let too_big = |layer| {
            Error::new(
                layer,
                0,
                ErrorKind::BadValue("the datagram exceeds 65535 bytes"),
            )
        };
        match &mut self.ip {
            IpRepr::V4(h) => {
                h.set_payload_len(udp_len)
                    .map_err(|_| too_big(Layer::Ipv4))?;
                h.header_checksum = h.calc_header_checksum();
                self.link.set_inner_ether_type(EtherType::IPV4);
            }
            IpRepr::V6(h) => {
                h.set_payload_length(udp_len)
                    .map_err(|_| too_big(Layer::Ipv6))?;
                self.link.set_inner_ether_type(EtherType::IPV6);
            }
        }
        self.icrc_form = IcrcForm::for_opcode(self.packet.opcode());
        Ok(())
    }

    /// Sets the TOS (IPv4) or traffic class (IPv6) byte, DSCP and ECN, and the IPv4
    /// checksum over it (the ICRC masks the byte: IBA annex A17.4.2).
    pub fn set_tos(&mut self, tos: u8) {
        match &mut self.ip {
            IpRepr::V4(h) => {
                h.dscp = IpDscp::try_new(tos >> 2).unwrap_or_default();
                h.ecn = IpEcn::try_new(tos & 3).unwrap_or_default();
                h.header_checksum = h.calc_header_checksum();
            }
            IpRepr::V6(h) => h.traffic_class = tos,
        }
    }

    /// Bytes the frame takes.
    pub fn buffer_len(&self) -> usize {
        self.link.header_len()
            + self.ip.header_len()
            + UdpHeader::LEN
            + self.packet.buffer_len()
            + self.trailer.len()
    }

    /// Writes the frame, ICRC included, into `buf`; returns its length. Lengths and
    /// checksums are written as the representation holds them (see [`Self::finalize`]).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        Error::check_room(Layer::Ethernet, len, buf.len())?;
        let mut at = 0;
        let mut put = |bytes: &[u8], at: &mut usize| {
            buf[*at..*at + bytes.len()].copy_from_slice(bytes);
            *at += bytes.len();
        };
        put(&self.link.eth.to_bytes(), &mut at);
        if let Some(v) = &self.link.vlan {
            put(&v.to_bytes(), &mut at);
        }
        let ip_start = at;
        match &self.ip {
            IpRepr::V4(h) => put(&h.to_bytes(), &mut at),
            IpRepr::V6(h) => put(&h.to_bytes(), &mut at),
        }
        let udp_start = at;
        put(&self.udp.to_bytes(), &mut at);
        let transport_start = at;
        let n = self
            .packet
            .emit(&mut buf[at..])
            .map_err(|e| e.shifted(at))?;
        at += n;
        let icrc_at = at - ICRC_LEN;
        let crc = icrc::compute(
            &buf[ip_start..udp_start],
            &buf[udp_start..transport_start],
            &buf[transport_start..icrc_at],
            self.icrc_form,
        )?;
        buf[icrc_at..at].copy_from_slice(&icrc::to_wire(crc));
        buf[at..at + self.trailer.len()].copy_from_slice(self.trailer);
        Ok(len)
    }
}
