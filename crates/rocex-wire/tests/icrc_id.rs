//! Checking ICRCs without the IPv4 header, as a UDP socket receives them: against kernel
//! rxe's own frames (pcaps/, whose IPv4 identifications are rxe's counter), exhaustively
//! over single-bit errors, and as properties of the identification solve.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapReader;
use proptest::prelude::*;
use rocex_wire::Opcode;
use rocex_wire::frame::{FrameHeaders, IpView};
use rocex_wire::icrc::{self, IcrcForm, IdMap, SocketCheck};

/// A RoCE frame as a UDP socket would receive it, with what only the IP header shows.
struct Received {
    file: String,
    src: SocketAddr,
    dst: IpAddr,
    /// BTH through ICRC.
    payload: Vec<u8>,
    /// The IPv4 identification; `None` for IPv6.
    id: Option<u16>,
}

fn pcap_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pcaps")
}

/// The RoCE v2 frames of `file` whose ICRC checks against their real headers: the IP and
/// UDP headers dropped as the socket drops them.
fn frames(file: &str) -> Vec<Received> {
    let f = std::fs::File::open(pcap_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut reader = PcapReader::new(f).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap_or_else(|e| panic!("{file}: {e}"));
        let Ok(h) = FrameHeaders::parse(&p.data) else {
            continue; // the out-of-band TCP exchange, ARP, ...
        };
        assert!(
            h.check_icrc().is_valid(),
            "{file}: a captured ICRC is wrong"
        );
        let (src, dst) = h.ip.addresses();
        let id = match &h.ip {
            IpView::V4(v4) => {
                assert!(v4.dont_fragment(), "{file}: RoCE v2 is sent with DF");
                Some(v4.identification())
            }
            IpView::V6(_) => None,
        };
        out.push(Received {
            file: file.to_owned(),
            src: SocketAddr::new(src, h.udp.source_port()),
            dst,
            payload: h.datagram().to_vec(),
            id,
        });
    }
    out
}

fn all_pcaps() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(pcap_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".pcap"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_captured_frame_checks_under_its_own_identification() {
    let mut check = SocketCheck::default();
    let (mut v4, mut v6, mut beyond_gso) = (0, 0, 0);
    let mut ids = std::collections::BTreeSet::new();
    for file in all_pcaps() {
        for r in frames(&file) {
            let got = check.identification(r.src, r.dst, &r.payload);
            assert_eq!(
                got,
                Some(r.id.unwrap_or(0)),
                "{}: {} -> {}",
                r.file,
                r.src,
                r.dst
            );
            match r.id {
                Some(id) => {
                    v4 += 1;
                    ids.insert(id);
                    beyond_gso += usize::from(id >= 64);
                }
                None => v6 += 1,
            }
        }
    }
    // rxe's counter gives thousands of identifications, far beyond rocex's 0..63.
    assert!(v4 > 10_000 && v6 > 20, "{v4} IPv4 and {v6} IPv6 frames");
    assert!(
        ids.len() > 1000 && beyond_gso > v4 / 2,
        "{} distinct IDs",
        ids.len()
    );
}

/// Every single-bit error in every frame of these captures (every RC opcode, FLUSH in
/// rxe's ICRC form, 4 KiB frames at MTU 4096, IPv6, UD, kernel 6.1's rxe) that the ICRC
/// covers is caught: no identification makes the corrupted frame's ICRC check.
#[test]
fn every_single_bit_error_in_rxe_frames_is_caught() {
    let mut check = SocketCheck::default();
    let mut flips = 0u64;
    let files = [
        "probe_all.pcap",
        "probe_mtu4096.pcap",
        "probe_ipv6.pcap",
        "read_bw.pcap",
        "ud_pingpong.pcap",
        "rxe61-atomic_cas.pcap",
    ];
    for file in files {
        for r in frames(file) {
            let mut p = r.payload.clone();
            let form = IcrcForm::for_opcode(Opcode(p[0]));
            for bit in 0..p.len() * 8 {
                p[bit / 8] ^= 1 << (bit % 8);
                let got = check.identification(r.src, r.dst, &p);
                // BTH byte 4 (FECN, BECN, reserved) is masked: the ICRC does not cover it,
                // except in rxe's FLUSH form, which covers the BTH a second time unmasked.
                let masked = bit / 8 == 4 && form == IcrcForm::Spec;
                let want = masked.then_some(r.id.unwrap_or(0));
                assert_eq!(got, want, "{file}: bit {bit} of {} flipped", p.len());
                p[bit / 8] ^= 1 << (bit % 8);
                flips += 1;
            }
        }
    }
    assert!(flips > 1_300_000, "{flips} flips");
}

/// The CRC register's step over one zero input bit, and its inverse.
fn zero_bit(r: u32) -> u32 {
    (r >> 1) ^ if r & 1 != 0 { 0xedb8_8320 } else { 0 }
}

fn zero_bit_back(r: u32) -> u32 {
    if r & 0x8000_0000 != 0 {
        ((r ^ 0xedb8_8320) << 1) | 1
    } else {
        r << 1
    }
}

fn zero_bytes_back(mut r: u32, n: usize) -> u32 {
    for _ in 0..n * 8 {
        r = zero_bit_back(r);
    }
    r
}

/// Where single-bit errors first get through, found exhaustively. A flip of bit `j` of
/// transport byte `k` changes the ICRC of an `n`-byte packet by the register step over
/// `n - k` zero bytes applied to `1 << j`; the identification's columns for length `n`
/// are those for length 12 stepped over `n - 12` zero bytes. The steps are invertible,
/// so the flip gets through for any `n` exactly when the map for 12 bytes solves `1 << j`
/// stepped back over `k - 12` bytes: it depends on the distance from the identification
/// only. Likewise a flip of ICRC bit `b` gets through at length `n` when the map for 12
/// bytes solves `1 << b` stepped back over `n - 12` bytes.
fn first_misses(limit: usize) -> ((usize, u8), (usize, u8)) {
    const BASE: usize = 12;
    let map = IdMap::new(BASE, IcrcForm::Spec);
    // Before byte 12: 12 - k bytes stepped forward.
    for k in 0..BASE {
        for j in 0..8 {
            let mut s = 1u32 << j;
            for _ in 0..(BASE - k) * 8 {
                s = zero_bit(s);
            }
            assert_eq!(map.solve(s), None, "byte {k} bit {j}");
        }
    }
    let mut payload_bits: Vec<u32> = (0..8).map(|j| 1u32 << j).collect();
    let mut payload_miss = None;
    let mut icrc_miss = None;
    let mut icrc_bits: Vec<u32> = (0..32).map(|b| 1u32 << b).collect();
    for k in BASE..limit {
        if payload_miss.is_none() {
            payload_miss = (0..8u8)
                .find(|&j| map.solve(payload_bits[usize::from(j)]).is_some())
                .map(|j| (k, j));
        }
        if icrc_miss.is_none() {
            icrc_miss = (0..32u8)
                .find(|&b| map.solve(icrc_bits[usize::from(b)]).is_some())
                .map(|b| (k, b));
        }
        for v in payload_bits.iter_mut().chain(icrc_bits.iter_mut()) {
            *v = zero_bytes_back(*v, 1);
        }
    }
    (
        payload_miss.expect("a payload miss"),
        icrc_miss.expect("an ICRC miss"),
    )
}

/// A WRITE MIDDLE of `len` bytes (without ICRC) and its ICRC for IPv4 identification `id`.
fn packet(len: usize, id: u16) -> (SocketAddr, IpAddr, Vec<u8>) {
    let (src, dst) = (
        IpAddr::from([198, 18, 0, 11]),
        IpAddr::from([198, 18, 0, 12]),
    );
    let mut p: Vec<u8> = (0..len).map(|i| (i * 131 + 7) as u8).collect();
    p[0] = 0x07;
    let zero = icrc::compute_for(src, dst, 49152, 4791, &p, IcrcForm::Spec).unwrap();
    let c = zero ^ icrc::ipv4_id_delta(id, len, IcrcForm::Spec);
    p.extend_from_slice(&icrc::to_wire(c));
    (SocketAddr::new(src, 49152), dst, p)
}

#[test]
fn single_bit_errors_get_through_only_beyond_26_kilobytes() {
    let ((pk, pj), (ik, ib)) = first_misses(27_000);
    // What docs/security.md states: no single-bit error gets through in a packet whose
    // transport part (BTH through pad) is shorter than 26,741 bytes.
    assert_eq!(
        (pk, pj),
        (26_744, 6),
        "the first payload bit that gets through"
    );
    assert_eq!(
        (ik, ib),
        (26_741, 30),
        "the first ICRC bit that gets through"
    );
    let mut check = SocketCheck::default();
    // The miss is real: flipped in real packets of two lengths, rxe-like identification.
    for len in [pk + 1, pk + 300] {
        let (src, dst, mut p) = packet(len, 0x5a5a);
        assert_eq!(check.identification(src, dst, &p), Some(0x5a5a));
        p[pk] ^= 1 << pj;
        let got = check.identification(src, dst, &p);
        assert!(got.is_some_and(|id| id != 0x5a5a), "len {len}: {got:?}");
        // The next bit is caught.
        p[pk] ^= 1 << pj;
        p[pk] ^= 1 << (pj - 1);
        assert_eq!(check.identification(src, dst, &p), None, "len {len}");
    }
    let (src, dst, mut p) = packet(ik, 0x1234);
    let at = ik + usize::from(ib / 8);
    p[at] ^= 1 << (ib % 8);
    assert!(check.identification(src, dst, &p).is_some());
    // The derivation agrees with real flips elsewhere: a sample of positions in a
    // 9000-byte packet, all caught.
    let (src, dst, p) = packet(9000, 77);
    for bit in (0..(9000 + 4) * 8).step_by(97) {
        let mut q = p.clone();
        q[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(check.identification(src, dst, &q), None, "bit {bit}");
    }
}

/// Every length up to a jumbo frame's: the map tells all 16 bits apart, so exactly 2^16
/// of the 2^32 ICRC changes are accepted (a random one with probability 2^-16).
#[test]
fn the_map_has_full_rank_at_every_length() {
    for len in 1..=9216 {
        for form in [IcrcForm::Spec, IcrcForm::RxeFlush] {
            assert_eq!(IdMap::new(len, form).rank(), 16, "len {len} {form:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_solve_inverts_the_delta(len in 1usize..65_000, flush: bool, id: u16, other: u32) {
        let form = if flush { IcrcForm::RxeFlush } else { IcrcForm::Spec };
        let map = IdMap::new(len, form);
        prop_assert_eq!(map.delta(id), icrc::ipv4_id_delta(id, len, form));
        prop_assert_eq!(map.solve(map.delta(id)), Some(id));
        // Whatever it solves, it solves right; and a change outside the image is refused.
        match map.solve(other) {
            Some(x) => prop_assert_eq!(map.delta(x), other),
            None => prop_assert!((0..=u16::MAX).step_by(4099).all(|x| map.delta(x) != other)),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_what_passes_checks(
        bytes in proptest::collection::vec(any::<u8>(), 0..300), v6: bool,
    ) {
        let (src, dst): (IpAddr, IpAddr) = if v6 {
            ("fd00:198:18::11".parse().unwrap(), "fd00:198:18::12".parse().unwrap())
        } else {
            (IpAddr::from([198, 18, 0, 11]), IpAddr::from([198, 18, 0, 12]))
        };
        let from = SocketAddr::new(src, 0xc001);
        // Never a panic; and an accepted packet's ICRC is the one for the ID found.
        if let Some(id) = SocketCheck::default().identification(from, dst, &bytes) {
            let body = bytes.len() - 4;
            let form = IcrcForm::for_opcode(Opcode(bytes[0]));
            let zero = icrc::compute_for(src, dst, 0xc001, 4791, &bytes[..body], form).unwrap();
            let want = zero ^ if v6 { 0 } else { icrc::ipv4_id_delta(id, body, form) };
            let found = icrc::from_wire(bytes[body..].try_into().unwrap());
            prop_assert_eq!(want, found);
        }
    }

    #[test]
    fn a_packet_checks_under_the_identification_it_was_sent_with(
        len in 12usize..5000, id: u16, seed: u8, v6: bool,
    ) {
        let (src, dst): (IpAddr, IpAddr) = if v6 {
            ("fd00:198:18::11".parse().unwrap(), "fd00:198:18::12".parse().unwrap())
        } else {
            (IpAddr::from([198, 18, 0, 11]), IpAddr::from([198, 18, 0, 12]))
        };
        let mut p: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect();
        p[0] = 0x0a;
        let mut c = icrc::compute_for(src, dst, 0xc001, 4791, &p, IcrcForm::Spec).unwrap();
        if !v6 {
            c ^= icrc::ipv4_id_delta(id, len, IcrcForm::Spec);
        }
        p.extend_from_slice(&icrc::to_wire(c));
        let from = SocketAddr::new(src, 0xc001);
        let mut check = SocketCheck::default();
        prop_assert_eq!(check.identification(from, dst, &p), Some(if v6 { 0 } else { id }));
        // From another port or to another address the same bytes do not check.
        let elsewhere = SocketAddr::new(src, 0xc002);
        prop_assert_eq!(check.identification(elsewhere, dst, &p), None);
    }
}
