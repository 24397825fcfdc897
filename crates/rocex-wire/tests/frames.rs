//! Whole frames against vectors this project did not compute.

use etherparse::{EtherType, IpDscp, IpEcn, SingleVlanHeader, VlanId, VlanPcp};
use rocex_wire::frame::{Frame, FrameHeaders, IcrcCheck};
use rocex_wire::{
    BthRepr, ErrorKind, FethRepr, FrameRepr, IcrcForm, IpRepr, Layer, Opcode, PacketRepr, Psn,
    RethRepr,
};

/// The frame of scapy's RoCE test (test/contrib/roce.uts), as scapy builds it before
/// its IPv4 fields are set.
fn scapy_frame() -> FrameRepr<'static> {
    let payload = b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P";
    let mut bth = BthRepr::new(Opcode::UC_SEND_ONLY, 211, Psn::new(13_571_856));
    bth.mig_req = true;
    let mut packet = PacketRepr::new(bth);
    packet.payload = payload;
    let mac = [0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22];
    let addr = [192, 168, 0, 7];
    FrameRepr::ipv4((mac, mac), (addr, addr), 49152, packet).unwrap()
}

/// scapy's RoCE test (test/contrib/roce.uts): a UC SEND_ONLY that scapy builds and whose
/// IPv4 checksum (0xb4d5), UDP checksum (0xaca2) and ICRC (wire bytes 78 f3 53 f3) it asserts.
#[test]
fn scapy_uc_send_only() {
    let mut f = scapy_frame();
    let IpRepr::V4(ip) = &mut f.ip else {
        unreachable!()
    };
    ip.dscp = IpDscp::ZERO;
    ip.ecn = IpEcn::ONE;
    ip.identification = 1144;
    f.udp.checksum = 0xaca2;
    f.finalize().unwrap();
    let IpRepr::V4(ip) = &f.ip else {
        unreachable!()
    };
    assert_eq!(ip.header_checksum, 0xb4d5);
    assert_eq!(ip.total_len, 64);
    assert_eq!(f.packet.bth.pad, 2);

    let mut buf = [0u8; 128];
    let n = f.emit(&mut buf).unwrap();
    assert_eq!(n, 14 + 64);
    assert_eq!(buf[n - 4..n], [0x78, 0xf3, 0x53, 0xf3]);
    // etherparse's own UDP checksum over the emitted datagram agrees with scapy's.
    let IpRepr::V4(ip) = &f.ip else {
        unreachable!()
    };
    assert_eq!(f.udp.calc_checksum_ipv4(ip, &buf[42..n]).unwrap(), 0xaca2);

    let parsed = Frame::parse(&buf[..n]).unwrap();
    assert_eq!(parsed.check_icrc(), IcrcCheck::Valid(IcrcForm::Spec));
    assert_eq!(parsed.repr, f);
}

/// A CNP captured from a ConnectX-4 Lx, published with scapy's RoCE tests.
const CX4_CNP: [u8; 74] = [
    0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00, 0x45, 0xc2,
    0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00,
    0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff, 0xff, 0x40, 0x00,
    0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
];

#[test]
fn connectx4_cnp_parses_and_re_emits() {
    let f = Frame::parse(&CX4_CNP).unwrap();
    let b = f.repr.packet.bth;
    assert_eq!(b.opcode, Opcode::CNP);
    assert!(b.becn && !b.fecn && !b.ack_req);
    assert_eq!(b.dest_qp, 0x118);
    assert!(f.repr.packet.cnp.is_some());
    assert!(f.repr.packet.payload.is_empty());
    assert!(f.check_icrc().is_valid());
    let mut out = [0u8; 74];
    assert_eq!(f.repr.emit(&mut out).unwrap(), 74);
    assert_eq!(out, CX4_CNP);
}

fn write_request(vlan: bool) -> Vec<u8> {
    let mut bth = BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, 0x11, Psn::new(0xff_ffff));
    bth.ack_req = true;
    let mut p = PacketRepr::new(bth);
    p.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0xabcd,
        dma_len: 5,
    });
    p.payload = b"hello";
    let mut f = FrameRepr::ipv4(
        ([2; 6], [4; 6]),
        ([198, 18, 0, 1], [198, 18, 0, 2]),
        0xc000,
        p,
    )
    .unwrap();
    if vlan {
        f.link.vlan = Some(SingleVlanHeader {
            pcp: VlanPcp::try_new(3).unwrap(),
            drop_eligible_indicator: false,
            vlan_id: VlanId::try_new(42).unwrap(),
            ether_type: EtherType::IPV4,
        });
        f.finalize().unwrap();
    }
    let mut buf = vec![0; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    buf
}

#[test]
fn vlan_tag_is_carried() {
    let plain = write_request(false);
    let tagged = write_request(true);
    assert_eq!(tagged.len(), plain.len() + 4);
    assert_eq!(tagged[12..14], [0x81, 0x00]);
    let f = Frame::parse(&tagged).unwrap();
    assert_eq!(f.repr.link.vlan.as_ref().unwrap().vlan_id.value(), 42);
    assert!(f.check_icrc().is_valid());
    // The ICRC does not cover the link layer.
    assert_eq!(tagged[tagged.len() - 4..], plain[plain.len() - 4..]);
}

#[test]
fn ipv6_frame_round_trips() {
    let mut p = PacketRepr::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x12, Psn::new(7)));
    p.payload = &[1, 2, 3];
    let src = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let dst = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let f = FrameRepr::ipv6(([2; 6], [4; 6]), (src, dst), 0xc001, p).unwrap();
    let mut buf = vec![0; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    let parsed = Frame::parse(&buf).unwrap();
    assert_eq!(parsed.repr, f);
    assert!(parsed.check_icrc().is_valid());
    // Traffic class, flow label and hop limit are masked out of the ICRC.
    let mut changed = buf.clone();
    changed[14] |= 0x0f;
    changed[15] = 0xab;
    changed[21] = 3;
    assert!(Frame::parse(&changed).unwrap().check_icrc().is_valid());
    changed[30] ^= 1; // source address: covered
    assert!(!Frame::parse(&changed).unwrap().check_icrc().is_valid());
}

/// A FLUSH request, whose ICRC rxe computes its own way.
fn flush_request() -> Vec<u8> {
    let mut p = PacketRepr::new(BthRepr::new(Opcode::RC_FLUSH, 0x11, Psn::new(1)));
    p.feth = Some(FethRepr {
        placement: 1,
        selectivity: 0,
        reserved: 0,
    });
    p.reth = Some(RethRepr {
        va: 0x2000,
        rkey: 0x77,
        dma_len: 64,
    });
    let f = FrameRepr::ipv4(
        ([2; 6], [4; 6]),
        ([198, 18, 0, 1], [198, 18, 0, 2]),
        0xc000,
        p,
    )
    .unwrap();
    assert_eq!(f.icrc_form, IcrcForm::RxeFlush);
    let mut buf = vec![0; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    buf
}

/// `set_tos` on scapy's frame above gives scapy's IPv4 checksum, and a DSCP and ECN
/// leave the ICRC valid (the ICRC masks the byte).
#[test]
fn set_tos_gives_scapys_checksum_and_keeps_the_icrc() {
    let mut f = scapy_frame();
    let IpRepr::V4(ip) = &mut f.ip else {
        unreachable!()
    };
    ip.identification = 1144;
    f.set_tos(0x01);
    let IpRepr::V4(ip) = &f.ip else {
        unreachable!()
    };
    assert_eq!(ip.header_checksum, 0xb4d5);

    let before = Frame::parse(&{
        let mut b = vec![0; f.buffer_len()];
        f.emit(&mut b).unwrap();
        b
    })
    .unwrap()
    .icrc;
    f.set_tos(26 << 2 | 2);
    let mut buf = vec![0; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    let h = FrameHeaders::parse(&buf).unwrap();
    assert_eq!(h.ip.tos(), 0x6a);
    assert!(h.ip.checksum_ok());
    let parsed = Frame::parse(&buf).unwrap();
    assert_eq!(parsed.icrc, before);
    assert!(matches!(parsed.check_icrc(), IcrcCheck::Valid(_)));
}

#[test]
fn flush_uses_rxes_icrc_form() {
    let buf = flush_request();
    let parsed = Frame::parse(&buf).unwrap();
    assert_eq!(parsed.check_icrc(), IcrcCheck::Valid(IcrcForm::RxeFlush));
    assert_ne!(parsed.compute_icrc(IcrcForm::Spec), parsed.icrc);
}

#[test]
fn corruption_is_caught_by_the_icrc() {
    let buf = write_request(false);
    for at in 42..buf.len() {
        if at == 42 + 4 {
            continue; // BTH byte 4 is masked
        }
        let mut bad = buf.clone();
        bad[at] ^= 0x10;
        if let Ok(f) = Frame::parse(&bad) {
            assert!(
                !f.check_icrc().is_valid(),
                "flip at byte {at} went unnoticed"
            );
        }
    }
}

#[test]
fn errors_name_the_layer_and_offset() {
    let buf = write_request(false);
    let e = Frame::parse(&buf[..10]).unwrap_err();
    assert_eq!((e.layer, e.offset), (Layer::Ethernet, 0));
    // Cut inside the RETH: the IP length then disagrees with what is there.
    let e = Frame::parse(&buf[..60]).unwrap_err();
    assert_eq!(e.layer, Layer::Ipv4);
    assert!(matches!(e.kind, ErrorKind::Truncated { .. }));

    let mut bad = buf.clone();
    bad[42] = 0x15; // a reserved opcode
    let e = Frame::parse(&bad).unwrap_err();
    assert_eq!(
        (e.layer, e.offset, &e.kind),
        (Layer::Bth, 42, &ErrorKind::UnknownOpcode(0x15))
    );
    assert_eq!(
        e.to_string(),
        "BTH at byte 42 has opcode 0x15, which is reserved or not supported."
    );

    let mut bad = buf.clone();
    bad[43] = 0x30; // pad 3 on a 5-byte payload with 3 pad bytes is fine; make the payload empty instead
    bad[42] = Opcode::RC_RDMA_READ_REQUEST.0;
    let e = Frame::parse(&bad).unwrap_err();
    assert_eq!(e.layer, Layer::Payload);

    let mut bad = buf;
    bad[36] = 0x12; // UDP destination port 4791 -> 4786
    bad[37] = 0xb2;
    let e = Frame::parse(&bad).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::NotRoce(_)));
}

#[test]
fn reth_truncation_points_at_the_reth() {
    // A transport packet cut in its RETH, parsed alone.
    let buf = write_request(false);
    let e = PacketRepr::parse(&buf[42..42 + 12 + 10]).unwrap_err();
    assert_eq!((e.layer, e.offset), (Layer::Reth, 12));
    assert_eq!(
        e.kind,
        ErrorKind::Truncated {
            required: 16,
            available: 10
        }
    );
}

#[test]
fn docs_carry_the_opcode_table() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/wire.md"))
        .unwrap();
    let table = rocex_wire::opcode::markdown_table();
    assert!(
        doc.contains(&table),
        "docs/wire.md's opcode table is stale; it should read:\n{table}"
    );
}

#[test]
fn source_port_matches_rxe_captures() {
    // rc_pingpong between QPs 0x11 and 0x12, and perftest between two QPs 0x11.
    assert_eq!(rocex_wire::udp_source_port(0x11, 0x12), 49458);
    assert_eq!(rocex_wire::udp_source_port(0x12, 0x11), 49458);
    assert_eq!(rocex_wire::udp_source_port(0x11, 0x11), 49441);
}

#[test]
fn icrc_for_addresses_matches_the_emitted_frame() {
    let buf = write_request(false);
    let f = Frame::parse(&buf).unwrap();
    let (src, dst) = ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap());
    let crc = rocex_wire::icrc::compute_for(
        src,
        dst,
        0xc000,
        4791,
        &buf[42..buf.len() - 4],
        IcrcForm::Spec,
    );
    assert_eq!(crc.unwrap(), f.icrc);
}

/// The headers-only parse a receive path uses agrees with the full parse: the same UDP
/// payload, the same ICRC verdict (a ConnectX-4's CNP, a tagged and an untagged WRITE, a
/// FLUSH in rxe's ICRC form), and it notices a flipped bit the same way.
#[test]
fn headers_only_parse_agrees_with_the_full_parse() {
    for buf in [
        CX4_CNP.to_vec(),
        write_request(false),
        write_request(true),
        flush_request(),
    ] {
        let full = Frame::parse(&buf).unwrap();
        let h = FrameHeaders::parse(&buf).unwrap();
        assert_eq!(h.check_icrc(), full.check_icrc());
        assert!(h.check_icrc().is_valid());
        assert_eq!(h.opcode(), full.repr.packet.opcode());
        assert_eq!(h.icrc, full.icrc);
        // The in-place views read what etherparse's owned headers hold.
        assert_eq!(h.vlan_id(), full.repr.link.vlan.as_ref().map(|v| v.vlan_id));
        assert_eq!(h.udp.to_header(), full.repr.udp);
        let (src, dst, checksum_ok) = match &full.repr.ip {
            IpRepr::V4(ip) => (
                ip.source.into(),
                ip.destination.into(),
                ip.header_checksum == ip.calc_header_checksum(),
            ),
            IpRepr::V6(ip) => (ip.source.into(), ip.destination.into(), true),
        };
        assert_eq!(h.ip.addresses(), (src, dst));
        assert_eq!(h.ip.checksum_ok(), checksum_ok);
        assert!(checksum_ok);
        let udp_at = full.repr.link.header_len() + full.repr.ip.header_len() + 8;
        assert_eq!(h.datagram(), &buf[udp_at..udp_at + h.datagram().len()]);
        assert_eq!(h.datagram().len() + 8, usize::from(full.repr.udp.length));
        let mut bad = buf.clone();
        bad[udp_at + 13] ^= 0x01; // the destination QP
        assert!(!FrameHeaders::parse(&bad).unwrap().check_icrc().is_valid());
    }
}

/// The in-place IPv4 checksum check agrees with etherparse's computed checksum for the
/// header as sent and for every one-bit flip of it that etherparse's header holds (it
/// drops the reserved flag bit, which the in-place check covers too); a one-bit flip
/// always breaks a one's-complement sum (the length fields aside, whose flips make the
/// frame unparsable).
#[test]
fn in_place_ipv4_checksum_agrees_with_etherparse() {
    let buf = write_request(false);
    let ip_at = 14;
    assert!(FrameHeaders::parse(&buf).unwrap().ip.checksum_ok());
    for bit in 0..20 * 8 {
        let mut b = buf.clone();
        b[ip_at + bit / 8] ^= 1 << (bit % 8);
        let (Ok(h), Ok((ip, _))) = (
            FrameHeaders::parse(&b),
            etherparse::Ipv4Header::from_slice(&b[ip_at..]),
        ) else {
            continue;
        };
        assert!(!h.ip.checksum_ok(), "bit {bit}");
        if ip.to_bytes()[..] != b[ip_at..ip_at + 20] {
            continue;
        }
        let expected = ip.header_checksum == ip.calc_header_checksum();
        assert_eq!(h.ip.checksum_ok(), expected, "bit {bit}");
    }
}

/// A UDP payload too short for a BTH and an ICRC is refused, naming the layer that is cut.
#[test]
fn headers_only_parse_refuses_a_datagram_shorter_than_bth_and_icrc() {
    let frame = |payload: &[u8]| {
        let b = etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .udp(49152, 4791);
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    };
    let e = FrameHeaders::parse(&frame(&[0; 10])).unwrap_err();
    assert_eq!((e.layer, e.offset), (Layer::Bth, 42));
    let e = FrameHeaders::parse(&frame(&[0; 14])).unwrap_err();
    assert_eq!((e.layer, e.offset), (Layer::Icrc, 54));
    assert!(FrameHeaders::parse(&frame(&[0; 16])).is_ok());
}

#[test]
fn a_short_output_buffer_is_an_error_that_says_how_much_is_needed() {
    let f = scapy_frame();
    let len = f.buffer_len();
    let mut buf = vec![0; len - 1];
    let e = f.emit(&mut buf).unwrap_err();
    assert_eq!(
        (e.layer, e.kind),
        (
            Layer::Ethernet,
            ErrorKind::BufferTooSmall {
                required: len,
                available: len - 1
            }
        )
    );
    // The packet alone: BTH, 18 bytes of payload, 2 of pad, ICRC.
    let e = f.packet.emit_around(&mut buf[..35], 18).unwrap_err();
    assert_eq!(
        (e.layer, e.kind),
        (
            Layer::Bth,
            ErrorKind::BufferTooSmall {
                required: 36,
                available: 35
            }
        )
    );
}
