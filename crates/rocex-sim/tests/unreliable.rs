//! UC and UD queue pairs: no acknowledgements, whole messages or nothing.

mod common;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rocex_proto::verbs::{
    AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendOp, SendWr, Sge, UdDest, WcOpcode,
    WcStatus,
};
use rocex_proto::{Access, Config, Engine, GRH_LEN, QpInit, Region, VecRegion};
use rocex_sim::{Fabric, Link};

/// Two UC QPs, MTU 1024, over a 5 us link.
fn uc_pair(seed: u64) -> Pair {
    let p = Params {
        qp_type: QpType::Uc,
        mtu: Mtu::M1024,
        ..Params::default()
    };
    Pair::new(seed, Link::with_delay(Duration::from_micros(5)), p)
}

#[test]
fn uc_send_and_write_arrive_whole() {
    let mut p = uc_pair(4);
    let (a, b) = (p.side('a'), p.side('b'));
    write_bytes(&a, 0, &pattern(1, 5000));
    p.post_recv(&b, 1, 65536, 8192);
    p.post(&a, 1, SendOp::Send, 0, 5000);
    let write = SendOp::WriteWithImm(remote(&b, 1 << 19), 77);
    p.post(&a, 2, write, 0, 3000);
    p.post_recv(&b, 2, 0, 16);
    let sent = p.completions(&a, 2, Duration::from_millis(10));
    assert_ok(&sent);
    let got = p.completions(&b, 2, Duration::from_millis(10));
    assert_eq!((got[0].opcode, got[0].byte_len), (WcOpcode::Recv, 5000));
    assert_eq!(
        (got[1].opcode, got[1].imm_data),
        (WcOpcode::RecvRdmaWithImm, Some(77))
    );
    assert_eq!(read_bytes(&b, 65536, 5000), pattern(1, 5000));
    assert_eq!(read_bytes(&b, 1 << 19, 3000), pattern(1, 3000));
    assert_eq!(
        p.fabric.node(a.node).counters().rcvd_pkts,
        0,
        "UC sends no ACKs"
    );
}

#[test]
fn uc_drops_a_message_that_lost_a_packet() {
    let mut p = uc_pair(5);
    let (a, b) = (p.side('a'), p.side('b'));
    // Lose the second packet of the first message.
    let mut n = 0;
    p.fabric.intercept(move |from, _, _| {
        n += 1;
        !(from == 0 && n == 2)
    });
    write_bytes(&a, 0, &pattern(2, 3000));
    for i in 0..2 {
        p.post_recv(&b, i, 65536 * (i + 1), 8192);
    }
    p.post(&a, 1, SendOp::Send, 0, 3000);
    p.post(&a, 2, SendOp::Send, 0, 2000);
    assert_ok(&p.completions(&a, 2, Duration::from_millis(10)));
    let got = p.completions(&b, 2, Duration::from_millis(10));
    assert_eq!(got.len(), 1, "only the whole message arrives");
    assert_eq!(
        (got[0].wr_id, got[0].byte_len),
        (0, 2000),
        "into the first receive, which the broken message gave back"
    );
    assert_eq!(read_bytes(&b, 65536, 2000), pattern(2, 2000));
}

struct Ud {
    node: usize,
    addr: IpAddr,
    qpn: u32,
    cq: u32,
    lkey: u32,
    buf: Arc<VecRegion>,
}

const QKEY: u32 = 0x1111_1111;

fn ud_side(f: &mut Fabric, i: u8) -> Ud {
    let addr: IpAddr = [198, 18, 0, i].into();
    let mut e = Engine::new(Config::new(addr, [i; 32]));
    let pd = e.alloc_pd();
    let cq = e.create_cq(64).unwrap();
    let qpn = e
        .create_qp(QpInit {
            qp_type: QpType::Ud,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
        })
        .unwrap();
    let buf = Arc::new(VecRegion::new(1 << 16));
    let lkey = e
        .reg_mr(pd, 0x1000, 1 << 16, Access::LOCAL_WRITE, buf.clone())
        .unwrap()
        .lkey;
    let mut a = QpAttr {
        qp_state: QpState::Init,
        qkey: QKEY,
        ..QpAttr::default()
    };
    e.modify_qp(
        qpn,
        &a,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY,
    )
    .unwrap();
    a.qp_state = QpState::Rtr;
    e.modify_qp(qpn, &a, AttrMask::STATE).unwrap();
    a.qp_state = QpState::Rts;
    a.sq_psn = 1;
    e.modify_qp(qpn, &a, AttrMask::STATE | AttrMask::SQ_PSN)
        .unwrap();
    Ud {
        node: f.add(e),
        addr,
        qpn,
        cq,
        lkey,
        buf,
    }
}

#[test]
fn ud_datagrams_carry_a_grh_and_the_source_qp() {
    let mut f = Fabric::new(6, Link::with_delay(Duration::from_micros(5)));
    let (a, b) = (ud_side(&mut f, 1), ud_side(&mut f, 2));
    let now = f.now();
    let recv = RecvWr {
        wr_id: 5,
        sges: vec![Sge {
            addr: 0x1000,
            length: 2048 + GRH_LEN as u32,
            lkey: b.lkey,
        }]
        .into(),
    };
    f.node(b.node).post_recv(now, b.qpn, recv).unwrap();
    a.buf.write(0, &pattern(3, 1000));
    let mut w = SendWr::new(
        9,
        SendOp::SendWithImm(0xfeed),
        vec![Sge {
            addr: 0x1000,
            length: 1000,
            lkey: a.lkey,
        }],
    );
    w.ud = Some(UdDest {
        dest: b.addr,
        remote_qpn: b.qpn,
        remote_qkey: QKEY,
    });
    f.node(a.node).post_send(now, a.qpn, w.clone()).unwrap();
    // A wrong Q_Key is dropped.
    w.ud = Some(UdDest {
        dest: b.addr,
        remote_qpn: b.qpn,
        remote_qkey: 7,
    });
    f.node(a.node).post_send(now, a.qpn, w).unwrap();
    f.run_until(now + Duration::from_millis(1), |_| false);
    let sent: Vec<_> = std::iter::from_fn(|| f.node(a.node).poll_cq(a.cq)).collect();
    assert_eq!(
        sent.iter().map(|w| w.status).collect::<Vec<_>>(),
        [WcStatus::Success; 2]
    );
    let got: Vec<_> = std::iter::from_fn(|| f.node(b.node).poll_cq(b.cq)).collect();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].byte_len as usize, got[0].src_qp, got[0].imm_data),
        (GRH_LEN + 1000, a.qpn, Some(0xfeed))
    );
    let mut data = vec![0u8; 1000];
    b.buf.read(GRH_LEN as u64, &mut data);
    assert_eq!(data, pattern(3, 1000));
    let mut grh = [0u8; GRH_LEN];
    b.buf.read(0, &mut grh);
    assert_eq!(
        &grh[32..36],
        &[198, 18, 0, 1],
        "the IPv4 source in the GRH's last 20 bytes"
    );
    assert_eq!(f.node(b.node).counters().drop_bad_qkey, 1);
    // A datagram larger than the port MTU is refused at post time.
    let mut big = SendWr::new(
        1,
        SendOp::Send,
        vec![Sge {
            addr: 0x1000,
            length: 4096,
            lkey: a.lkey,
        }],
    );
    big.ud = Some(UdDest {
        dest: b.addr,
        remote_qpn: b.qpn,
        remote_qkey: QKEY,
    });
    assert!(f.node(a.node).post_send(now, a.qpn, big).is_err());
    let _ = a.addr;
}
