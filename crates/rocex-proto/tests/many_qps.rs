//! Thousands of RC QPs active at once (performance goal 5's scale): every QP's WRITE is
//! sent in turn, lands where it was aimed and completes exactly once, with all QPs queued
//! to send at the same time.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rocex_proto::verbs::{
    AddressVector, Mtu, QpAttr, QpCap, QpType, Remote, SendOp, SendWr, Sge, WcStatus,
};
use rocex_proto::{Access, Config, Engine, IcrcStatus, Instant, Keys, QpInit, Region, VecRegion};

const QPS: usize = 4096;
/// Two packets per WRITE at MTU 4096, so that every QP needs more than one turn.
const SIZE: u32 = 8192;

struct Node {
    e: Engine,
    addr: IpAddr,
    cq: u32,
    qpns: Vec<u32>,
    keys: Keys,
    mem: Arc<VecRegion>,
}

fn node(i: u8) -> Node {
    let addr: IpAddr = [198, 18, 208, i].into();
    let mut c = Config::new(addr, [i; 32]);
    c.port_mtu = Mtu::M4096;
    let mut e = Engine::new(c);
    let pd = e.alloc_pd();
    let cq = e.create_cq(QPS).unwrap();
    let len = QPS * SIZE as usize;
    let mem = Arc::new(VecRegion::new(len));
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let keys = e.reg_mr(pd, 0, len as u64, access, mem.clone()).unwrap();
    let cap = QpCap {
        max_send_wr: 4,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let init = QpInit {
        qp_type: QpType::Rc,
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap,
    };
    let qpns = (0..QPS).map(|_| e.create_qp(init).unwrap()).collect();
    Node {
        e,
        addr,
        cq,
        qpns,
        keys,
        mem,
    }
}

/// QP `k` of `x` to RTS against `peer_qpn` at `peer`.
fn connect(x: &mut Node, k: usize, peer: IpAddr, peer_qpn: u32) {
    let to_rts = QpAttr {
        qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        ah_attr: Some(AddressVector { dest: peer }),
        path_mtu: Mtu::M4096,
        dest_qp_num: peer_qpn,
        timeout: 14,
        retry_cnt: 7,
        ..QpAttr::default()
    };
    for (a, mask) in to_rts.rc_steps() {
        x.e.modify_qp(x.qpns[k], &a, mask).unwrap();
    }
}

/// Moves every packet `from` has to `to`; returns how many.
fn pump(from: &mut Node, to: &mut Node, buf: &mut [u8]) -> usize {
    let src = SocketAddr::new(from.addr, 4791);
    let mut n = 0;
    while let Some(t) = from.e.poll_transmit(Instant::ZERO, buf) {
        to.e.handle_packet(
            Instant::ZERO,
            src,
            to.addr,
            &buf[..t.len],
            IcrcStatus::Valid,
        );
        n += 1;
    }
    n
}

#[test]
fn every_one_of_4096_qps_writes_once() {
    let (mut a, mut b) = (node(1), node(2));
    for k in 0..QPS {
        let (qa, qb) = (a.qpns[k], b.qpns[k]);
        connect(&mut a, k, b.addr, qb);
        connect(&mut b, k, a.addr, qa);
    }
    // QP k writes SIZE bytes of value k (mod 251) from its slot to the same slot of B.
    for k in 0..QPS {
        let off = k as u64 * u64::from(SIZE);
        a.mem.write(off, &vec![(k % 251) as u8 + 1; SIZE as usize]);
        let sge = Sge {
            addr: off,
            length: SIZE,
            lkey: a.keys.lkey,
        };
        let remote = Remote {
            addr: off,
            rkey: b.keys.rkey,
        };
        let wr = SendWr::new(k as u64, SendOp::Write(remote), vec![sge]);
        a.e.post_send(Instant::ZERO, a.qpns[k], wr).unwrap();
    }
    let mut buf = vec![0u8; 4096 + 80];
    let mut requests = 0;
    loop {
        let sent = pump(&mut a, &mut b, &mut buf);
        let acks = pump(&mut b, &mut a, &mut buf);
        requests += sent;
        if sent + acks == 0 {
            break;
        }
    }
    assert_eq!(
        requests,
        QPS * 2,
        "two request packets per WRITE, none resent"
    );
    let mut done = HashSet::new();
    while let Some(wc) = a.e.poll_cq(a.cq) {
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.qp_num, a.qpns[wc.wr_id as usize]);
        assert!(done.insert(wc.wr_id), "WRITE {} completed twice", wc.wr_id);
    }
    assert_eq!(done.len(), QPS);
    let mut got = vec![0u8; SIZE as usize];
    for k in 0..QPS {
        b.mem.read(k as u64 * u64::from(SIZE), &mut got);
        assert!(
            got.iter().all(|&x| x == (k % 251) as u8 + 1),
            "QP {k}'s data"
        );
    }
    assert_eq!(b.e.poll_cq(b.cq), None);
}
