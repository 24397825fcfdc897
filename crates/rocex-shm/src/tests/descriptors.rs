//! Descriptors through the rings: every operation, UD destinations, receives and CQEs,
//! and every validation error.

use super::*;

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
