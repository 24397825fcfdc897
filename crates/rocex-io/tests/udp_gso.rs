//! Two engines on the batched UDP backend over loopback (which takes UDP GSO and GRO):
//! 64 KiB RDMA WRITEs at path MTU 4096 arrive intact, go out in GSO batches, and every
//! received ICRC is checked; with corruption injected, the bad packets are dropped by the
//! ICRC check and retransmitted.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rocex_io::{BackendKind, BackendOptions, Driver, Faults, Injected};
use rocex_proto::verbs::{Mtu, QpAttr, QpCap, Remote, SendOp, SendWr, Sge, WcStatus};
use rocex_proto::{Access, Config, Engine, Keys, QpInit, Region, VecRegion};

const MSG: usize = 64 << 10;
const MESSAGES: usize = 64;
const BASE: u64 = 0x4000_0000;
const OUTSTANDING: usize = 8;

struct Side {
    driver: Driver,
    qpn: u32,
    cq: u32,
    keys: Keys,
    buf: Arc<VecRegion>,
}

fn side(ip: [u8; 4], seed: u8, faults: Option<Faults>) -> io::Result<Side> {
    let ip = IpAddr::from(ip);
    let mut cfg = Config::new(ip, [seed; 32]);
    cfg.port_mtu = Mtu::M4096;
    cfg.udp_source_port = Some(4791);
    let mut e = Engine::new(cfg);
    let pd = e.alloc_pd();
    let buf = Arc::new(VecRegion::new(MSG * MESSAGES));
    let keys = e
        .reg_mr(
            pd,
            BASE,
            (MSG * MESSAGES) as u64,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            buf.clone(),
        )
        .expect("MR");
    let cq = e.create_cq(1024).expect("CQ");
    let qpn = e
        .create_qp(QpInit::rc(
            pd,
            cq,
            QpCap {
                max_send_wr: 64,
                max_recv_wr: 64,
                ..QpCap::default()
            },
        ))
        .expect("QP");
    let opts = BackendOptions {
        peers_are_rocex: true,
        ..BackendOptions::default()
    };
    let backend = rocex_io::open(BackendKind::Udp, ip, opts)?;
    let driver = match faults {
        Some(f) => Driver::with_backend(e, Box::new(Injected::new(backend, f))),
        None => Driver::with_backend(e, backend),
    };
    Ok(Side {
        driver,
        qpn,
        cq,
        keys,
        buf,
    })
}

fn connect(s: &mut Side, peer: IpAddr, peer_qpn: u32, peer_psn: u32, my_psn: u32) {
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let to_rts = QpAttr {
        max_dest_rd_atomic: 1,
        timeout: 10,
        max_rd_atomic: 1,
        ..rocex_testkit::rc::rc_attrs(my_psn, (peer, peer_qpn, peer_psn), Mtu::M4096, access)
    };
    for (a, mask) in to_rts.rc_steps() {
        s.driver.engine.modify_qp(s.qpn, &a, mask).expect("to RTS");
    }
}

fn pattern(i: usize) -> Vec<u8> {
    rocex_testkit::pattern(i as u64, MSG)
}

/// Writes `MESSAGES` 64 KiB messages from `ips.0` into `ips.1`, verifies them, and
/// returns both sides for their counters.
fn write_stream(ips: ([u8; 4], [u8; 4]), faults: Option<Faults>) -> (Side, Side) {
    let mut x = side(ips.0, 1, faults).expect("bind the writer");
    let mut y = side(ips.1, 2, None).expect("bind the target");
    let (px, py) = (x.driver.engine.random_psn(), y.driver.engine.random_psn());
    let (xq, yq) = (x.qpn, y.qpn);
    connect(&mut x, IpAddr::from(ips.1), yq, py, px);
    connect(&mut y, IpAddr::from(ips.0), xq, px, py);
    let rkey = y.keys.rkey;
    for i in 0..MESSAGES {
        x.buf.write((i * MSG) as u64, &pattern(i));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut posted, mut done, mut outstanding) = (0, 0, 0);
    while done < MESSAGES {
        assert!(
            Instant::now() < deadline,
            "{done} of {MESSAGES} WRITEs completed"
        );
        while outstanding < OUTSTANDING && posted < MESSAGES {
            let off = (posted * MSG) as u64;
            let wr = SendWr::new(
                posted as u64,
                SendOp::Write(Remote {
                    addr: BASE + off,
                    rkey,
                }),
                vec![Sge {
                    addr: BASE + off,
                    length: MSG as u32,
                    lkey: x.keys.lkey,
                }],
            );
            let now = x.driver.now();
            x.driver.engine.post_send(now, x.qpn, wr).expect("post");
            posted += 1;
            outstanding += 1;
        }
        x.driver.turn().expect("writer turn");
        y.driver.turn().expect("target turn");
        while let Some(wc) = x.driver.engine.poll_cq(x.cq) {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done += 1;
            outstanding -= 1;
        }
        let _ = y.driver.engine.poll_cq(y.cq);
    }
    for i in 0..MESSAGES {
        let mut got = vec![0; MSG];
        y.buf.read((i * MSG) as u64, &mut got);
        assert!(got == pattern(i), "message {i} differs");
    }
    (x, y)
}

#[test]
fn gso_batches_and_every_icrc_checks() {
    let (x, y) = write_stream(([127, 0, 201, 1], [127, 0, 201, 2]), None);
    let tx = x.driver.backend_counters();
    let rx = y.driver.backend_counters();
    assert!(tx.tx_packets >= (MESSAGES * MSG / 4096) as u64, "{tx:?}");
    assert!(tx.tx_batches < tx.tx_packets, "no batching: {tx:?}");
    assert!(rx.rx_packets >= (MESSAGES * MSG / 4096) as u64, "{rx:?}");
    assert!(rx.rx_batches < rx.rx_packets, "no receive batching: {rx:?}");
    assert_eq!(rx.icrc_foreign_id, 0, "{rx:?}");
    let ec = y.driver.engine.counters();
    assert_eq!(ec.drop_icrc, 0, "{ec:?}");
    assert_eq!(ec.drop_malformed, 0, "{ec:?}");
    assert_eq!(x.driver.engine.counters().drop_icrc, 0);
    assert!(x.driver.fault_counters().is_none());
    assert!(x.driver.backend().kind() == BackendKind::Udp);
}

#[test]
fn corrupted_segments_are_dropped_and_resent() {
    let faults: Faults = "corrupt=0.02,seed=11".parse().expect("faults");
    let (x, y) = write_stream(([127, 0, 201, 3], [127, 0, 201, 4]), Some(faults));
    let injected = x.driver.fault_counters().expect("fault counters");
    assert!(injected.corrupted > 0, "{injected:?}");
    let ec = y.driver.engine.counters();
    assert!(ec.drop_icrc > 0, "{ec:?}");
    let tx = x.driver.backend_counters();
    assert!(tx.tx_batches < tx.tx_packets, "no batching: {tx:?}");
    assert_eq!(y.driver.backend_counters().icrc_foreign_id, 0);
}
