//! QPN 1, the GSI: a UD QP that carries the CM's MADs with Q_Key 0x80010000 from QP1 to
//! QP1, as rxe's GSI QP does (rxe-behaviour.md §1.1).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rocex_proto::verbs::{AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, SendWr, Sge, UdDest};
use rocex_proto::{
    Access, Config, Engine, GRH_LEN, GSI_QPN, IcrcStatus, Instant, QpInit, VecRegion, VerbsError,
};
use rocex_wire::PacketRepr;

const GSI_QKEY: u32 = 0x8001_0000;
const BUF: u64 = 0x1000;

struct Node {
    e: Engine,
    cq: u32,
    lkey: u32,
    mem: Arc<VecRegion>,
}

fn gsi_node(local: IpAddr) -> Node {
    let mut e = Engine::new(Config::new(local, [3; 32]));
    let pd = e.alloc_pd();
    let cq = e.create_cq(16).unwrap();
    let mem = Arc::new(VecRegion::new(4096));
    let keys = e
        .reg_mr(pd, BUF, 4096, Access::LOCAL_WRITE, mem.clone())
        .unwrap();
    let init = QpInit {
        qp_type: QpType::Ud,
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap: QpCap::default(),
    };
    assert_eq!(e.create_qp_with_qpn(init, GSI_QPN), Ok(1));
    let mut a = QpAttr {
        qp_state: QpState::Init,
        qkey: GSI_QKEY,
        ..QpAttr::default()
    };
    e.modify_qp(
        1,
        &a,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
    )
    .unwrap();
    a.qp_state = QpState::Rtr;
    e.modify_qp(1, &a, AttrMask::STATE).unwrap();
    a.qp_state = QpState::Rts;
    e.modify_qp(1, &a, AttrMask::STATE | AttrMask::SQ_PSN)
        .unwrap();
    Node {
        e,
        cq,
        lkey: keys.lkey,
        mem,
    }
}

#[test]
fn qpn_1_is_allowed_only_for_a_ud_qp() {
    let mut e = Engine::new(Config::new([198, 18, 0, 1].into(), [1; 32]));
    let pd = e.alloc_pd();
    let cq = e.create_cq(4).unwrap();
    let mut init = QpInit::rc(pd, cq, QpCap::default());
    assert!(matches!(
        e.create_qp_with_qpn(init, GSI_QPN),
        Err(VerbsError::BadAttribute(_))
    ));
    init.qp_type = QpType::Ud;
    assert!(matches!(
        e.create_qp_with_qpn(init, 2),
        Err(VerbsError::BadAttribute(_))
    ));
    assert_eq!(e.create_qp_with_qpn(init, GSI_QPN), Ok(1));
    assert!(matches!(
        e.create_qp_with_qpn(init, GSI_QPN),
        Err(VerbsError::BadAttribute(_))
    ));
}

#[test]
fn a_mad_travels_from_qp1_to_qp1_with_the_gsi_qkey() {
    let (ip_a, ip_b): (IpAddr, IpAddr) = ([198, 18, 0, 1].into(), [198, 18, 0, 2].into());
    let mut a = gsi_node(ip_a);
    let mut b = gsi_node(ip_b);
    let now = Instant::ZERO;
    let recv = RecvWr {
        wr_id: 7,
        sges: vec![Sge {
            addr: BUF,
            length: (GRH_LEN + 256) as u32,
            lkey: b.lkey,
        }]
        .into(),
    };
    b.e.post_recv(now, 1, recv).unwrap();
    let mad: Vec<u8> = (0..=255).collect();
    let mut wr = SendWr::new(9, rocex_proto::verbs::SendOp::Send, vec![]);
    wr.data = rocex_proto::verbs::SendData::Inline(mad.clone());
    wr.ud = Some(UdDest {
        dest: ip_b,
        remote_qpn: GSI_QPN,
        remote_qkey: GSI_QKEY,
    });
    // The inline limit of the default capabilities is 256: exactly one MAD.
    a.e.post_send(now, 1, wr).unwrap();
    let mut buf = vec![0u8; 4096 + 80];
    let t = a.e.poll_transmit(now, &mut buf).expect("the MAD goes out");
    let (pkt, _) = PacketRepr::parse(&buf[..t.len]).unwrap();
    assert_eq!(pkt.bth.dest_qp, 1);
    let deth = pkt.deth.expect("a UD packet has a DETH");
    assert_eq!((deth.qkey, deth.src_qp), (GSI_QKEY, 1));
    b.e.handle_packet(
        now,
        SocketAddr::new(ip_a, 4791),
        ip_b,
        &buf[..t.len],
        IcrcStatus::Valid,
    );
    let wc = b.e.poll_cq(b.cq).expect("a receive completion");
    assert_eq!((wc.wr_id, wc.src_qp, wc.qp_num), (7, 1, 1));
    assert_eq!(wc.byte_len as usize, GRH_LEN + 256);
    let got = b.mem.snapshot();
    assert_eq!(&got[GRH_LEN..GRH_LEN + 256], &mad[..]);
    assert!(a.e.poll_cq(a.cq).is_some());
}
