//! The headers below the BTH: written in front of every payload sent, and checked, with
//! the ICRC they are covered by, on every frame received.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use etherparse::{
    EtherType, Ethernet2Header, IpDscp, IpEcn, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header,
    SingleVlanHeader, UdpHeader, VlanId, VlanPcp,
};
use rocex_proto::IcrcStatus;
use rocex_wire::ROCE_V2_PORT;
use rocex_wire::frame::FrameHeaders;

use super::ring::RxFrame;
use crate::{BackendOptions, RxMeta};

/// What every frame from this port carries below its payload.
#[derive(Debug, Clone)]
pub(super) struct Headers {
    src_mac: [u8; 6],
    local: IpAddr,
    vlan: Option<VlanId>,
    dscp: IpDscp,
    ecn: IpEcn,
    /// The last IPv4 frame's headers, to patch rather than build again.
    last_v4: Option<V4Template>,
}

/// Most bytes below the payload of an IPv4 frame: Ethernet, 802.1Q, IPv4, UDP.
const MAX_V4_HEADERS: usize = 14 + 4 + 20 + 8;

/// The headers of an IPv4 frame to one destination from one UDP port with one TOS, all but the
/// lengths and the IP checksum final: a port mostly sends to one peer from one port, and
/// building the headers anew cost a fifth of handing a small packet to the kernel.
#[derive(Debug, Clone)]
struct V4Template {
    key: ([u8; 6], Ipv4Addr, u16, u8),
    bytes: [u8; MAX_V4_HEADERS],
    len: usize,
    ip_at: usize,
    /// The ones' complement sum of the IPv4 header's 16-bit words but the total length
    /// and the checksum (RFC 1071), to which a packet's total length is added.
    sum: u32,
}

impl V4Template {
    /// Writes the headers for a `payload_len`-byte UDP payload into `buf`; returns their
    /// length.
    fn write(&self, buf: &mut [u8], payload_len: u16) -> usize {
        let h = &mut buf[..self.len];
        h.copy_from_slice(&self.bytes[..self.len]);
        let ip = &mut h[self.ip_at..];
        let udp_len = UdpHeader::LEN as u16 + payload_len;
        let total = Ipv4Header::MIN_LEN as u16 + udp_len;
        let mut sum = self.sum + u32::from(total);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        ip[24..26].copy_from_slice(&udp_len.to_be_bytes());
        self.len
    }
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

impl Headers {
    /// Headers from `src_mac` and `local` with the options' VLAN, DSCP and ECN.
    pub(super) fn new(src_mac: [u8; 6], local: IpAddr, opts: &BackendOptions) -> io::Result<Self> {
        let vlan = opts
            .vlan
            .map(|v| {
                VlanId::try_new(v).map_err(|_| invalid(format!("VLAN ID {v} is not below 4096")))
            })
            .transpose()?;
        Ok(Self {
            src_mac,
            local,
            vlan,
            dscp: IpDscp::try_new(opts.dscp)
                .map_err(|_| invalid(format!("DSCP {} is not below 64", opts.dscp)))?,
            ecn: IpEcn::try_new(opts.ecn)
                .map_err(|_| invalid(format!("ECN {} is not below 4", opts.ecn)))?,
            last_v4: None,
        })
    }

    /// Length of the IP packet that carries `payload_len` bytes of UDP payload.
    pub(super) fn ip_len(&self, payload_len: usize) -> usize {
        let ip = if self.local.is_ipv4() {
            Ipv4Header::MIN_LEN
        } else {
            Ipv6Header::LEN
        };
        ip + UdpHeader::LEN + payload_len
    }

    /// Length of the whole frame that carries `payload_len` bytes of UDP payload.
    pub(super) fn frame_len(&self, payload_len: usize) -> usize {
        let vlan = self.vlan.map_or(0, |_| SingleVlanHeader::LEN);
        Ethernet2Header::LEN + vlan + self.ip_len(payload_len)
    }

    /// The TOS (traffic class) byte a packet of traffic class `tclass` leaves with: its
    /// DSCP and ECN, each where not 0, else the port's ([`BackendOptions::tos`]).
    pub(super) fn tos(&self, tclass: u8) -> u8 {
        let port = BackendOptions {
            dscp: self.dscp.value(),
            ecn: self.ecn.value(),
            ..BackendOptions::default()
        };
        port.tos(tclass)
    }

    /// Writes the frame that carries `payload` from UDP port `src_port` to `dest:4791` at
    /// `dst_mac` with IP TOS `tos` into `buf`, which holds at least [`Self::frame_len`]
    /// bytes; returns its length. IPv4: DF, identification 0, TTL 64 and UDP checksum 0,
    /// as the ICRC the engine computed assumes; IPv6: hop limit 64 and the UDP checksum,
    /// which IPv6 needs.
    pub(super) fn write(
        &mut self,
        buf: &mut [u8],
        dst_mac: [u8; 6],
        (dest, src_port): (IpAddr, u16),
        tos: u8,
        payload: &[u8],
    ) -> io::Result<usize> {
        let fits = payload.len() <= usize::from(u16::MAX) - Ipv4Header::MIN_LEN - UdpHeader::LEN;
        // IPv6 (its UDP checksum covers the payload) and oversized payloads (refused).
        let (IpAddr::V4(dst), true) = (dest, fits) else {
            return self.build(buf, (dst_mac, dest, src_port, tos), payload);
        };
        let key = (dst_mac, dst, src_port, tos);
        let t = match self.last_v4.take() {
            Some(t) if t.key == key => t,
            _ => self.v4_template(key)?,
        };
        let at = t.write(buf, payload.len() as u16);
        self.last_v4 = Some(t);
        buf[at..at + payload.len()].copy_from_slice(payload);
        Ok(at + payload.len())
    }

    fn v4_template(&self, key: ([u8; 6], Ipv4Addr, u16, u8)) -> io::Result<V4Template> {
        let (dst_mac, dst, src_port, tos) = key;
        let mut bytes = [0; MAX_V4_HEADERS];
        let len = self.build(&mut bytes, (dst_mac, dst.into(), src_port, tos), &[])?;
        let ip_at = len - UdpHeader::LEN - Ipv4Header::MIN_LEN;
        let sum = bytes[ip_at..ip_at + Ipv4Header::MIN_LEN]
            .chunks_exact(2)
            .enumerate()
            .filter(|&(i, _)| i != 1 && i != 5) // total length, checksum
            .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        Ok(V4Template {
            key,
            bytes,
            len,
            ip_at,
            sum,
        })
    }

    /// [`Self::write`] from scratch, with etherparse, to the MAC address, IP address and
    /// from the UDP port given, with the TOS given.
    fn build(
        &self,
        buf: &mut [u8],
        (dst_mac, dest, src_port, tos): ([u8; 6], IpAddr, u16, u8),
        payload: &[u8],
    ) -> io::Result<usize> {
        let len = self.frame_len(payload.len());
        let udp_len = UdpHeader::LEN + payload.len();
        let too_big = || {
            invalid(format!(
                "a {}-byte UDP payload does not fit an IP packet",
                payload.len()
            ))
        };
        let ether_type = if dest.is_ipv4() {
            EtherType::IPV4
        } else {
            EtherType::IPV6
        };
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        match self.vlan {
            None => put(&Ethernet2Header {
                source: self.src_mac,
                destination: dst_mac,
                ether_type,
            }
            .to_bytes()),
            Some(vlan_id) => {
                put(&Ethernet2Header {
                    source: self.src_mac,
                    destination: dst_mac,
                    ether_type: EtherType::VLAN_TAGGED_FRAME,
                }
                .to_bytes());
                // The priority of the DSCP's class (its top three bits), the mapping
                // switches and RNICs trusting DSCP use by default, so that a PFC
                // network carries the packet in the class its DSCP names.
                put(&SingleVlanHeader {
                    pcp: VlanPcp::try_new(tos >> 5).unwrap_or(VlanPcp::ZERO),
                    drop_eligible_indicator: false,
                    vlan_id,
                    ether_type,
                }
                .to_bytes());
            }
        }
        let udp = match (self.local, dest) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let udp_len16 = u16::try_from(udp_len).map_err(|_| too_big())?;
                // Identification 0 and DF, as Ipv4Header::new makes them.
                let mut ip =
                    Ipv4Header::new(udp_len16, 64, IpNumber::UDP, src.octets(), dst.octets())
                        .map_err(|_| too_big())?;
                ip.dscp = IpDscp::try_new(tos >> 2).unwrap_or(IpDscp::ZERO);
                ip.ecn = IpEcn::try_new(tos & 3).unwrap_or(IpEcn::ZERO);
                ip.header_checksum = ip.calc_header_checksum();
                put(&ip.to_bytes());
                UdpHeader {
                    source_port: src_port,
                    destination_port: ROCE_V2_PORT,
                    length: udp_len16,
                    checksum: 0,
                }
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let ip = Ipv6Header {
                    traffic_class: tos,
                    flow_label: Ipv6FlowLabel::ZERO,
                    payload_length: u16::try_from(udp_len).map_err(|_| too_big())?,
                    next_header: IpNumber::UDP,
                    hop_limit: 64,
                    source: src.octets(),
                    destination: dst.octets(),
                };
                put(&ip.to_bytes());
                UdpHeader::with_ipv6_checksum(src_port, ROCE_V2_PORT, &ip, payload)
                    .map_err(|_| too_big())?
            }
            _ => {
                return Err(invalid(format!(
                    "{dest} is not of the IP version of {}",
                    self.local
                )));
            }
        };
        put(&udp.to_bytes());
        put(payload);
        debug_assert_eq!(at, len);
        Ok(len)
    }

    /// Hands the RoCE v2 payload (BTH through ICRC) of a received frame to `f` if it is one
    /// for this port, or each datagram's of a GSO burst; returns how many were handed over
    /// and how many were not for this port.
    pub(super) fn receive(
        &self,
        rx: &RxFrame<'_>,
        scratch: &mut Vec<u8>,
        f: &mut dyn FnMut(RxMeta, &[u8]),
    ) -> (usize, usize) {
        if rx.outgoing {
            return (0, 1);
        }
        let Some(size) = rx.gso_size else {
            return match self.datagram(rx.bytes, rx.vlan_tci) {
                Some((meta, payload)) => {
                    f(meta, payload);
                    (1, 0)
                }
                None => (0, 1),
            };
        };
        let Some(burst) = Burst::parse(rx.bytes) else {
            return (0, 1);
        };
        let (mut handed, mut ignored) = (0, 0);
        for (i, segment) in burst.payload.chunks(usize::from(size).max(1)).enumerate() {
            burst.datagram(i as u16, segment, scratch);
            match self.datagram(scratch, rx.vlan_tci) {
                Some((meta, payload)) => {
                    f(meta, payload);
                    handed += 1;
                }
                None => ignored += 1,
            }
        }
        (handed, ignored)
    }

    /// The payload of one frame if it is RoCE v2 for this port: tagged as configured,
    /// IPv4 (with a good header checksum) or IPv6 to the local address, UDP to port 4791.
    /// Its ICRC is checked against the headers it came with.
    fn datagram<'a>(&self, bytes: &'a [u8], vlan_tci: Option<u16>) -> Option<(RxMeta, &'a [u8])> {
        // The headers only: the engine parses the transport packet itself.
        let frame = FrameHeaders::parse(bytes).ok()?;
        let tag = vlan_tci
            .map(|tci| tci & 0xfff)
            .or(frame.vlan_id().map(VlanId::value));
        let (src, dst) = frame.ip.addresses();
        if tag != self.vlan.map(VlanId::value) || !frame.ip.checksum_ok() || dst != self.local {
            return None;
        }
        let icrc = if frame.check_icrc().is_valid() {
            IcrcStatus::Valid
        } else {
            IcrcStatus::Invalid
        };
        let meta = RxMeta {
            src: SocketAddr::new(src, frame.udp.source_port()),
            dst: self.local,
            icrc,
            tos: frame.ip.tos(),
        };
        Some((meta, frame.datagram()))
    }
}

/// A UDP GSO burst as a software link delivers it: one IP header and one UDP header in
/// front of every datagram's payload.
struct Burst<'a> {
    /// Ethernet, IP and UDP headers.
    headers: &'a [u8],
    /// Where the IP header starts, and its length.
    ip_at: usize,
    ip_len: usize,
    v4: Option<Ipv4Header>,
    payload: &'a [u8],
}

impl<'a> Burst<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Self> {
        let (eth, rest) = Ethernet2Header::from_slice(bytes).ok()?;
        let (ip_at, ether_type, rest) = if eth.ether_type == EtherType::VLAN_TAGGED_FRAME {
            let (v, rest) = SingleVlanHeader::from_slice(rest).ok()?;
            (
                Ethernet2Header::LEN + SingleVlanHeader::LEN,
                v.ether_type,
                rest,
            )
        } else {
            (Ethernet2Header::LEN, eth.ether_type, rest)
        };
        let (v4, ip_len, total) = match ether_type {
            EtherType::IPV4 => {
                let (h, _) = Ipv4Header::from_slice(rest).ok()?;
                let total = usize::from(h.total_len);
                (Some(h.clone()), h.header_len(), total)
            }
            EtherType::IPV6 => {
                let (h, _) = Ipv6Header::from_slice(rest).ok()?;
                (
                    None,
                    Ipv6Header::LEN,
                    Ipv6Header::LEN + usize::from(h.payload_length),
                )
            }
            _ => return None,
        };
        let udp_end = ip_at + ip_len + UdpHeader::LEN;
        Some(Self {
            headers: bytes.get(..udp_end)?,
            ip_at,
            ip_len,
            v4,
            payload: bytes.get(udp_end..ip_at + total)?,
        })
    }

    /// Writes datagram `i` of the burst, `segment`, into `out` as a frame of its own, with
    /// the headers the kernel gives it when it cuts the burst: IP and UDP lengths of its
    /// own and, over IPv4, the burst's identification plus `i`.
    fn datagram(&self, i: u16, segment: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(self.headers);
        out.extend_from_slice(segment);
        let udp_len = (UdpHeader::LEN + segment.len()) as u16;
        let (ip, udp) = out[self.ip_at..].split_at_mut(self.ip_len);
        match &self.v4 {
            Some(h) => {
                let mut h = h.clone();
                h.total_len = self.ip_len as u16 + udp_len;
                h.identification = h.identification.wrapping_add(i);
                h.header_checksum = h.calc_header_checksum();
                ip.copy_from_slice(&h.to_bytes());
            }
            None => ip[4..6].copy_from_slice(&udp_len.to_be_bytes()),
        }
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_wire::{BthRepr, IcrcForm, Opcode, PacketRepr, Psn, icrc};

    const A: [u8; 4] = [198, 18, 202, 1];
    const B: [u8; 4] = [198, 18, 202, 2];

    /// A WRITE_MIDDLE payload (BTH through ICRC) whose ICRC is computed over `ip` and
    /// `udp` as they will be on the wire.
    fn payload(psn: u32, fill: u8, ip_id: u16) -> Vec<u8> {
        let body = vec![fill; 256];
        let packet = PacketRepr {
            payload: &body,
            ..PacketRepr::new(BthRepr::new(
                Opcode::RC_RDMA_WRITE_MIDDLE,
                0x12,
                Psn::new(psn),
            ))
        };
        let mut p = vec![0u8; packet.buffer_len()];
        packet.emit(&mut p).expect("emit");
        let n = p.len() - 4;
        let udp_len = (UdpHeader::LEN + p.len()) as u16;
        let mut ip = Ipv4Header::new(udp_len, 64, IpNumber::UDP, A, B).expect("ip");
        ip.identification = ip_id;
        let udp = UdpHeader {
            source_port: 0xc123,
            destination_port: ROCE_V2_PORT,
            length: udp_len,
            checksum: 0,
        };
        let crc =
            icrc::compute(&ip.to_bytes(), &udp.to_bytes(), &p[..n], IcrcForm::Spec).expect("icrc");
        p[n..].copy_from_slice(&icrc::to_wire(crc));
        p
    }

    fn headers(local: [u8; 4]) -> Headers {
        Headers::new([2, 0, 0, 0, 0, 1], local.into(), &BackendOptions::default()).expect("h")
    }

    fn receive_all(h: &Headers, rx: &RxFrame<'_>) -> (Vec<(RxMeta, Vec<u8>)>, usize) {
        let mut got = Vec::new();
        let (_, ignored) = h.receive(rx, &mut Vec::new(), &mut |m, p| got.push((m, p.to_vec())));
        (got, ignored)
    }

    fn rx(bytes: &[u8], gso_size: Option<u16>) -> RxFrame<'_> {
        RxFrame {
            bytes,
            outgoing: false,
            vlan_tci: None,
            gso_size,
        }
    }

    #[test]
    fn a_written_frame_is_received_with_its_icrc_checked() {
        let p = payload(7, 0xab, 0);
        let mut h = headers(A);
        let mut frame = vec![0u8; h.frame_len(p.len())];
        let n = h
            .write(&mut frame, [2, 0, 0, 0, 0, 2], (B.into(), 0xc123), 0, &p)
            .expect("write");
        let (got, ignored) = receive_all(&headers(B), &rx(&frame[..n], None));
        assert_eq!(ignored, 0);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.icrc, IcrcStatus::Valid);
        assert_eq!(got[0].0.src, SocketAddr::new(A.into(), 0xc123));
        assert_eq!(got[0].1, p);
        // Not for this address: ignored.
        assert_eq!(receive_all(&headers(A), &rx(&frame[..n], None)).1, 1);
        // A flipped payload bit: handed over as Invalid.
        frame[n - 10] ^= 1;
        let (got, _) = receive_all(&headers(B), &rx(&frame[..n], None));
        assert_eq!(got[0].0.icrc, IcrcStatus::Invalid);
    }

    #[test]
    fn a_gso_burst_is_cut_into_datagrams_numbered_as_the_kernel_numbers_them() {
        // Three datagrams whose ICRCs cover identifications 0, 1 and 2.
        let parts: Vec<Vec<u8>> = (0..3).map(|i| payload(10 + i, i as u8, i as u16)).collect();
        let all: Vec<u8> = parts.concat();
        let mut h = headers(A);
        let mut frame = vec![0u8; h.frame_len(all.len())];
        let n = h
            .write(&mut frame, [2, 0, 0, 0, 0, 2], (B.into(), 0xc123), 0, &all)
            .expect("write");
        let size = parts[0].len() as u16;
        let (got, ignored) = receive_all(&headers(B), &rx(&frame[..n], Some(size)));
        assert_eq!(ignored, 0);
        assert_eq!(got.len(), 3);
        for ((meta, p), want) in got.iter().zip(&parts) {
            assert_eq!(meta.icrc, IcrcStatus::Valid);
            assert_eq!(p, want);
        }
    }

    #[test]
    fn the_received_ecn_field_is_reported() {
        // Built with ECT(0) and DSCP 26; then CE as a router marks it (TOS and header
        // checksum patched; the ICRC does not cover the TOS).
        let opts = BackendOptions {
            dscp: 26,
            ecn: 2,
            ..BackendOptions::default()
        };
        let mut h = Headers::new([2, 0, 0, 0, 0, 1], A.into(), &opts).expect("h");
        let p = payload(10, 0, 0);
        let mut frame = vec![0u8; h.frame_len(p.len())];
        let tos = h.tos(0);
        let n = h
            .write(&mut frame, [2, 0, 0, 0, 0, 2], (B.into(), 0xc123), tos, &p)
            .expect("write");
        let (got, _) = receive_all(&headers(B), &rx(&frame[..n], None));
        assert_eq!(
            (got[0].0.ecn(), got[0].0.icrc),
            (rocex_proto::Ecn::Ect0, IcrcStatus::Valid)
        );
        let mut ip = Ipv4Header::from_slice(&frame[14..n]).expect("ipv4").0;
        ip.ecn = IpEcn::CongestionExperienced;
        ip.header_checksum = ip.calc_header_checksum();
        frame[14..34].copy_from_slice(&ip.to_bytes());
        let (got, _) = receive_all(&headers(B), &rx(&frame[..n], None));
        assert_eq!(
            (got[0].0.ecn(), got[0].0.icrc),
            (rocex_proto::Ecn::Ce, IcrcStatus::Valid)
        );
    }

    #[test]
    fn patched_ipv4_headers_are_the_built_ones() {
        let tagged = BackendOptions {
            vlan: Some(7),
            dscp: 26,
            ecn: 1,
            ..BackendOptions::default()
        };
        for opts in [BackendOptions::default(), tagged] {
            let mut h = Headers::new([2, 0, 0, 0, 0, 1], A.into(), &opts).expect("h");
            let mut n = 0;
            // Lengths, destinations, ports and traffic classes in turn: the template is
            // reused and rebuilt.
            for (len, dst, port, tclass) in [
                (20, B, 0xc123, 0),
                (40, B, 0xc123, 0),
                (4124, B, 0xc123, 0),
                (40, [198, 18, 201, 9], 0xc123, 0),
                (40, B, 0xc124, 0),
                (40, B, 0xc124, 0x68),
                (40, B, 0xc124, 0xb8),
                (65_507, B, 0xc124, 0x02),
                (0, B, 0xc124, 0),
            ] {
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let mut want = vec![0u8; h.frame_len(len)];
                let mut got = vec![0xa5u8; h.frame_len(len)];
                let mac = [2, 0, 0, 0, 0, 2];
                let tos = h.tos(tclass);
                let w = h
                    .build(&mut want, (mac, dst.into(), port, tos), &payload)
                    .expect("build");
                let g = h
                    .write(&mut got, mac, (dst.into(), port), tos, &payload)
                    .expect("write");
                assert_eq!((g, &got), (w, &want), "{len} bytes to {dst:?}:{port}");
                let at = g - len - UdpHeader::LEN - Ipv4Header::MIN_LEN;
                assert_eq!(got[at + 1], tos, "the TOS byte");
                if let Some(id) = opts.vlan {
                    // PCP (3 bits), DEI, VLAN ID (12 bits) after the Ethernet header.
                    let tci = u16::from_be_bytes([got[14], got[15]]);
                    assert_eq!((tci >> 13, tci & 0xfff), (u16::from(tos >> 5), id));
                }
                n += 1;
            }
            // A datagram over the IPv4 limit is refused either way.
            let big = vec![0u8; 65_508];
            let mut buf = vec![0u8; h.frame_len(big.len())];
            assert!(h.write(&mut buf, [2; 6], (B.into(), 1), 0, &big).is_err());
            assert_eq!(n, 9);
            // The packet's DSCP and ECN where it has them, else the port's.
            let port = opts.dscp << 2 | opts.ecn;
            assert_eq!(
                [h.tos(0), h.tos(0x68), h.tos(0x02), h.tos(0xb9)],
                [port, 0x68 | opts.ecn, port & !3 | 2, 0xb9]
            );
        }
    }
}
