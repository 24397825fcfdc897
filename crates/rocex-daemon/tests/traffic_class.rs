//! An application's traffic class (`ah_attr.grh.traffic_class`, given with the address
//! vector on the way to RTR) reaches the engine through rocexd's control protocol, and
//! `--ecn` marks the daemon's packets ECT(0) and `--dscp` gives the packets of QPs without
//! a traffic class their DSCP: seen in both daemons' captures, which hold the TOS of each
//! packet sent and the TOS the kernel reported for each received.

use std::collections::BTreeSet;
use std::net::IpAddr;

mod common;

use common::{End, daemon, end, ok};
use rocex_verbs::verbs::{Mtu, QpAttr, SendOp, WcOpcode};
use rocex_wire::frame::{Frame, FrameHeaders};

/// RESET → RTS towards `peer`, with the address vector's traffic class `tclass`.
fn connect(me: &End, peer: &End, tclass: u8) {
    let peer_at = (peer.ctx.gid_addr(), peer.qp.qpn(), 0);
    let to_rts = QpAttr {
        traffic_class: tclass,
        ..common::rc_attrs(0, peer_at, Mtu::M1024, common::ACCESS)
    };
    for (a, mask) in to_rts.rc_steps() {
        me.qp.modify(&a, mask).unwrap();
    }
}

/// Every frame of a daemon's capture: (source, IP TOS, BTH destination QP).
fn frames(cap: &std::path::Path) -> Vec<(IpAddr, u8, u32)> {
    let frames = rocex_dump::capture::read(cap).expect("readable capture");
    let _ = std::fs::remove_file(cap);
    frames
        .iter()
        .map(|f| {
            let h = FrameHeaders::parse(&f.data).expect("a RoCE v2 frame");
            let qp = Frame::parse(&f.data)
                .expect("a RoCE v2 frame")
                .repr
                .packet
                .bth
                .dest_qp;
            (h.ip.addresses().0, h.ip.tos(), qp)
        })
        .collect()
}

/// The TOS of the frames from `src` to QP `qp`, each once.
fn toses(frames: &[(IpAddr, u8, u32)], src: IpAddr, qp: u32) -> (usize, BTreeSet<u8>) {
    let to: Vec<u8> = frames
        .iter()
        .filter(|f| f.0 == src && f.2 == qp)
        .map(|f| f.1)
        .collect();
    (to.len(), to.into_iter().collect())
}

#[test]
fn the_qps_traffic_class_and_ecn_reach_the_wire() {
    let (ia, ib): (IpAddr, IpAddr) = ("127.0.5.21".parse().unwrap(), "127.0.5.22".parse().unwrap());
    let tmp = std::env::temp_dir();
    let pid = std::process::id();
    let (ca, cb) = (
        tmp.join(format!("rocexd-tclass-a-{pid}.pcap")),
        tmp.join(format!("rocexd-tclass-b-{pid}.pcap")),
    );
    let mut da = daemon("127.0.5.21", &["--ecn", "--pcap", ca.to_str().unwrap()]);
    let mut db = daemon(
        "127.0.5.22",
        &["--dscp", "10", "--pcap", cb.to_str().unwrap()],
    );
    // Two connections: a's QPs with DSCP 26 (AF31) and DSCP 46 (EF), ECN bits 0, as
    // rdma-core passes an application's byte; b's with none.
    let mut a = [end(&da.sock), end(&da.sock)];
    let mut b = [end(&db.sock), end(&db.sock)];
    for (i, tclass) in [(0, 26 << 2), (1, 46 << 2)] {
        connect(&a[i], &b[i], tclass);
        connect(&b[i], &a[i], 0);
        assert_eq!(a[i].qp.query().unwrap().0.traffic_class, tclass);
        assert_eq!(b[i].qp.query().unwrap().0.traffic_class, 0);
    }

    // WRITEs one way and READs the other on both connections at once: requests,
    // responses and ACKs from both daemons, the two QPs' packets in the same batches.
    for n in 0..8u64 {
        for (x, y) in a.iter_mut().zip(b.iter_mut()) {
            let w = SendOp::Write(y.mr.remote(n * 4096));
            x.post(n, w, n * 4096, 4096);
            let r = SendOp::Read(x.mr.remote(n * 4096));
            y.post(n, r, n * 4096, 4096);
        }
        for (x, y) in a.iter_mut().zip(b.iter_mut()) {
            ok(&mut x.cq, n, WcOpcode::RdmaWrite);
            ok(&mut y.cq, n, WcOpcode::RdmaRead);
        }
    }
    let qpns = [a[0].qp.qpn(), a[1].qp.qpn(), b[0].qp.qpn(), b[1].qp.qpn()];
    drop((a, b));
    assert!(da.stop() && db.stop(), "a daemon did not shut down cleanly");

    // a sends each QP's DSCP with ECT(0) (--ecn; the application set no ECN bits), and
    // b's socket receives exactly that byte; b sends its port's DSCP 10, not
    // ECN-capable, and a's socket receives that.
    let (fa, fb) = (frames(&ca), frames(&cb));
    for (qp, peer, tos) in [(qpns[2], qpns[0], 0x6a), (qpns[3], qpns[1], 0xba)] {
        // 8 WRITEs and 8 READ responses of 4 packets each.
        let (n, sent) = toses(&fa, ia, qp);
        assert!(n >= 64, "{n} frames to QP {qp:#x}");
        assert_eq!(sent, BTreeSet::from([tos]), "a's TOS to QP {qp:#x}");
        assert_eq!(toses(&fb, ia, qp), (n, sent), "b received from a");
        // 8 READ requests, and ACKs.
        let (n, sent) = toses(&fb, ib, peer);
        assert!(n >= 9, "{n} frames to QP {peer:#x}");
        assert_eq!(sent, BTreeSet::from([10 << 2]), "b's TOS to QP {peer:#x}");
        assert_eq!(toses(&fa, ib, peer), (n, sent), "a received from b");
    }
}
