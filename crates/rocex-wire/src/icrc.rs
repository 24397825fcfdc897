//! The invariant CRC (IBTA Vol. 1 §7.8.1; RoCE v2 annex A17.3.3), as Linux rxe computes it
//! (`rxe_icrc.c`).
//!
//! RoCE v2 has no LRH, so the CRC starts over 8 bytes of 0xFF that stand for it. Then come
//! the IP, UDP and BTH headers, with every field a router may change set to all ones:
//! * IPv4: TOS, TTL and header checksum;
//! * IPv6: traffic class, flow label and hop limit;
//! * UDP: checksum;
//! * BTH: byte 4 (FECN, BECN and the reserved bits).
//!
//! then the remaining transport headers, the payload and the pad. The CRC is CRC-32 with the
//! reflected IEEE polynomial (zlib's); its LSB-first result is stored little-endian, which
//! is the IBTA's "0x9625B75A" convention read byte by byte (table 29).
//!
//! CRC-32 is computed with `crc32fast`, which uses PCLMULQDQ: ~10x the slice-16 table of
//! the `crc` crate on 1-4 KiB here (`cargo bench -p rocex-wire --bench frame -- crc`).

use crate::{Error, ErrorKind, Layer, Result, bth};

mod ipv4_id;
pub use ipv4_id::{IdMap, SocketCheck};

/// Which bytes the CRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IcrcForm {
    /// As the IBTA spec defines it.
    #[default]
    Spec,
    /// Linux rxe's form for FLUSH (kernel 6.2 on): rxe's opcode table gives FLUSH no payload
    /// offset, so after the masked headers rxe runs the CRC over BTH, FETH and RETH a second
    /// time, unmasked. rxe accepts only this form for FLUSH, so talking to it needs it.
    RxeFlush,
}

impl IcrcForm {
    /// The form rocex emits for `opcode`: rxe's for FLUSH, so that rxe accepts it.
    pub fn for_opcode(opcode: crate::Opcode) -> Self {
        if opcode == crate::Opcode::RC_FLUSH {
            Self::RxeFlush
        } else {
            Self::Spec
        }
    }
}

/// The masked pseudo-LRH: 8 bytes of 0xFF.
const LRH_ONES: [u8; 8] = [0xff; 8];
const IPV4_MAX: usize = 60;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
/// Room for the pseudo-LRH and the masked copies of IP, UDP and BTH.
const SCRATCH: usize = LRH_ONES.len() + IPV4_MAX + UDP_LEN + bth::LEN;

/// A fresh CRC-32 state: a clone of one made once, as making one looks up the CPU's
/// features every time (a tenth of the cost of an 8-byte WRITE's ICRC).
fn hasher() -> crc32fast::Hasher {
    static FRESH: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    FRESH.get_or_init(crc32fast::Hasher::new).clone()
}

/// Computes the ICRC of a RoCE v2 packet.
///
/// `ip` and `udp` are the packet's IP and UDP headers as on the wire; `transport` runs from
/// the BTH to the end of the pad, without the ICRC.
pub fn compute(ip: &[u8], udp: &[u8], transport: &[u8], form: IcrcForm) -> Result<u32> {
    let mut scratch = [0u8; SCRATCH];
    let n = masked_headers(ip, udp, transport, &mut scratch)?;
    let mut h = hasher();
    h.update(&scratch[..n]);
    h.update(&transport[bth::LEN..]);
    if form == IcrcForm::RxeFlush {
        h.update(transport);
    }
    Ok(h.finalize())
}

/// Computes the ICRC of a transport packet that travels in a UDP datagram from `src` to
/// `dst` with the IP header rocex's senders produce: IPv4 with DF and identification 0
/// (an unconnected UDP socket with path MTU discovery on gives exactly that), or IPv6.
/// Fields the ICRC masks (TOS, TTL, checksums, flow label) do not matter.
pub fn compute_for(
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    sport: u16,
    dport: u16,
    transport: &[u8],
    form: IcrcForm,
) -> Result<u32> {
    let (ip, ip_len, udp) = sent_headers(src, dst, sport, dport, transport.len())?;
    compute(&ip[..ip_len], &udp, transport, form)
}

/// The IP header (its first `.1` bytes) and the UDP header of the datagram that carries a
/// `transport_len`-byte packet (BTH through pad) as rocex's senders send it: see
/// [`compute_for`].
fn sent_headers(
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    sport: u16,
    dport: u16,
    transport_len: usize,
) -> Result<([u8; IPV6_LEN], usize, [u8; UDP_LEN])> {
    use core::net::IpAddr;
    let udp_len = UDP_LEN + transport_len + crate::packet::ICRC_LEN;
    let too_big = |layer| {
        Error::new(
            layer,
            0,
            ErrorKind::BadValue("the datagram exceeds 65535 bytes"),
        )
    };
    let udp_len16 = u16::try_from(udp_len).map_err(|_| too_big(Layer::Udp))?;
    let mut udp = [0u8; UDP_LEN];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len16.to_be_bytes());
    let mut ip = [0u8; IPV6_LEN];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            ip[0] = 0x45;
            let total = u16::try_from(20 + udp_len).map_err(|_| too_big(Layer::Ipv4))?;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[6] = 0x40; // DF, identification 0
            ip[9] = 17;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            Ok((ip, 20, udp))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&udp_len16.to_be_bytes());
            ip[6] = 17;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            Ok((ip, IPV6_LEN, udp))
        }
        _ => Err(Error::new(
            Layer::Ipv4,
            0,
            ErrorKind::BadValue("source and destination differ in IP version"),
        )),
    }
}

/// [`compute_for`] that remembers the CRC of the headers below the BTH (pseudo-LRH, IP,
/// UDP) for the last few datagram shapes (addresses, ports, length): an engine sends and
/// receives the same few over and over, and for a small packet those 36 bytes were half
/// the ICRC's work.
#[derive(Debug, Clone, Default)]
pub struct PrefixCache {
    entries: [Option<(PrefixKey, u32)>; PREFIXES],
    next: usize,
}

/// Shapes a [`PrefixCache`] keeps: a ping-pong's request and ACK both ways.
const PREFIXES: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PrefixKey {
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    sport: u16,
    dport: u16,
    transport_len: usize,
}

impl PrefixCache {
    /// The ICRC [`compute_for`] gives.
    pub fn compute_for(
        &mut self,
        src: core::net::IpAddr,
        dst: core::net::IpAddr,
        sport: u16,
        dport: u16,
        transport: &[u8],
        form: IcrcForm,
    ) -> Result<u32> {
        let Some((bth_bytes, rest)) = transport.split_first_chunk::<{ bth::LEN }>() else {
            return compute_for(src, dst, sport, dport, transport, form); // says why
        };
        let key = PrefixKey {
            src,
            dst,
            sport,
            dport,
            transport_len: transport.len(),
        };
        let hit = self.entries.iter().flatten().find(|(k, _)| *k == key);
        let prefix = match hit {
            Some(&(_, crc)) => crc,
            None => {
                let (ip, ip_len, udp) = sent_headers(src, dst, sport, dport, transport.len())?;
                let mut scratch = [0u8; SCRATCH];
                let n = masked_prefix(&ip[..ip_len], &udp, &mut scratch)?;
                let mut h = hasher();
                h.update(&scratch[..n]);
                let crc = h.finalize();
                self.entries[self.next] = Some((key, crc));
                self.next = (self.next + 1) % PREFIXES;
                crc
            }
        };
        let mut masked = *bth_bytes;
        masked[BTH_MASKED] = 0xff;
        let mut h = crc32fast::Hasher::new_with_initial(prefix);
        h.update(&masked);
        h.update(rest);
        if form == IcrcForm::RxeFlush {
            h.update(transport);
        }
        Ok(h.finalize())
    }
}

/// How the ICRC of an IPv4 packet changes when its identification is `id` instead of 0:
/// `compute` with ID `id` equals `compute` with ID 0 XOR this delta.
///
/// CRC-32 is affine: for inputs of equal length `crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0..0)`,
/// so the delta depends only on `id` and on how many bytes the CRC runs over after the
/// identification field, not on the packet's content. That lets a sender whose kernel
/// numbers the segments of one UDP GSO send 0, 1, 2, ... fix each segment's ICRC with one
/// XOR, and a receiver that cannot see the identification solve for it ([`IdMap`]).
///
/// `transport_len` is the length from the BTH to the end of the pad (without the ICRC);
/// the IPv4 header is taken to be 20 bytes, as rocex's senders produce it.
pub fn ipv4_id_delta(id: u16, transport_len: usize, form: IcrcForm) -> u32 {
    /// Offset of the identification's end in the CRC input (pseudo-LRH, IPv4 bytes 4..6).
    const ID_END: usize = LRH_ONES.len() + 6;
    const ZEROS: [u8; 256] = [0; 256];
    let covered = LRH_ONES.len() + 20 + UDP_LEN + transport_len;
    let covered = match form {
        IcrcForm::Spec => covered,
        IcrcForm::RxeFlush => covered + transport_len,
    };
    let crc_with = |first: [u8; 2]| {
        let mut h = hasher();
        h.update(&first);
        let mut left = covered.saturating_sub(ID_END);
        while left > 0 {
            let n = left.min(ZEROS.len());
            h.update(&ZEROS[..n]);
            left -= n;
        }
        h.finalize()
    };
    crc_with(id.to_be_bytes()) ^ crc_with([0, 0])
}

/// The ICRC's four bytes as they stand on the wire.
pub const fn to_wire(icrc: u32) -> [u8; 4] {
    icrc.to_le_bytes()
}

/// The ICRC value of the four bytes on the wire.
pub const fn from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// The BTH byte the ICRC masks: FECN, BECN and the reserved bits.
const BTH_MASKED: usize = 4;

/// Writes 0xFF x 8 and masked copies of IP, UDP and BTH into `out`; returns their length.
fn masked_headers(
    ip: &[u8],
    udp: &[u8],
    transport: &[u8],
    out: &mut [u8; SCRATCH],
) -> Result<usize> {
    let at = masked_prefix(ip, udp, out)?;
    let Some(bth_bytes) = transport.get(..bth::LEN) else {
        return Err(Error::truncated(Layer::Bth, 0, bth::LEN, transport.len()));
    };
    out[at..at + bth::LEN].copy_from_slice(bth_bytes);
    out[at + BTH_MASKED] = 0xff;
    Ok(at + bth::LEN)
}

/// Writes 0xFF x 8 and masked copies of IP and UDP into `out`; returns their length.
fn masked_prefix(ip: &[u8], udp: &[u8], out: &mut [u8; SCRATCH]) -> Result<usize> {
    let version = ip.first().map(|b| b >> 4);
    let (layer, ok) = match version {
        Some(4) => (Layer::Ipv4, (20..=IPV4_MAX).contains(&ip.len())),
        Some(6) => (Layer::Ipv6, ip.len() == IPV6_LEN),
        _ => (Layer::Ipv4, false),
    };
    if !ok {
        return Err(Error::new(
            layer,
            0,
            ErrorKind::BadValue("the ICRC needs a whole IPv4 or IPv6 header"),
        ));
    }
    if udp.len() != UDP_LEN {
        return Err(Error::truncated(Layer::Udp, 0, UDP_LEN, udp.len()));
    }
    let mut at = 0;
    for part in [&LRH_ONES[..], ip, udp] {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    let ip_at = LRH_ONES.len();
    let ip_out = &mut out[ip_at..ip_at + ip.len()];
    if version == Some(4) {
        ip_out[1] = 0xff; // type of service
        ip_out[8] = 0xff; // time to live
        ip_out[10..12].fill(0xff); // header checksum
    } else {
        ip_out[0] |= 0x0f; // traffic class, high nibble
        ip_out[1..4].fill(0xff); // traffic class, low nibble, and flow label
        ip_out[7] = 0xff; // hop limit
    }
    let udp_at = ip_at + ip.len();
    out[udp_at + 6..udp_at + 8].fill(0xff); // UDP checksum
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IBTA Vol. 1 table 29: a sample packet with its variant fields already masked, whose
    /// ICRC the spec prints as 0x9625B75A, i.e. bytes 96 25 B7 5A on the wire.
    const IBTA_TABLE_29: [u8; 52] = [
        0xf0, 0x12, 0x37, 0x5c, 0x00, 0x0e, 0x17, 0xd2, 0x0a, 0x20, 0x24, 0x87, 0xff, 0x87, 0xb1,
        0xb3, 0x00, 0x0d, 0xec, 0x2a, 0x01, 0x71, 0x0a, 0x1c, 0x01, 0x5d, 0x40, 0x02, 0x38, 0xf2,
        0x7a, 0x05, 0x00, 0x00, 0x00, 0x0e, 0xbb, 0x88, 0x4d, 0x85, 0xfd, 0x5c, 0xfb, 0xa4, 0x72,
        0x8b, 0xc0, 0x69, 0x0e, 0xd4, 0x00, 0x00,
    ];

    #[test]
    fn ibta_sample_packet() {
        let crc = crc32fast::hash(&IBTA_TABLE_29);
        assert_eq!(to_wire(crc), [0x96, 0x25, 0xb7, 0x5a]);
    }

    /// A RoCE v2 CNP captured from a ConnectX-4 Lx (published with scapy's RoCE tests):
    /// hardware's ICRC, with TOS 0xc2 (ECN marked) and a non-zero TTL that the mask hides.
    const CX4_CNP: [u8; 74] = [
        0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00, 0x45,
        0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01,
        0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff,
        0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
    ];

    #[test]
    fn connectx4_cnp() {
        let (ip, udp, transport) = (&CX4_CNP[14..34], &CX4_CNP[34..42], &CX4_CNP[42..70]);
        let crc = compute(ip, udp, transport, IcrcForm::Spec).unwrap();
        assert_eq!(to_wire(crc), [0x82, 0xfd, 0x00, 0x2a]);
    }

    #[test]
    fn a_built_cnp_is_the_connectx4s() {
        let mut buf = [0u8; 32];
        let n = crate::PacketRepr::cnp(0x118).emit(&mut buf).unwrap();
        assert_eq!(n, 32, "BTH, the 16-byte body and room for the ICRC");
        assert_eq!(&buf[..28], &CX4_CNP[42..70]);
        let (parsed, _) = crate::PacketRepr::parse(&CX4_CNP[42..74]).unwrap();
        assert_eq!(parsed, crate::PacketRepr::cnp(0x118));
    }

    #[test]
    fn masks_cover_the_variant_fields() {
        let (ip, udp, transport) = (&CX4_CNP[14..34], &CX4_CNP[34..42], &CX4_CNP[42..70]);
        let base = compute(ip, udp, transport, IcrcForm::Spec).unwrap();
        let (mut ip2, mut udp2, mut t2) = (ip.to_vec(), udp.to_vec(), transport.to_vec());
        ip2[1] = 0; // TOS
        ip2[8] = 1; // TTL
        ip2[10] ^= 0x55; // checksum
        udp2[6] = 0x12;
        t2[4] = 0; // BECN cleared
        assert_eq!(compute(&ip2, &udp2, &t2, IcrcForm::Spec).unwrap(), base);
        ip2[4] ^= 1; // the IPv4 ID is covered
        assert_ne!(compute(&ip2, &udp2, &t2, IcrcForm::Spec).unwrap(), base);
    }

    #[test]
    fn ipv4_id_delta_matches_a_full_recompute() {
        let (src, dst) = ([198, 18, 201, 1], [198, 18, 201, 2]);
        for len in [12usize, 40, 1036, 4124, 8220] {
            let transport: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            for form in [IcrcForm::Spec, IcrcForm::RxeFlush] {
                let ip_with = |id: u16| {
                    let mut ip = [0u8; 20];
                    ip[0] = 0x45;
                    ip[2..4].copy_from_slice(&((20 + 8 + len + 4) as u16).to_be_bytes());
                    ip[4..6].copy_from_slice(&id.to_be_bytes());
                    ip[6] = 0x40;
                    ip[9] = 17;
                    ip[12..16].copy_from_slice(&src);
                    ip[16..20].copy_from_slice(&dst);
                    ip
                };
                let mut udp = [0x12, 0xb7, 0x12, 0xb7, 0, 0, 0, 0];
                udp[4..6].copy_from_slice(&((8 + len + 4) as u16).to_be_bytes());
                let base = compute(&ip_with(0), &udp, &transport, form).unwrap();
                let zero = compute_for(src.into(), dst.into(), 4791, 4791, &transport, form);
                assert_eq!(zero.unwrap(), base);
                for id in [1u16, 2, 3, 17, 63, 64, 0x1234, 0xffff] {
                    let full = compute(&ip_with(id), &udp, &transport, form).unwrap();
                    assert_eq!(
                        base ^ ipv4_id_delta(id, len, form),
                        full,
                        "id {id} len {len} {form:?}"
                    );
                }
                assert_eq!(ipv4_id_delta(0, len, form), 0);
            }
        }
    }

    #[test]
    fn bad_headers_are_errors_not_panics() {
        assert!(compute(&[], &[0; 8], &[0; 12], IcrcForm::Spec).is_err());
        assert!(compute(&[0x45; 64], &[0; 8], &[0; 12], IcrcForm::Spec).is_err());
        assert!(compute(&[0x60; 40], &[0; 7], &[0; 12], IcrcForm::Spec).is_err());
        assert!(compute(&[0x60; 40], &[0; 8], &[0; 11], IcrcForm::Spec).is_err());
    }

    #[test]
    fn the_prefix_cache_gives_what_compute_for_gives() {
        use core::net::IpAddr;
        let v4 = |d| IpAddr::from([198, 18, 7, d]);
        let v6 = |d| IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, d]);
        // More shapes than the cache holds, in an order that hits, misses and evicts.
        let shapes = [
            (v4(1), v4(2), 0xc000, 40),
            (v4(2), v4(1), 0xc000, 20),
            (v4(1), v4(3), 0xc001, 40),
            (v6(1), v6(2), 4791, 4112),
            (v4(1), v4(2), 0xc000, 20),
            (v6(2), v6(1), 0xc123, 64),
        ];
        let mut cache = PrefixCache::default();
        let mut x = 0x2545_f491_u32;
        for i in 0..3000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let (src, dst, sport, len) = shapes[(x as usize >> 3) % shapes.len()];
            let mut t: Vec<u8> = (0..len).map(|k| (k as u32 ^ x ^ i) as u8).collect();
            t[0] = if i % 7 == 0 { 0x1c } else { 0x0a }; // FLUSH now and then
            let form = IcrcForm::for_opcode(crate::Opcode(t[0]));
            let want = compute_for(src, dst, sport, 4791, &t, form).unwrap();
            let got = cache.compute_for(src, dst, sport, 4791, &t, form).unwrap();
            assert_eq!(got, want, "packet {i}: {src} -> {dst}:{sport}, {len} bytes");
        }
        // Errors stay errors.
        assert!(
            cache
                .compute_for(v4(1), v4(2), 1, 2, &[0; 5], IcrcForm::Spec)
                .is_err()
        );
        assert!(
            cache
                .compute_for(v4(1), v6(2), 1, 2, &[0; 40], IcrcForm::Spec)
                .is_err()
        );
    }
}
