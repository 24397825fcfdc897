//! Properties: every opcode's packets round-trip through emit and parse, and no input
//! makes the parsers panic.

use proptest::prelude::*;
use rocex_wire::frame::Frame;
use rocex_wire::opcode::Ext;
use rocex_wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, CnpRepr, DethRepr, FethRepr, FrameRepr,
    IethRepr, ImmDtRepr, Opcode, PacketRepr, Psn, RethRepr, SackRepr, SrEthRepr, Syndrome,
};

fn bth(op: Opcode) -> impl Strategy<Value = BthRepr> {
    (
        any::<[bool; 5]>(),
        0u8..16,
        any::<u16>(),
        0u8..64,
        0u32..1 << 24,
        0u8..128,
        0u32..1 << 24,
    )
        .prop_map(move |(flags, tver, pkey, r6, qp, r7, psn)| BthRepr {
            opcode: op,
            solicited: flags[0],
            mig_req: flags[1],
            pad: 0,
            tver,
            pkey,
            fecn: flags[2],
            becn: flags[3],
            reserved6: r6,
            dest_qp: qp,
            ack_req: flags[4],
            reserved7: r7,
            psn: Psn::new(psn),
        })
}

/// A packet of `op` with random header fields; the payload is a prefix of `data`.
fn packet(op: Opcode, data: &[u8]) -> impl Strategy<Value = PacketRepr<'_>> {
    let info = op.info().unwrap();
    let max = if info.payload { data.len() } else { 0 };
    (
        bth(op),
        any::<[u64; 4]>(),
        any::<[u32; 4]>(),
        any::<u8>(),
        0..=max,
        any::<[u8; 16]>(),
        any::<[u8; 32]>(),
    )
        .prop_map(move |(bth, w, d, b, len, cnp, sack)| {
            let mut p = PacketRepr::new(bth);
            for ext in info.exts.iter() {
                match ext {
                    Ext::Deth => {
                        p.deth = Some(DethRepr {
                            qkey: d[0],
                            src_qp: d[1] & 0xff_ffff,
                            reserved: b,
                        })
                    }
                    Ext::Feth => {
                        p.feth = Some(FethRepr {
                            placement: b & 0xf,
                            selectivity: (b >> 4) & 3,
                            reserved: d[2] >> 6,
                        })
                    }
                    Ext::Reth => {
                        p.reth = Some(RethRepr {
                            va: w[0],
                            rkey: d[0],
                            dma_len: d[1],
                        })
                    }
                    Ext::AtomicEth => {
                        p.atomic_eth = Some(AtomicEthRepr {
                            va: w[0],
                            rkey: d[0],
                            swap_add: w[1],
                            compare: w[2],
                        })
                    }
                    Ext::Aeth => {
                        p.aeth = Some(AethRepr {
                            syndrome: Syndrome::from_byte(b),
                            msn: d[3] & 0xff_ffff,
                        })
                    }
                    Ext::AtomicAckEth => p.atomic_ack_eth = Some(AtomicAckEthRepr { orig: w[3] }),
                    Ext::ImmDt => p.immdt = Some(ImmDtRepr { data: d[2] }),
                    Ext::Ieth => p.ieth = Some(IethRepr { rkey: d[3] }),
                    Ext::Cnp => p.cnp = Some(CnpRepr { reserved: cnp }),
                    Ext::SrEth => {
                        p.sreth = Some(SrEthRepr {
                            msg: d[1],
                            offset: d[2],
                        })
                    }
                    Ext::Sack => p.sack = Some(SackRepr { bitmap: sack }),
                }
            }
            p.payload = &data[..len];
            p.with_canonical_pad()
        })
}

static DATA: [u8; 4200] = {
    let mut d = [0u8; 4200];
    let mut i = 0;
    while i < d.len() {
        d[i] = (i * 7 + 3) as u8;
        i += 1;
    }
    d
};

fn any_packet() -> impl Strategy<Value = PacketRepr<'static>> {
    let ops: Vec<Opcode> = Opcode::all().collect();
    proptest::sample::select(ops).prop_flat_map(|op| packet(op, &DATA))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn packet_emit_parse_emit(p in any_packet()) {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        let (parsed, _) = PacketRepr::parse(&buf).unwrap();
        prop_assert_eq!(parsed, p);
        let mut again = vec![0u8; parsed.buffer_len()];
        parsed.emit(&mut again).unwrap();
        prop_assert_eq!(again, buf);
    }

    /// Headers around a payload the caller writes in place (over stale bytes) are the
    /// packet `emit` writes.
    #[test]
    fn emit_around_then_payload_is_emit(p in any_packet()) {
        let mut want = vec![0u8; p.buffer_len()];
        p.emit(&mut want).unwrap();
        let mut buf = vec![0xa5u8; p.buffer_len() + 7];
        let headers = PacketRepr { payload: &[], ..p };
        let (at, len) = headers.emit_around(&mut buf, p.payload.len()).unwrap();
        prop_assert_eq!(len, want.len());
        buf[at..at + p.payload.len()].copy_from_slice(p.payload);
        // The ICRC's bytes are the frame layer's.
        prop_assert_eq!(&buf[..len - 4], &want[..len - 4]);
    }

    #[test]
    fn frame_emit_parse_checks_icrc(p in any_packet(), v6 in any::<bool>(), sport in any::<u16>()) {
        let macs = ([2; 6], [4; 6]);
        let f = if v6 {
            FrameRepr::ipv6(macs, ([0xfd; 16], [0xfe; 16]), sport, p).unwrap()
        } else {
            FrameRepr::ipv4(macs, ([198, 18, 0, 1], [198, 18, 0, 2]), sport, p).unwrap()
        };
        let mut buf = vec![0u8; f.buffer_len()];
        f.emit(&mut buf).unwrap();
        let parsed = Frame::parse(&buf).unwrap();
        prop_assert!(parsed.check_icrc().is_valid());
        prop_assert_eq!(&parsed.repr, &f);
    }

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = PacketRepr::parse(&bytes);
        if let Ok(f) = Frame::parse(&bytes) {
            let _ = f.check_icrc();
        }
    }

    #[test]
    fn mutated_frames_never_panic(p in any_packet(), at in any::<prop::sample::Index>(), x in 1u8..) {
        let f = FrameRepr::ipv4(([2; 6], [4; 6]), ([198, 18, 0, 1], [198, 18, 0, 2]), 1, p).unwrap();
        let mut buf = vec![0u8; f.buffer_len()];
        f.emit(&mut buf).unwrap();
        let i = at.index(buf.len());
        buf[i] ^= x;
        if let Ok(g) = Frame::parse(&buf) {
            let _ = g.check_icrc();
            let mut out = vec![0u8; g.repr.buffer_len()];
            let _ = g.repr.emit(&mut out);
        }
    }
}

#[test]
fn a_missing_header_is_an_error_not_a_panic() {
    let mut p = PacketRepr::new(BthRepr::new(Opcode::RC_RDMA_WRITE_FIRST, 1, Psn::new(0)));
    let mut buf = [0u8; 64];
    assert!(p.emit(&mut buf).is_err());
    p.reth = Some(RethRepr {
        va: 0,
        rkey: 0,
        dma_len: 0,
    });
    p.immdt = Some(ImmDtRepr { data: 0 });
    assert!(p.emit(&mut buf).is_err(), "an extra ImmDt must be refused");
}
