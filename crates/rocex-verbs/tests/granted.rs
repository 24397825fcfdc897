//! Direct contexts granted by rocexd: `Context::open` on a daemon started with `--direct`
//! runs the engine in this process on the slot's steered socket (rocexd counts the slot),
//! on one without it every verb goes to the daemon; a direct end and a daemon-path end
//! move data both ways, byte for byte; the daemon's death wakes a direct context's waiter
//! and ends its engine.

use std::net::IpAddr;
use std::time::Duration;

use rocex_testkit::pattern;
use rocex_testkit::rc::rc_attrs;
use rocex_testkit::rocexd::{Daemon, Rocexd};
use rocex_verbs::verbs::{Access, Mtu, QpCap, QpType, RecvWr, SendOp, SendWr, WcStatus};
use rocex_verbs::{Context, Error, QpInitAttr};

const LIMIT: Duration = Duration::from_secs(20);

fn daemon(addr: &str, direct: bool) -> Daemon {
    let d = Rocexd::new(addr).tag(&format!("granted-{addr}"));
    match direct {
        true => d.args(["--direct"]),
        false => d.daemon_path(),
    }
    .start()
}

/// The daemon's own counter `name` (group `daemon`), read on the daemon path.
fn daemon_counter(d: &Daemon, name: &str) -> u64 {
    let stats = Context::open_daemon_path(&d.sock).unwrap().stats().unwrap();
    let g = stats.groups.iter().find(|g| g.name == "daemon").unwrap();
    g.counters
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |c| c.1)
}

#[test]
fn open_is_direct_only_where_the_daemon_grants_a_slot() {
    let plain = daemon("127.0.19.20", false);
    assert!(!Context::open(&plain.sock).unwrap().is_direct());
    let d = daemon("127.0.19.21", true);
    assert!(!Context::open_daemon_path(&d.sock).unwrap().is_direct());
    let ctx = Context::open(&d.sock).unwrap();
    assert!(ctx.is_direct());
    assert_eq!(daemon_counter(&d, "direct_slots"), 1);
    // The device is the daemon's.
    assert_eq!(ctx.gid_addr(), "127.0.19.21".parse::<IpAddr>().unwrap());
    drop(ctx);
    // The slot is the connection's: gone with it.
    let mut left = 1;
    for _ in 0..200 {
        left = daemon_counter(&d, "direct_slots");
        if left == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(left, 0, "the slot outlived its connection");
}

#[test]
fn a_direct_end_and_a_daemon_end_move_data_both_ways() {
    let (da, db) = (daemon("127.0.19.22", true), daemon("127.0.19.23", true));
    let a = Context::open(&da.sock).unwrap();
    let b = Context::open_daemon_path(&db.sock).unwrap();
    assert!(a.is_direct() && !b.is_direct());
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ma, mb) = (
        pa.alloc_mr(1 << 20, access).unwrap(),
        pb.alloc_mr(1 << 20, access).unwrap(),
    );
    let (mut ca, mut cb) = (
        a.create_cq(64, None).unwrap(),
        b.create_cq(64, None).unwrap(),
    );
    let qp = |pd: &rocex_verbs::Pd, cq| {
        pd.create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
        })
        .unwrap()
    };
    let (mut qa, mut qb) = (qp(&pa, &ca), qp(&pb, &cb));
    let remote = Access::REMOTE_WRITE | Access::REMOTE_READ;
    let to_b = rc_attrs(1, (b.gid_addr(), qb.qpn(), 2), Mtu::M1024, remote);
    let to_a = rc_attrs(2, (a.gid_addr(), qa.qpn(), 1), Mtu::M1024, remote);
    for (q, attr) in [(&qa, to_b), (&qb, to_a)] {
        for (s, m) in attr.rc_steps() {
            q.modify(&s, m).unwrap();
        }
    }
    // Direct to daemon: a 512 KiB WRITE; daemon to direct: a SEND.
    let data = pattern(9, 512 * 1024);
    ma.write(0, &data).unwrap();
    let op = SendOp::Write(mb.remote(4096));
    qa.post_send(&[SendWr::new(1, op, [ma.sge(0, 512 * 1024)])])
        .unwrap();
    assert_eq!(ca.poll_wait(LIMIT).unwrap().status, WcStatus::Success);
    let mut got = vec![0; 512 * 1024];
    mb.read(4096, &mut got).unwrap();
    assert!(
        got == data,
        "the direct end's WRITE differs at the daemon end"
    );
    qa.post_recv(&[RecvWr::new(3, [ma.sge(0, 4096)])]).unwrap();
    mb.write(0, b"from the daemon").unwrap();
    qb.post_send(&[SendWr::new(2, SendOp::Send, [mb.sge(0, 15)])])
        .unwrap();
    assert_eq!(cb.poll_wait(LIMIT).unwrap().status, WcStatus::Success);
    let wc = ca.poll_wait(LIMIT).unwrap();
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (3, WcStatus::Success, 15)
    );
    let mut msg = [0u8; 15];
    ma.read(0, &mut msg).unwrap();
    assert_eq!(&msg, b"from the daemon");
    // The direct end's counters are its own engine's; the daemon's QP is not among them.
    let st = a.stats().unwrap();
    assert_eq!(st.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(), [qa.qpn()]);
}

#[test]
fn the_daemons_death_wakes_a_direct_waiter() {
    let mut d = daemon("127.0.19.24", true);
    let ctx = Context::open(&d.sock).unwrap();
    assert!(ctx.is_direct());
    let chan = ctx.create_comp_channel().unwrap();
    let mut cq = ctx.create_cq(16, Some(&chan)).unwrap();
    d.kill();
    let r = chan.wait(Some(LIMIT));
    assert!(matches!(r, Err(Error::DaemonGone)), "{r:?}");
    assert!(ctx.is_gone());
    // The grant ended with the daemon: control verbs fail at once, and a poller learns it
    // from the progress thread, which drops the engine and its socket.
    assert!(matches!(ctx.alloc_pd(), Err(Error::DaemonGone)));
    assert!(matches!(ctx.query_device(), Err(Error::DaemonGone)));
    let r = cq.poll_wait(LIMIT);
    assert!(matches!(r, Err(Error::DaemonGone)), "{r:?}");
}
