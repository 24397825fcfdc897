use core::net::IpAddr;

use rocex_verbs_types::{Access, AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType};

use super::*;

fn attr() -> QpAttr {
    QpAttr {
        qp_state: QpState::Rtr,
        qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_READ,
        pkey_index: 0,
        port_num: 1,
        qkey: 0x1111_1111,
        ah_attr: Some(AddressVector {
            dest: IpAddr::from([198, 18, 0, 2]),
        }),
        traffic_class: 0x68,
        path_mtu: Mtu::M4096,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 6,
        rq_psn: 0xabcdef,
        sq_psn: 0x123456,
        max_rd_atomic: 16,
        max_dest_rd_atomic: 8,
        min_rnr_timer: 12,
        dest_qp_num: 0x00fe_dcba,
    }
}

fn requests() -> Vec<Request> {
    let cap = QpCap::default();
    vec![
        Request::Hello { abi_version: 1 },
        Request::QueryDevice,
        Request::AllocPd,
        Request::DeallocPd { pd: 3 },
        Request::RegMrShared {
            pd: 1,
            iova: 0x7000_0000,
            offset: 4096,
            len: 1 << 20,
            access: 7,
        },
        Request::RegMrProcess {
            pd: 1,
            addr: 0xdead_0000,
            len: 64,
            access: 1,
        },
        Request::DeregMr { lkey: 0x1234 },
        Request::CreateCompChannel,
        Request::CreateCq {
            cqe: 256,
            channel: 2,
        },
        Request::DestroyCq { cq: 9 },
        Request::ResizeCq { cq: 9, cqe: 1000 },
        Request::AllocMw { pd: 3, type1: true },
        Request::DeallocMw { rkey: 0x1234_5601 },
        Request::BindMw(BindMw {
            qpn: 0x11,
            mw_rkey: 0x1234_5601,
            key: 2,
            mr_lkey: 0x77,
            addr: 0x7000_0040,
            len: 64,
            access: 2,
        }),
        Request::LocalInv {
            qpn: 0x11,
            rkey: 0x1234_5602,
        },
        Request::CreateQp {
            pd: 1,
            qp_type: QpType::Ud,
            send_cq: 1,
            recv_cq: 2,
            cap,
        },
        Request::ModifyQp {
            qpn: 0x11,
            mask: AttrMask::STATE | AttrMask::AV,
            attr: attr(),
        },
        Request::ModifyQp {
            qpn: 0x11,
            mask: AttrMask::STATE,
            attr: QpAttr {
                ah_attr: Some(AddressVector {
                    dest: "fd00::1".parse().unwrap(),
                }),
                ..QpAttr::default()
            },
        },
        Request::QueryQp { qpn: 0x22 },
        Request::DestroyQp { qpn: 0x33 },
        Request::Stat { qpn: 0, cursor: 0 },
        Request::Stat {
            qpn: 0x44,
            cursor: 7,
        },
        Request::CmListen {
            ps: 0x0106,
            port: 7471,
        },
        Request::CmUnlisten {
            ps: 0x0111,
            port: 7471,
        },
        Request::CmConnect {
            qpn: 0x12,
            ud: false,
            addr: IpAddr::from([198, 18, 0, 2]),
            port: 7471,
            src_port: 0,
            tos: 0,
            private_data: vec![1, 2, 3],
        },
        Request::CmConnect {
            qpn: 0x12,
            ud: true,
            addr: "fd00::2".parse().unwrap(),
            port: 1,
            src_port: 40000,
            tos: 0xb8,
            private_data: vec![0xa5; CM_SIDR_PRIVATE_DATA_LEN],
        },
        Request::CmAccept {
            id: 5,
            qpn: 0x13,
            qkey: 0x1111_1111,
            private_data: vec![0x5a; CM_REP_PRIVATE_DATA_LEN],
        },
        Request::CmReject {
            id: 6,
            private_data: vec![0xc3; CM_REJ_PRIVATE_DATA_LEN],
        },
        Request::CmDisconnect { id: 7 },
        Request::CmEstablish { id: 8 },
        Request::CmPoll,
        Request::OpenDirect,
    ]
}

fn grant() -> DirectGrant {
    DirectGrant {
        slot: 31,
        slot_bits: 5,
        addr: IpAddr::from([198, 18, 0, 1]),
        mtu: 5,
        max_qp: 1 << 16,
        max_cqe: 1 << 16,
        selective_repeat: true,
        window: 128,
        rxe_recovery: false,
        ecn: true,
        no_gso: false,
        no_gro: true,
        peers_are_rocex: true,
        tos: 26 << 2 | 2,
    }
}

fn stats() -> Stats {
    Stats {
        groups: vec![
            StatGroup {
                name: "engine".into(),
                counters: vec![("sent_pkts".into(), 12), ("rcvd_pkts".into(), u64::MAX)],
            },
            StatGroup {
                name: "daemon".into(),
                counters: vec![],
            },
        ],
        qps: vec![QpStat {
            qpn: 0x12_3456,
            qp_type: QpType::Rc,
            state: QpState::Rts,
            counters: vec![("sq_psn".into(), 99)],
        }],
        next: 0x12_3457,
    }
}

#[test]
fn stat_lengths_and_lookup() {
    let s = stats();
    let without = Stats {
        qps: vec![],
        ..s.clone()
    };
    assert_eq!(
        s.encoded_len(),
        without.encoded_len() + s.qps[0].encoded_len()
    );
    assert_eq!(s.encoded_len(), Response::Stat(s.clone()).encode().len());
    assert_eq!(s.get_counter("engine", "rcvd_pkts"), Some(u64::MAX));
    assert_eq!(s.get_counter("daemon", "rcvd_pkts"), None);
    let mut b = Response::Stat(s).encode();
    // The QP's state byte: after the groups, the QP count, the QPN and the type.
    let at = without.encoded_len() - 6 + 2 + 4 + 1;
    b[at] = 9;
    assert!(matches!(
        Response::decode(kind::STAT | kind::RESPONSE, &b),
        Err(BodyError::BadValue {
            field: "qp_state",
            ..
        })
    ));
    // A counter count far beyond the body is refused without allocating for it.
    let huge = [1, 1, b'e', 0xff, 0xff];
    assert!(Response::decode(kind::STAT | kind::RESPONSE, &huge).is_err());
}

fn responses() -> Vec<Response> {
    vec![
        Response::Hello {
            abi_version: 1,
            daemon_pid: 42,
        },
        Response::QueryDevice(DeviceAttr {
            max_qp: 1,
            max_qp_wr: 2,
            max_sge: 3,
            max_cq: 4,
            max_cqe: 5,
            max_mr: 6,
            max_pd: 7,
            max_qp_rd_atom: 8,
            max_inline: 9,
            gid: [7; 16],
            mtu: 5,
            port_state: 4,
        }),
        Response::AllocPd { pd: 5 },
        Response::RegMr {
            kind: kind::REG_MR_SHARED,
            lkey: 1,
            rkey: 2,
        },
        Response::RegMr {
            kind: kind::REG_MR_PROCESS,
            lkey: 3,
            rkey: 4,
        },
        Response::CreateCompChannel { channel: 1 },
        Response::CreateCq {
            cq: 1,
            slots: 256,
            ring_offset: 4096,
        },
        Response::ResizeCq {
            slots: 1024,
            ring_offset: 4096,
        },
        Response::AllocMw { rkey: 0x1234_5600 },
        Response::BindMw { rkey: 0x1234_5601 },
        Response::Done(kind::DEALLOC_MW),
        Response::Done(kind::LOCAL_INV),
        Response::CreateQp(QpCreated {
            qpn: 0x99,
            cap: QpCap::default(),
            sq_offset: 4096,
            sq_slots: 256,
            sq_slot_size: 256,
            rq_offset: 8192,
            rq_slots: 256,
            rq_slot_size: 128,
        }),
        Response::QueryQp {
            attr: attr(),
            cap: QpCap::default(),
        },
        Response::Stat(stats()),
        Response::Stat(Stats::default()),
        Response::Done(kind::DESTROY_QP),
        Response::Done(kind::MODIFY_QP),
        Response::Done(kind::CM_LISTEN),
        Response::Done(kind::CM_UNLISTEN),
        Response::Done(kind::CM_ESTABLISH),
        Response::CmConnect { id: 9 },
        Response::CmPoll(None),
        Response::CmPoll(Some(CmEvent {
            kind: CmEventKind::ConnectRequest,
            id: 3,
            peer: IpAddr::from([198, 18, 0, 1]),
            port: 7471,
            reason: 0,
            private_data: vec![7; 40],
            ps: 0x0106,
            peer_port: 0xc123,
            qkey: 0,
            conn: CmConn {
                remote_qpn: 0x11,
                sq_psn: 0xabcdef,
                rq_psn: 0x123456,
                path_mtu: 3,
                max_rd_atomic: 16,
                max_dest_rd_atomic: 16,
                retry_cnt: 6,
                rnr_retry: 7,
                timeout: 17,
                traffic_class: 0xb8,
            },
        })),
        Response::CmPoll(Some(CmEvent {
            kind: CmEventKind::Rejected,
            id: 4,
            peer: "fd00::1".parse().unwrap(),
            port: 0,
            reason: 8,
            private_data: vec![],
            ps: 0x0106,
            peer_port: 0,
            qkey: 0,
            conn: CmConn::default(),
        })),
        Response::CmPoll(Some(CmEvent {
            kind: CmEventKind::Established,
            id: 5,
            peer: IpAddr::from([198, 18, 0, 2]),
            port: 0,
            reason: 0,
            private_data: vec![0x3c; CM_REP_PRIVATE_DATA_LEN],
            ps: 0x0111,
            peer_port: 0,
            qkey: 0x0123_4567,
            conn: CmConn {
                remote_qpn: 0x2a,
                ..CmConn::default()
            },
        })),
        Response::Direct(grant()),
        Response::Direct(DirectGrant {
            slot: 1,
            addr: "fd00::1".parse().unwrap(),
            mtu: 1,
            selective_repeat: false,
            ecn: false,
            no_gso: true,
            peers_are_rocex: false,
            rxe_recovery: true,
            tos: 0,
            ..grant()
        }),
        Response::error(22, "bad attribute: path_mtu – ü"),
    ]
}

#[test]
fn requests_round_trip() {
    for r in requests() {
        let b = r.encode();
        assert_eq!(Request::decode(r.kind(), &b), Ok(r.clone()), "{r:?}");
        // Framed and back.
        let f = encode_frame(r.kind(), 9, &b).unwrap();
        let h = decode_header(&f).unwrap();
        assert_eq!(h.body_len, b.len());
        assert_eq!(Request::decode(h.kind, &f[HEADER_LEN..]), Ok(r));
    }
}

#[test]
fn responses_round_trip() {
    for r in responses() {
        let b = r.encode();
        assert_eq!(Response::decode(r.kind(), &b), Ok(r.clone()), "{r:?}");
    }
    assert_eq!(response_fds(kind::CREATE_QP | kind::RESPONSE), 2);
    assert_eq!(response_fds(kind::CREATE_CQ | kind::RESPONSE), 1);
    assert_eq!(response_fds(kind::OPEN_DIRECT | kind::RESPONSE), 2);
    assert_eq!(Request::fds(kind::OPEN_DIRECT), 0);
    assert_eq!(Request::fds(kind::REG_MR_SHARED), 1);
    assert_eq!(Request::fds(kind::HELLO), 0);
}

#[test]
fn truncated_and_padded_bodies_are_refused() {
    for r in requests() {
        let b = r.encode();
        for n in 0..b.len() {
            assert!(
                matches!(
                    Request::decode(r.kind(), &b[..n]),
                    Err(BodyError::Short { .. })
                ),
                "{r:?} cut at {n}"
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(
            Request::decode(r.kind(), &long),
            Err(BodyError::Trailing { extra: 1, .. })
        ));
    }
    for r in responses() {
        let b = r.encode();
        for n in 0..b.len() {
            assert!(
                Response::decode(r.kind(), &b[..n]).is_err(),
                "{r:?} cut at {n}"
            );
        }
    }
}

#[test]
fn bad_values_are_refused() {
    let mut b = Request::CreateQp {
        pd: 1,
        qp_type: QpType::Rc,
        send_cq: 1,
        recv_cq: 1,
        cap: QpCap::default(),
    }
    .encode();
    b[4] = 9;
    assert!(matches!(
        Request::decode(kind::CREATE_QP, &b),
        Err(BodyError::BadValue {
            field: "qp_type",
            ..
        })
    ));
    let good = Request::ModifyQp {
        qpn: 1,
        mask: AttrMask::STATE,
        attr: attr(),
    }
    .encode();
    let mut b = good.clone();
    b[4..8].copy_from_slice(&(1u32 << 25).to_le_bytes());
    assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
    let mut b = good.clone();
    b[8] = 7; // qp_state
    assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
    let mut b = good.clone();
    b[8 + 12] = 5; // ah family
    assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
    let mut b = good.clone();
    b[8 + 13 + 16 + 1] = 0; // path_mtu, after the traffic class
    assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
    let mut b = good;
    b[8 + 13 + 15] = 1; // nonzero padding after an IPv4 address
    assert!(Request::decode(kind::MODIFY_QP, &b).is_err());
    let mut b = requests()
        .into_iter()
        .find(|r| matches!(r, Request::CmConnect { .. }))
        .unwrap()
        .encode();
    b[4] = 2; // ud, after the QPN: a flag
    assert!(matches!(
        Request::decode(kind::CM_CONNECT, &b),
        Err(BodyError::BadValue {
            field: "ud",
            value: 2,
            ..
        })
    ));
    assert_eq!(Request::decode(0x8001, &[]), Err(BodyError::Kind(0x8001)));
    assert_eq!(Response::decode(kind::HELLO, &[]), Err(BodyError::Kind(1)));
    let mut e = Response::error(1, "x").encode();
    e[6] = 0xff;
    assert_eq!(Response::decode(kind::ERROR, &e), Err(BodyError::Utf8));
}

#[test]
fn a_grant_out_of_range_is_refused() {
    let good = Response::Direct(grant()).encode();
    let k = kind::OPEN_DIRECT | kind::RESPONSE;
    let refused = |at: usize, v: &[u8], field: &str| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        match Response::decode(k, &b) {
            Err(BodyError::BadValue { field: f, .. }) => assert_eq!(f, field, "{v:?} at {at}"),
            other => panic!("{v:?} at {at}: {other:?}"),
        }
    };
    refused(0, &0u32.to_le_bytes(), "slot"); // slot 0 is the daemon's
    refused(0, &32u32.to_le_bytes(), "slot"); // past 5 bits
    refused(4, &[0], "slot_bits");
    refused(4, &[9], "slot_bits");
    refused(5, &[5], "family");
    refused(22, &[0], "mtu");
    refused(22, &[6], "mtu");
    refused(31, &[0x40], "flags");
    // A wider slot with more bits is fine.
    let mut b = good.clone();
    b[0..4].copy_from_slice(&200u32.to_le_bytes());
    b[4] = 8;
    assert!(matches!(Response::decode(k, &b), Ok(Response::Direct(g)) if g.slot == 200));
}

#[test]
fn random_bodies_never_panic() {
    let mut rng = fastrand::Rng::with_seed(5);
    for _ in 0..20_000 {
        let k = rng.u16(0..=kind::OPEN_DIRECT + 1);
        let n = rng.usize(0..80);
        let b: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
        let _ = Request::decode(k, &b);
        let _ = Response::decode(k | kind::RESPONSE, &b);
        let _ = Response::decode(kind::ERROR, &b);
    }
}
