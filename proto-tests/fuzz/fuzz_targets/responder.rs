//! The engine fed hostile packets that pass the ICRC check: an RC QP in RTS, with a
//! registered region and posted receives, takes a sequence of transport packets (each
//! input is split on a 2-byte length prefix) aimed at it from its connected peer, and
//! whatever it answers is drained. Nothing may panic, and the QP may only end in RTS or
//! ERROR.
#![no_main]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use rocex_proto::verbs::{AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, RecvWr, Sge};
use rocex_proto::{Access, Config, Engine, IcrcStatus, Instant, QpInit, VecRegion};

fuzz_target!(|data: &[u8]| {
    let local: IpAddr = [198, 18, 0, 1].into();
    let peer = SocketAddr::new([198, 18, 0, 2].into(), 4791);
    let mut e = Engine::new(Config::new(local, [1; 32]));
    let pd = e.alloc_pd();
    let cq = e.create_cq(64).unwrap();
    let qpn = e.create_qp(QpInit::rc(pd, cq, QpCap::default())).unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let keys = e.reg_mr(pd, 0x1000, 4096, access, Arc::new(VecRegion::new(4096))).unwrap();
    let mut a = QpAttr { qp_state: QpState::Init, qp_access_flags: access, ..QpAttr::default() };
    e.modify_qp(qpn, &a, AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS).unwrap();
    a.qp_state = QpState::Rtr;
    a.ah_attr = Some(AddressVector { dest: peer.ip() });
    a.path_mtu = Mtu::M1024;
    a.dest_qp_num = 0x11;
    a.max_dest_rd_atomic = 4;
    let m = AttrMask::STATE | AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN;
    e.modify_qp(qpn, &a, m | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER).unwrap();
    a.qp_state = QpState::Rts;
    a.timeout = 1;
    a.max_rd_atomic = 4;
    let m = AttrMask::STATE | AttrMask::SQ_PSN | AttrMask::TIMEOUT | AttrMask::RETRY_CNT | AttrMask::RNR_RETRY;
    e.modify_qp(qpn, &a, m | AttrMask::MAX_QP_RD_ATOMIC).unwrap();
    for i in 0..4 {
        let wr = RecvWr::new(i, [Sge { addr: 0x1000 + i * 1024, length: 1024, lkey: keys.lkey }]);
        e.post_recv(Instant::ZERO, qpn, wr).unwrap();
    }
    let mut rest = data;
    let mut now = 0u64;
    let mut buf = vec![0u8; 9000];
    while rest.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let mut pkt = rest[2..2 + n].to_vec();
        rest = &rest[2 + n..];
        // Aim it at the QP so that parsing is not the only thing exercised.
        if pkt.len() >= 8 {
            pkt[5..8].copy_from_slice(&qpn.to_be_bytes()[1..]);
        }
        now += 1_000;
        let t = Instant::from_nanos(now);
        e.handle_packet(t, peer, local, &pkt, IcrcStatus::Valid);
        e.handle_timeout(t);
        while e.poll_transmit(t, &mut buf).is_some() {}
        while e.poll_cq(cq).is_some() {}
    }
    let state = e.query_qp(qpn).unwrap().0.qp_state;
    assert!(matches!(state, QpState::Rts | QpState::Err), "{state:?}");
});
