//! Unit tests: layout, ring arithmetic, validation errors, memfd mapping, threads, a hostile
//! writer and a second process.

use crate::desc::{family, opcode, send_flags};
use crate::layout::ring_off;
use crate::validate::{Payload, check_send_header, validate_send};
use crate::*;
use core::mem::size_of;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rocex_proto::verbs::{
    QpType, RecvWr, Remote, SendData, SendFlags, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
    WorkCompletion,
};
use zerocopy::{FromZeros, IntoBytes};

const RC: SqLimits = SqLimits {
    qp_type: QpType::Rc,
    max_sge: 4,
    max_inline: 64,
};

fn sq_spec(slots: u32) -> RingSpec {
    RingSpec::new(RingKind::Sq, slots, 256).unwrap()
}

fn sge(i: u64) -> Sge {
    Sge {
        addr: 0x1000 * i,
        length: 8,
        lkey: i as u32 + 7,
    }
}

fn every_op() -> Vec<SendWr> {
    let r = Remote {
        addr: 0x8000,
        rkey: 0x1234,
    };
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm(5),
        SendOp::SendWithInv(6),
        SendOp::Write(r),
        SendOp::WriteWithImm(r, 9),
        SendOp::Read(r),
        SendOp::CompareSwap {
            remote: r,
            compare: 1,
            swap: 2,
        },
        SendOp::FetchAdd { remote: r, add: 3 },
        SendOp::AtomicWrite {
            remote: r,
            value: 4,
        },
        SendOp::Flush {
            remote: r,
            len: 100,
            placement: 1,
            selectivity: 0,
        },
    ];
    ops.iter()
        .enumerate()
        .map(|(i, &op)| {
            let n = if matches!(op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }) {
                1
            } else {
                (i % 5) as u64
            };
            let mut wr = SendWr::new(i as u64, op, (0..n).map(sge));
            wr.flags.fence = i % 2 == 0;
            wr.flags.solicited = i % 3 == 0;
            wr
        })
        .collect()
}

fn slot_of(wr: &SendWr) -> Vec<u8> {
    let mut slot = vec![0u8; 256];
    encode_send(wr, &mut slot).unwrap();
    slot
}

fn desc_of(wr: &SendWr) -> (SendDesc, Vec<u8>) {
    let slot = slot_of(wr);
    let d = zerocopy::FromBytes::read_from_prefix(&slot[..]).unwrap().0;
    (d, slot)
}

fn err_of(slot: &[u8], limits: &SqLimits) -> DescError {
    match validate_send(slot, limits) {
        Err(ReadError::Desc { error, .. }) => error,
        other => panic!("expected a descriptor error, got {other:?}"),
    }
}

fn with(d: &SendDesc, slot: &[u8], f: impl FnOnce(&mut SendDesc)) -> Vec<u8> {
    let mut d = *d;
    f(&mut d);
    let mut s = slot.to_vec();
    s[..size_of::<SendDesc>()].copy_from_slice(d.as_bytes());
    s
}

#[test]
fn layout_sizes_and_offsets() {
    assert_eq!(size_of::<RingHeader>(), 512);
    assert_eq!(ring_off::PRODUCER, 128);
    assert_eq!(ring_off::CONSUMER, 256);
    assert_eq!(ring_off::NEED_WAKEUP, 384);
    assert_eq!(size_of::<SendDesc>(), 128);
    assert_eq!(size_of::<RecvDesc>(), 16);
    assert_eq!(size_of::<Cqe>(), 64);
    assert_eq!(size_of::<SgeDesc>(), 16);
    assert_eq!(size_of::<RegionHeader>(), 128);
    let h = RegionHeader::new(4096);
    assert!(h.compatible());
    assert_eq!(h.abi_version, ABI_VERSION);
    assert_eq!(&h.as_bytes()[..8], b"ROCEXSHM");
}

#[test]
fn spec_rejects_bad_geometry() {
    assert_eq!(
        RingSpec::new(RingKind::Sq, 0, 256),
        Err(SpecError::SlotCount(0))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 3, 256),
        Err(SpecError::SlotCount(3))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 1 << 17, 256),
        Err(SpecError::SlotCount(1 << 17))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 4, 64),
        Err(SpecError::SlotSize(64))
    );
    assert_eq!(
        RingSpec::new(RingKind::Cq, 4, 96),
        Err(SpecError::SlotSize(96))
    );
    let s = RingSpec::new(RingKind::Cq, 8, 64).unwrap();
    assert_eq!(s.bytes(), 512 + 8 * 64);
    assert_eq!(s.stride(), 4096);
}

#[test]
fn ring_header_written_by_init() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let mut b = [0u8; 512];
    mem.view().read(0, &mut b).unwrap();
    let h: RingHeader = zerocopy::FromBytes::read_from_bytes(&b[..]).unwrap();
    assert_eq!(h.slot_count, 8);
    assert_eq!(h.index_mask, 7);
    assert_eq!(h.log2_slot_size, 8);
    assert_eq!(h.kind, RingKind::Sq as u32);
    assert_eq!((h.max_sge, h.max_inline), (4, 64));
}

#[test]
fn view_is_bounds_checked() {
    let mem = HeapMem::new(64);
    let v = mem.view();
    let mut b = [0u8; 8];
    assert!(v.read(60, &mut b).is_err());
    assert!(v.read(2, &mut b[..4]).is_err());
    assert!(v.read(usize::MAX - 3, &mut b[..4]).is_err());
    assert!(v.write(64, &[0; 4]).is_err());
    assert!(v.word(64).is_err());
    assert!(v.sub(32, 36).is_err());
    assert!(v.read(56, &mut b).is_ok());
    assert!(Ring::new(v, sq_spec(8)).is_err());
}

/// Bulk copies (over `BULK` bytes) and word-wise copies lay bytes out alike: native order
/// within each word, whichever way they were written and read.
#[test]
fn bulk_and_word_copies_agree() {
    let mem = HeapMem::new(256);
    let v = mem.view();
    let data: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    for len in (4..=64).step_by(4) {
        for at in (0..=128).step_by(4) {
            v.zero(0, 256).unwrap();
            v.write(at, &data[..len]).unwrap();
            for (i, chunk) in data[..len].chunks_exact(4).enumerate() {
                let w = v
                    .word(at + 4 * i)
                    .unwrap()
                    .load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(w.to_ne_bytes(), chunk, "len {len} at {at}, word {i}");
            }
            assert_eq!(
                v.word(at + len)
                    .unwrap()
                    .load(std::sync::atomic::Ordering::Relaxed),
                0
            );
            // Read back whole, and in word-wise (4-byte) and bulk (12-byte) pieces.
            let mut back = vec![0u8; len];
            v.read(at, &mut back).unwrap();
            assert_eq!(back, data[..len]);
            for piece in [4, 12] {
                let mut back = vec![0u8; len];
                for (i, out) in back.chunks_mut(piece).enumerate() {
                    v.read(at + i * piece, out).unwrap();
                }
                assert_eq!(back, data[..len], "len {len} at {at} in {piece}s");
            }
        }
    }
    let mut big = [0u8; 64];
    assert!(v.read(196, &mut big).is_err(), "a bulk read past the end");
    assert!(v.write(2, &big[..16]).is_err(), "a misaligned bulk write");
}

#[test]
fn full_and_empty() {
    let spec = RingSpec::new(RingKind::Cq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let (mut p, mut c) = (ring.producer(), ring.consumer());
    let mut out = [0u8; 64];
    assert!(!c.pop_into(&mut out).unwrap());
    for i in 0..4u8 {
        p.push(&[i; 64]).unwrap();
    }
    assert_eq!(p.push(&[9; 64]), Err(RingError::Full));
    assert!(!c.pop_into(&mut out).unwrap(), "nothing published yet");
    let _ = p.publish();
    for i in 0..4u8 {
        assert!(c.pop_into(&mut out).unwrap());
        assert_eq!(out, [i; 64]);
    }
    assert!(!c.pop_into(&mut out).unwrap());
    assert_eq!(p.push(&[9; 64]), Err(RingError::Full), "not released yet");
    c.release();
    assert_eq!(p.free().unwrap(), 4);
    assert_eq!(
        p.push(&[0; 65]),
        Err(RingError::TooLarge {
            len: 65,
            slot_size: 64
        })
    );
}

#[test]
fn wraps_around_u32_max() {
    let spec = RingSpec::new(RingKind::Cq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let start = u32::MAX - 5;
    ring.reset(start);
    let (mut p, mut c) = (ring.producer_at(start), ring.consumer_at(start));
    let mut out = [0u8; 4];
    let mut next = 0u32;
    let mut seen = 0u32;
    for _ in 0..10 {
        while p.push(&next.to_ne_bytes()).is_ok() {
            next += 1;
        }
        let _ = p.publish();
        while c.pop_into(&mut out).unwrap() {
            assert_eq!(u32::from_ne_bytes(out), seen);
            seen += 1;
        }
        c.release();
    }
    assert_eq!(seen, 40);
    assert_eq!(
        mem.view()
            .word(ring_off::PRODUCER)
            .unwrap()
            .load(std::sync::atomic::Ordering::Relaxed),
        start.wrapping_add(40)
    );
}

#[test]
fn producer_index_beyond_ring_is_an_error() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut c = ring.consumer();
    let w = mem.view().word(ring_off::PRODUCER).unwrap();
    w.store(9, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        c.available(),
        Err(RingError::ProducerAhead {
            producer: 9,
            consumer: 0,
            slots: 8
        })
    );
    w.store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        c.next_slot(),
        Err(RingError::ProducerAhead { .. })
    ));
    w.store(8, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(c.available(), Ok(8));
    // The consumer index as seen by a producer.
    let mut p = ring.producer();
    mem.view()
        .word(ring_off::CONSUMER)
        .unwrap()
        .store(3, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(p.free(), Err(RingError::ConsumerAhead { .. })));
}

#[test]
fn geometry_in_shared_header_is_ignored() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    // A hostile client claims a huge ring.
    mem.view().write(12, &u32::MAX.to_ne_bytes()).unwrap();
    mem.view().write(16, &u32::MAX.to_ne_bytes()).unwrap();
    let mut w = WqWriter::new(ring.producer(), spec);
    let mut r = SqReader::new(ring.consumer(), RC);
    for wr in every_op() {
        w.post_send(&wr).unwrap();
        let _ = w.publish();
        assert_eq!(r.read_send().unwrap(), Some(wr));
        r.ring().release();
    }
}

#[test]
fn every_op_round_trips_through_the_ring() {
    let spec = sq_spec(4);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut w = WqWriter::new(ring.producer(), spec);
    let mut r = SqReader::new(ring.consumer(), RC);
    let mut ops = every_op();
    let mut inline = SendWr::new(99, SendOp::Send, vec![]);
    inline.data = SendData::Inline((0..63u8).collect());
    ops.push(inline);
    for wr in ops {
        w.post_send(&wr).unwrap();
        assert!(!w.publish());
        assert_eq!(r.read_send().unwrap(), Some(wr));
        r.ring().release();
    }
    assert_eq!(r.read_send().unwrap(), None);
}

#[test]
fn ud_destinations_round_trip() {
    let limits = SqLimits {
        qp_type: QpType::Ud,
        ..RC
    };
    for dest in [
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ] {
        let mut wr = SendWr::new(1, SendOp::SendWithImm(3), vec![sge(1)]);
        wr.ud = Some(UdDest {
            dest,
            remote_qpn: 0xff_ffff,
            remote_qkey: 0x1111_0000,
        });
        assert_eq!(validate_send(&slot_of(&wr), &limits).unwrap(), wr);
    }
}

#[test]
fn recv_round_trip_and_errors() {
    let spec = RingSpec::new(RingKind::Rq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut w = WqWriter::new(ring.producer(), spec);
    let mut r = RqReader::new(ring.consumer(), RqLimits { max_sge: 2 });
    let wr = RecvWr {
        wr_id: 5,
        sges: vec![sge(1), sge(2)].into(),
    };
    w.post_recv(&wr).unwrap();
    let _ = w.publish();
    assert_eq!(r.read_recv().unwrap(), Some(wr));
    let three = RecvWr {
        wr_id: 6,
        sges: vec![sge(1), sge(2), sge(3)].into(),
    };
    w.post_recv(&three).unwrap();
    assert_eq!(
        w.post_recv(&RecvWr {
            wr_id: 7,
            sges: vec![sge(0); 4].into()
        }),
        Err(PostError::Encode(EncodeError::TooManySges(4)))
    );
    let _ = w.publish();
    assert_eq!(
        r.read_recv(),
        Err(ReadError::Desc {
            wr_id: 6,
            error: DescError::TooManySges { num: 3, max: 2 }
        })
    );
    // Reserved word.
    let mut slot = [0u8; 16];
    encode_recv(
        &RecvWr {
            wr_id: 8,
            sges: vec![].into(),
        },
        &mut slot,
    )
    .unwrap();
    slot[12] = 1;
    r.ring().release();
    w.ring().push(&slot).unwrap();
    let _ = w.publish();
    assert_eq!(
        r.read_recv(),
        Err(ReadError::Desc {
            wr_id: 8,
            error: DescError::ReservedNonZero("reserved")
        })
    );
}

#[test]
fn cq_round_trip_and_checks() {
    let spec = RingSpec::new(RingKind::Cq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut w = CqWriter::new(ring.producer());
    let mut r = CqReader::new(ring.consumer());
    let wcs = [
        WorkCompletion {
            wr_id: 1,
            status: WcStatus::Success,
            opcode: WcOpcode::RecvRdmaWithImm,
            byte_len: 10,
            imm_data: Some(77),
            invalidated_rkey: None,
            qp_num: 17,
            src_qp: 0,
        },
        WorkCompletion {
            wr_id: 2,
            status: WcStatus::RemAccessErr,
            opcode: WcOpcode::Recv,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: Some(0xabc),
            qp_num: 17,
            src_qp: 33,
        },
    ];
    for wc in &wcs {
        w.push(wc).unwrap();
    }
    let _ = w.publish();
    for wc in &wcs {
        assert_eq!(r.poll().unwrap(), Some(*wc));
    }
    assert_eq!(r.poll().unwrap(), None);
    let good = Cqe::from(&wcs[0]);
    let bad = [
        (Cqe { status: 22, ..good }, DescError::BadStatus(22)),
        (Cqe { opcode: 7, ..good }, DescError::BadWcOpcode(7)),
        (
            Cqe {
                wc_flags: 1,
                ..good
            },
            DescError::BadWcFlags(1),
        ),
        (
            Cqe {
                wc_flags: 10,
                ..good
            },
            DescError::BadWcFlags(10),
        ),
        (
            Cqe {
                vendor_err: 1,
                ..good
            },
            DescError::ReservedNonZero("cqe reserved"),
        ),
    ];
    for (c, e) in bad {
        assert_eq!(crate::validate::check_cqe(&c), Err(e));
    }
}

#[test]
fn every_send_validation_error() {
    let base = SendWr::new(42, SendOp::Send, vec![sge(1)]);
    let (d, slot) = desc_of(&base);
    let cases: Vec<(Vec<u8>, SqLimits, DescError)> = vec![
        (
            with(&d, &slot, |d| d.opcode = 13),
            RC,
            DescError::BadOpcode(13),
        ),
        (
            with(&d, &slot, |d| d.opcode = 200),
            RC,
            DescError::BadOpcode(200),
        ),
        (
            with(&d, &slot, |d| d.opcode = opcode::BIND_MW),
            RC,
            DescError::UnsupportedOpcode(8),
        ),
        (
            with(&d, &slot, |d| d.opcode = opcode::LOCAL_INV),
            RC,
            DescError::UnsupportedOpcode(7),
        ),
        (
            with(&d, &slot, |d| d.flags |= 0x100),
            RC,
            DescError::ReservedFlags(0x100),
        ),
        (
            with(&d, &slot, |d| d.reserved0 = 1),
            RC,
            DescError::ReservedNonZero("reserved0"),
        ),
        (
            with(&d, &slot, |d| d.reserved[11] = 1),
            RC,
            DescError::ReservedNonZero("reserved"),
        ),
        (
            with(&d, &slot, |d| d.num_sge = 5),
            RC,
            DescError::TooManySges { num: 5, max: 4 },
        ),
        (
            with(&d, &slot, |d| d.num_sge = 9),
            SqLimits { max_sge: 30, ..RC },
            DescError::TooManySges { num: 9, max: 8 },
        ),
        (
            with(&d, &slot, |d| {
                d.num_sge = 0;
                d.flags |= send_flags::INLINE;
                d.inline_len = 129;
            }),
            SqLimits {
                max_inline: 1000,
                ..RC
            },
            DescError::InlineOverSlot { len: 129, max: 128 },
        ),
        (
            with(&d, &slot, |d| {
                d.num_sge = 0;
                d.flags |= send_flags::INLINE;
                d.inline_len = u32::MAX;
            }),
            RC,
            DescError::InlineOverSlot {
                len: u32::MAX,
                max: 128,
            },
        ),
        (
            with(&d, &slot, |d| {
                d.num_sge = 0;
                d.flags |= send_flags::INLINE;
                d.inline_len = 65;
            }),
            RC,
            DescError::InlineOverQpMax { len: 65, max: 64 },
        ),
        (
            with(&d, &slot, |d| {
                d.opcode = opcode::RDMA_READ;
                d.num_sge = 0;
                d.flags |= send_flags::INLINE;
            }),
            RC,
            DescError::InlineNotAllowed(opcode::RDMA_READ),
        ),
        (
            with(&d, &slot, |d| d.inline_len = 4),
            RC,
            DescError::InlineLenWithoutFlag(4),
        ),
        (
            with(&d, &slot, |d| d.flags |= send_flags::INLINE),
            RC,
            DescError::SgesWithInline(1),
        ),
        (
            slot.clone(),
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            DescError::UdWithoutDest,
        ),
        (
            with(&d, &slot, |d| d.ud_family = family::V4),
            RC,
            DescError::DestOnConnectedQp,
        ),
        (
            with(&d, &slot, |d| d.ud_family = 5),
            RC,
            DescError::BadAddressFamily(5),
        ),
        (
            with(&d, &slot, |d| {
                d.ud_family = family::V4;
                d.ud_qpn = 1 << 24;
            }),
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            DescError::QpnOutOfRange(1 << 24),
        ),
        (
            with(&d, &slot, |d| {
                d.ud_family = family::V4;
                d.ud_addr[15] = 1;
            }),
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            DescError::ReservedNonZero("ud_addr[4..16]"),
        ),
        (
            with(&d, &slot, |d| d.opcode = opcode::RDMA_READ),
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            DescError::OpcodeNotOnQpType(opcode::RDMA_READ),
        ),
        (
            with(&d, &slot, |d| d.opcode = opcode::ATOMIC_FETCH_AND_ADD),
            SqLimits {
                qp_type: QpType::Uc,
                ..RC
            },
            DescError::OpcodeNotOnQpType(opcode::ATOMIC_FETCH_AND_ADD),
        ),
        (
            with(&d, &slot, |d| {
                d.opcode = opcode::ATOMIC_CMP_AND_SWP;
                d.num_sge = 2;
            }),
            RC,
            DescError::AtomicSge { num: 2, len: 0 },
        ),
        (
            with(&d, &slot, |d| {
                d.opcode = opcode::ATOMIC_FETCH_AND_ADD;
                d.remote_addr = 4;
            }),
            RC,
            DescError::MisalignedAtomic(4),
        ),
        (
            with(&d, &slot, |d| {
                d.opcode = opcode::FLUSH;
                d.flush_type = 0;
            }),
            RC,
            DescError::BadFlush {
                placement: 0,
                level: 0,
            },
        ),
        (
            with(&d, &slot, |d| {
                d.opcode = opcode::FLUSH;
                d.flush_type = 1;
                d.flush_level = 2;
            }),
            RC,
            DescError::BadFlush {
                placement: 1,
                level: 2,
            },
        ),
    ];
    for (i, (s, limits, want)) in cases.into_iter().enumerate() {
        assert_eq!(err_of(&s, &limits), want, "case {i}");
    }
    // Atomic SGE of the wrong length, found once the SGE itself is read.
    let mut cas = SendWr::new(
        3,
        SendOp::FetchAdd {
            remote: Remote { addr: 8, rkey: 1 },
            add: 1,
        },
        vec![Sge {
            addr: 0,
            length: 4,
            lkey: 1,
        }],
    );
    assert_eq!(
        err_of(&slot_of(&cas), &RC),
        DescError::AtomicSge { num: 1, len: 4 }
    );
    cas.data = SendData::Sges(Default::default());
    assert_eq!(
        err_of(&slot_of(&cas), &RC),
        DescError::AtomicSge { num: 0, len: 0 }
    );
    // Lengths summing past 2^31.
    let big = SendWr::new(
        4,
        SendOp::Send,
        vec![
            Sge {
                addr: 0,
                length: u32::MAX,
                lkey: 1
            };
            2
        ],
    );
    assert_eq!(
        err_of(&slot_of(&big), &RC),
        DescError::LengthOverflow(2 * u64::from(u32::MAX))
    );
    // Each error maps to a completion status.
    assert_eq!(
        DescError::InlineOverQpMax { len: 1, max: 0 }.wc_status(),
        WcStatus::LocLenErr
    );
    assert_eq!(DescError::BadOpcode(1).wc_status(), WcStatus::LocQpOpErr);
    assert!(!DescError::UdWithoutDest.to_string().is_empty());
}

#[test]
fn bad_descriptor_is_consumed_with_its_wr_id() {
    let spec = sq_spec(4);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut p = ring.producer();
    let mut r = SqReader::new(ring.consumer(), RC);
    let mut d = SendDesc::new_zeroed();
    d.wr_id = 77;
    d.opcode = 99;
    p.push(d.as_bytes()).unwrap();
    let good = SendWr::new(78, SendOp::Send, vec![]);
    p.push(&slot_of(&good)).unwrap();
    let _ = p.publish();
    assert_eq!(
        r.read_send(),
        Err(ReadError::Desc {
            wr_id: 77,
            error: DescError::BadOpcode(99)
        })
    );
    assert_eq!(r.read_send().unwrap(), Some(good));
}

#[test]
fn header_check_reports_payload() {
    let mut wr = SendWr::new(1, SendOp::Send, vec![]);
    wr.data = SendData::Inline(vec![1, 2, 3]);
    let (d, _) = desc_of(&wr);
    assert_eq!(check_send_header(&d, &RC, 256), Ok(Payload::Inline(3)));
    assert_eq!(Payload::Inline(3).bytes(), 4);
    assert_eq!(
        encode_send(&wr, &mut [0u8; 64]),
        Err(EncodeError::SlotTooSmall(64))
    );
    wr.data = SendData::Inline(vec![0; 129]);
    assert_eq!(
        encode_send(&wr, &mut [0u8; 256]),
        Err(EncodeError::InlineTooLong(129))
    );
    let _ = SendFlags::default();
}

#[test]
fn sleep_and_wakeup_single_thread() {
    let spec = RingSpec::new(RingKind::Cq, 8, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let (mut p, mut c) = (ring.producer(), ring.consumer());
    // Polling consumer: no eventfd.
    p.push(&[1; 64]).unwrap();
    assert!(!p.publish());
    // Work raced in: the re-check sees it.
    assert_eq!(c.prepare_sleep(1), Ok(SleepCheck::Ready(1)));
    let mut out = [0u8; 64];
    assert!(c.pop_into(&mut out).unwrap());
    assert_eq!(c.prepare_sleep(1), Ok(SleepCheck::Sleep));
    p.push(&[2; 64]).unwrap();
    assert!(p.publish(), "sleeping consumer is woken");
    p.push(&[3; 64]).unwrap();
    assert!(!p.publish(), "one eventfd write per sleep");
    c.finish_sleep();
    // Batched wakeup: wake once 3 are ready.
    while c.pop_into(&mut out).unwrap() {}
    assert_eq!(c.prepare_sleep(3), Ok(SleepCheck::Sleep));
    p.push(&[4; 64]).unwrap();
    assert!(!p.publish());
    p.push(&[5; 64]).unwrap();
    p.push(&[6; 64]).unwrap();
    assert!(p.publish());
    assert!(need_wakeup_event_math());
}

fn need_wakeup_event_math() -> bool {
    use crate::ring::need_event;
    need_event(5, 6, 5)
        && !need_event(5, 5, 4)
        && need_event(u32::MAX, 1, u32::MAX - 1)
        && !need_event(3, 10, 4)
}

#[test]
fn eventfd_signal_and_wait() {
    let e = EventFd::new().unwrap();
    assert!(!e.wait(Some(std::time::Duration::from_millis(1))).unwrap());
    e.signal().unwrap();
    e.signal().unwrap();
    assert!(e.wait(None).unwrap());
    assert_eq!(e.drain().unwrap(), 0);
}

#[test]
fn memfd_region_maps_and_is_shared() {
    let a = SharedRegion::create("rocex-test", 10_000).unwrap();
    assert_eq!(a.len() % 4096, 0);
    let dup = a.fd().try_clone_to_owned().unwrap();
    let b = SharedRegion::from_fd(dup).unwrap();
    a.view().write(4096, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 4];
    b.view().read(4096, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
    // An unsealed memfd is refused.
    let raw = rustix::fs::memfd_create("unsealed", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&raw, 4096).unwrap();
    assert!(SharedRegion::from_fd(raw).is_err());
}

/// A deterministic descriptor for sequence number `i`, and its checksum contribution.
fn nth_wr(i: u64) -> SendWr {
    let r = Remote {
        addr: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !7,
        rkey: i as u32 ^ 0x5555,
    };
    let op = match i % 4 {
        0 => SendOp::Write(r),
        1 => SendOp::SendWithImm(i as u32),
        2 => SendOp::FetchAdd { remote: r, add: i },
        _ => SendOp::Read(r),
    };
    let n = if i % 4 == 2 { 1 } else { i % 3 };
    let sges = (0..n).map(|k| Sge {
        addr: i + k,
        length: 8,
        lkey: (i + k) as u32,
    });
    SendWr::new(i, op, sges)
}

fn checksum(wr: &SendWr) -> u64 {
    let mut h = wr.wr_id.wrapping_mul(31);
    if let SendData::Sges(s) = &wr.data {
        for s in s {
            h = h.wrapping_mul(131).wrapping_add(s.addr ^ u64::from(s.lkey));
        }
    }
    h ^ wr.length()
}

#[test]
fn two_threads_million_descriptors_over_memfd() {
    const N: u64 = 1_000_000;
    let spec = RingSpec::new(RingKind::Sq, 256, 256).unwrap();
    let region = SharedRegion::create("rocex-sq", spec.bytes()).unwrap();
    let ring = Ring::new(region.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let efd = EventFd::new().unwrap();
    let (sent, got) = std::thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut w = WqWriter::new(ring.producer(), spec);
            let mut sum = 0u64;
            let mut i = 0;
            while i < N {
                let wr = nth_wr(i);
                match w.post_send(&wr) {
                    Ok(()) => {
                        sum = sum.wrapping_add(checksum(&wr));
                        i += 1;
                        if i % 16 == 0 && w.publish() {
                            efd.signal().unwrap();
                        }
                    }
                    Err(PostError::Ring(RingError::Full)) => {
                        if w.publish() {
                            efd.signal().unwrap();
                        }
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            if w.publish() {
                efd.signal().unwrap();
            }
            sum
        });
        let mut r = SqReader::new(ring.consumer(), RC);
        let mut poll = AdaptivePoll::new(256);
        let mut sum = 0u64;
        let mut n = 0;
        while n < N {
            match r.read_send().unwrap() {
                Some(wr) => {
                    assert_eq!(wr, nth_wr(n));
                    sum = sum.wrapping_add(checksum(&wr));
                    n += 1;
                    poll.busy();
                    if n % 32 == 0 {
                        r.ring().release();
                    }
                }
                None => {
                    poll.idle(r.ring(), &efd, Some(std::time::Duration::from_secs(5)))
                        .unwrap();
                }
            }
        }
        r.ring().release();
        (producer.join().unwrap(), sum)
    });
    assert_eq!(sent, got);
}

#[test]
fn hostile_writer_never_panics_the_reader() {
    let spec = RingSpec::new(RingKind::Sq, 16, 256).unwrap();
    // The ring sits between two guard areas that must stay untouched and unread.
    let guard = 4096;
    let region = SharedRegion::create("rocex-hostile", guard * 2 + spec.bytes()).unwrap();
    let all = region.view();
    let ring_view = all.sub(guard, spec.bytes()).unwrap();
    let ring = Ring::new(ring_view, spec).unwrap();
    ring.init(4, 64).unwrap();
    all.write(0, &[0xAA; 4096]).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut ok, mut desc_err, mut ring_err) = (0u64, 0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = fastrand::Rng::with_seed(7);
            let words = spec.bytes() / 4;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..64 {
                    let w = rng.usize(..words) * 4;
                    let v = match rng.u8(..4) {
                        0 => rng.u32(..),
                        1 => rng.u32(..40),
                        2 => 0,
                        _ => rng.u32(..) & 0x0f0f,
                    };
                    ring_view.write(w, &v.to_ne_bytes()).unwrap();
                }
                std::thread::yield_now();
            }
        });
        let mut r = SqReader::new(ring.consumer(), RC);
        let limits = [
            RC,
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
        ];
        let start = std::time::Instant::now();
        let mut k = 0;
        while start.elapsed() < std::time::Duration::from_millis(700) {
            match r.read_send() {
                Ok(Some(_)) => ok += 1,
                Ok(None) => {}
                Err(ReadError::Desc { .. }) => desc_err += 1,
                Err(ReadError::Ring(_)) => {
                    ring_err += 1;
                    // Start over the way a daemon would after resetting the QP.
                    k += 1;
                    r = SqReader::new(ring.consumer(), limits[k % 2]);
                    ring.reset(0);
                }
            }
            r.ring().release();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut b = [0u8; 4096];
    all.read(0, &mut b).unwrap();
    assert!(
        b.iter().all(|&x| x == 0xAA),
        "guard before the ring changed"
    );
    all.read(guard + spec.bytes().next_multiple_of(4096), &mut b)
        .unwrap();
    assert!(b.iter().all(|&x| x == 0), "guard after the ring changed");
    assert!(ring_err + desc_err > 0, "the scribbler produced no faults");
    eprintln!("hostile: {ok} accepted, {desc_err} descriptor errors, {ring_err} ring errors");
}

#[test]
fn random_slots_only_error() {
    let mut rng = fastrand::Rng::with_seed(1);
    let mut slot = vec![0u8; 256];
    for i in 0..200_000 {
        rng.fill(&mut slot);
        if i % 2 == 0 {
            // Keep most fields plausible so deeper checks run.
            slot[8] = rng.u8(..16);
            slot[9] = rng.u8(..6);
            slot[10..12].copy_from_slice(&(rng.u16(..16)).to_ne_bytes());
            slot[12..16].copy_from_slice(&(rng.u32(..140) * u32::from(rng.bool())).to_ne_bytes());
            slot[54] = [0, 4, 6][rng.usize(..3)];
            slot[55] = 0;
            slot[80..128].fill(0);
        }
        for limits in [
            RC,
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            SqLimits {
                qp_type: QpType::Uc,
                max_sge: 0,
                max_inline: 0,
            },
        ] {
            let _ = validate_send(&slot, &limits);
        }
    }
}

/// A second process: the test binary maps the memfd it receives over a Unix socket and
/// produces into it; this process consumes.
#[test]
fn two_processes_share_a_ring() {
    const N: u64 = 20_000;
    let spec = RingSpec::new(RingKind::Sq, 64, 256).unwrap();
    if let Ok(path) = std::env::var("ROCEX_SHM_CHILD") {
        let sock = std::os::unix::net::UnixStream::connect(path).unwrap();
        let mut buf = [0u8; 8];
        let (_, mut fds) =
            crate::region::recv_fds(rustix::fd::AsFd::as_fd(&sock), &mut buf, 2).unwrap();
        let efd = EventFd::from_fd(fds.pop().unwrap());
        let region = SharedRegion::from_fd(fds.pop().unwrap()).unwrap();
        let ring = Ring::new(region.view(), spec).unwrap();
        let mut w = WqWriter::new(ring.producer(), spec);
        let mut i = 0;
        while i < N {
            match w.post_send(&nth_wr(i)) {
                Ok(()) => i += 1,
                Err(_) => std::thread::yield_now(),
            }
            if w.publish() {
                efd.signal().unwrap();
            }
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocex-shm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::two_processes_share_a_ring",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ROCEX_SHM_CHILD", &path)
        .spawn()
        .unwrap();
    let region = SharedRegion::create("rocex-2proc", spec.bytes()).unwrap();
    let ring = Ring::new(region.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let efd = EventFd::new().unwrap();
    let (sock, _) = listener.accept().unwrap();
    crate::region::send_fds(
        rustix::fd::AsFd::as_fd(&sock),
        b"ring",
        &[region.fd(), rustix::fd::AsFd::as_fd(&efd)],
    )
    .unwrap();
    let mut r = SqReader::new(ring.consumer(), RC);
    let mut poll = AdaptivePoll::new(1000);
    let mut n = 0;
    while n < N {
        match r.read_send().unwrap() {
            Some(wr) => {
                assert_eq!(wr, nth_wr(n));
                n += 1;
                poll.busy();
                r.ring().release();
            }
            None => poll
                .idle(r.ring(), &efd, Some(std::time::Duration::from_millis(100)))
                .unwrap(),
        }
    }
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
