//! An application's traffic class (`ah_attr.grh.traffic_class`, given with the address
//! vector on the way to RTR) reaches the engine through rocexd's control protocol, and
//! `--ecn` marks the daemon's packets ECT(0) and `--dscp` gives the packets of QPs without
//! a traffic class their DSCP: seen in both daemons' captures.

use std::net::IpAddr;

mod common;

use common::{Daemon, End, end, ok};
use rocex_verbs::verbs::{AddressVector, Mtu, QpAttr, SendOp, SendWr, WcOpcode};
use rocex_wire::Ecn;
use rocex_wire::frame::FrameHeaders;

/// RESET → RTS towards `peer`, with the address vector's traffic class `tclass`.
fn connect(me: &End, peer: &End, tclass: u8) {
    let to_rts = QpAttr {
        qp_access_flags: common::ACCESS,
        ah_attr: Some(AddressVector {
            dest: peer.ctx.gid_addr(),
        }),
        traffic_class: tclass,
        path_mtu: Mtu::M1024,
        dest_qp_num: peer.qp.qpn(),
        max_dest_rd_atomic: 16,
        min_rnr_timer: 1,
        timeout: 10,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 16,
        ..QpAttr::default()
    };
    for (a, mask) in to_rts.rc_steps() {
        me.qp.modify(&a, mask).unwrap();
    }
}

/// Every frame of a daemon's capture: (source, destination, IP TOS).
fn frames(cap: &std::path::Path) -> Vec<(IpAddr, IpAddr, u8)> {
    let frames = rocex_dump::capture::read(cap).expect("readable capture");
    let _ = std::fs::remove_file(cap);
    frames
        .iter()
        .map(|f| {
            let h = FrameHeaders::parse(&f.data).expect("a RoCE v2 frame");
            let (s, d) = h.ip.addresses();
            (s, d, h.ip.tos())
        })
        .collect()
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
    let mut da = Daemon::fresh(
        "127.0.5.21",
        "tclass-a",
        &["--ecn", "--pcap", ca.to_str().unwrap()],
    );
    let mut db = Daemon::fresh(
        "127.0.5.22",
        "tclass-b",
        &["--dscp", "10", "--pcap", cb.to_str().unwrap()],
    );
    let mut a = end(&da.sock);
    let mut b = end(&db.sock);
    // DSCP 26 (AF31), ECN bits 0: the application's byte, as rdma-core passes it.
    connect(&a, &b, 26 << 2);
    connect(&b, &a, 0);
    assert_eq!(a.qp.query().unwrap().0.traffic_class, 0x68);
    assert_eq!(b.qp.query().unwrap().0.traffic_class, 0);

    // WRITEs one way and READs the other: requests, responses and ACKs from both.
    for i in 0..8u64 {
        let wr = SendWr::new(
            i,
            SendOp::Write(b.mr.remote(i * 4096)),
            vec![a.mr.sge(i * 4096, 4096)],
        );
        a.qp.post_send(&[wr]).unwrap();
        ok(&mut a.cq, i, WcOpcode::RdmaWrite);
        let wr = SendWr::new(
            i,
            SendOp::Read(a.mr.remote(i * 4096)),
            vec![b.mr.sge(i * 4096, 4096)],
        );
        b.qp.post_send(&[wr]).unwrap();
        ok(&mut b.cq, i, WcOpcode::RdmaRead);
    }
    drop((a, b));
    assert!(da.stop() && db.stop(), "a daemon did not shut down cleanly");

    // a sends its QP's DSCP 26 with ECT(0) (--ecn, the application set no ECN bits);
    // b receives ECT(0) from a's socket and sends its port's DSCP 10, not ECN-capable,
    // which a receives so.
    let fa = frames(&ca);
    let fb = frames(&cb);
    let sent_a: Vec<u8> = fa.iter().filter(|f| f.0 == ia).map(|f| f.2).collect();
    let got_a: Vec<u8> = fa.iter().filter(|f| f.0 == ib).map(|f| f.2).collect();
    let got_b: Vec<u8> = fb.iter().filter(|f| f.0 == ia).map(|f| f.2).collect();
    let sent_b: Vec<u8> = fb.iter().filter(|f| f.0 == ib).map(|f| f.2).collect();
    assert!(
        sent_a.len() >= 16 && got_a.len() >= 16,
        "{} {}",
        sent_a.len(),
        got_a.len()
    );
    assert!(sent_a.iter().all(|&t| t == 0x6a), "a sent {sent_a:x?}");
    assert!(
        got_b.iter().all(|&t| Ecn::from_tos(t) == Ecn::Ect0),
        "b got {got_b:x?}"
    );
    assert_eq!(got_b.len(), sent_a.len());
    assert!(sent_b.iter().all(|&t| t == 10 << 2), "b sent {sent_b:x?}");
    assert!(got_a.iter().all(|&t| t == 0), "a got {got_a:x?}");
}
