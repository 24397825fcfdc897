//! rdma_cm through two `rocexd` processes on loopback addresses: each daemon's QP1 carries
//! the CM MADs, and the daemons move their clients' QPs (`docs/abi.md` §6.5); a direct
//! client's QPs are its own engine's, which it moves with what the CM settled, on either
//! side and against a daemon-path peer.

use std::net::IpAddr;

mod common;

use common::{ACCESS, Daemon, End, T, end, ok, pattern, ring_daemon, rocexd};
use rocex_verbs::verbs::{AttrMask, QpAttr, QpState, RecvWr, SendOp, WcOpcode};
use rocex_verbs::{CmEvent, CmEventKind, Context};

/// An endpoint whose QP is in INIT, as the CM wants it.
fn cm_end(d: &Daemon) -> End {
    let e = end(&d.sock);
    let a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: ACCESS,
        ..QpAttr::default()
    };
    e.qp.modify(
        &a,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    e
}

fn event(ctx: &Context, kind: CmEventKind) -> CmEvent {
    let e = ctx.cm_wait_event(T).expect("a CM event");
    assert_eq!(e.kind, kind, "{e:?}");
    e
}

fn state(e: &End) -> QpState {
    e.qp.query().unwrap().0.qp_state
}

#[test]
fn connect_accept_move_data_and_disconnect() {
    let da = ring_daemon("127.0.9.1", &[]);
    let db = ring_daemon("127.0.9.2", &[]);
    connect_accept_move_data_and_disconnect_on(&da, &db, 7471, (false, false));
}

#[test]
fn direct_clients_connect_on_either_side_and_against_a_daemon_path_peer() {
    // Granting direct slots whether or not `ROCEX_TEST_DIRECT` is set.
    let direct = |addr| rocexd(addr).args(["--direct"]).start();
    let (da, db) = (direct("127.0.9.15"), direct("127.0.9.16"));
    connect_accept_move_data_and_disconnect_on(&da, &db, 7471, (true, true));
    let dc = ring_daemon("127.0.9.17", &[]);
    connect_accept_move_data_and_disconnect_on(&da, &dc, 7472, (true, false));
    connect_accept_move_data_and_disconnect_on(&dc, &db, 7473, (false, true));
}

/// A client of `da` connects to one of `db` listening on rdma_cm `port`, which accepts;
/// data moves both ways; a disconnects. `direct`: whether each end's context is direct.
fn connect_accept_move_data_and_disconnect_on(
    da: &Daemon,
    db: &Daemon,
    port: u16,
    direct: (bool, bool),
) {
    let mut a = cm_end(da);
    let mut b = cm_end(db);
    assert_eq!((a.ctx.is_direct(), b.ctx.is_direct()), direct);
    let (addr_a, addr_b) = (a.ctx.gid_addr(), b.ctx.gid_addr());
    b.ctx.cm_listen(port).unwrap();
    // The listener's receive is posted before it accepts, as rdma_cm applications do.
    b.qp.post_recv(&[RecvWr {
        wr_id: 7,
        sges: vec![b.mr.sge(0, 8192)].into(),
    }])
    .unwrap();

    let id_a = a
        .ctx
        .cm_connect(&a.qp, addr_b, port, b"rocex cm test")
        .unwrap();
    let req = event(&b.ctx, CmEventKind::ConnectRequest);
    assert_eq!((req.peer, req.port), (addr_a, port));
    assert_eq!(&req.private_data[..13], b"rocex cm test");
    b.ctx.cm_accept_with(req.id, &b.qp, b"rep data").unwrap();
    let up = event(&a.ctx, CmEventKind::Established);
    assert_eq!((up.id, up.peer), (id_a, addr_b));
    // The REP's whole private-data field, as the kernel's rdma_cm hands it on.
    assert_eq!(up.private_data.len(), 196);
    assert_eq!(&up.private_data[..8], b"rep data");
    assert!(up.private_data[8..].iter().all(|&b| b == 0));
    assert!(
        event(&b.ctx, CmEventKind::Established)
            .private_data
            .is_empty()
    );

    let (qa, qb) = (a.qp.query().unwrap().0, b.qp.query().unwrap().0);
    assert_eq!((qa.qp_state, qb.qp_state), (QpState::Rts, QpState::Rts));
    assert_eq!((qa.dest_qp_num, qb.dest_qp_num), (b.qp.qpn(), a.qp.qpn()));
    assert_eq!(qa.sq_psn, qb.rq_psn);
    assert_eq!(qb.sq_psn, qa.rq_psn);

    // SEND a → b, 5000 bytes over several packets.
    let msg = pattern(3, 5000);
    a.mr.write(0, &msg).unwrap();
    a.post(1, SendOp::Send, 0, 5000);
    ok(&mut a.cq, 1, WcOpcode::Send);
    assert_eq!(ok(&mut b.cq, 7, WcOpcode::Recv), 5000);
    let mut got = vec![0; 5000];
    b.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);

    // WRITE b → a, READ a ← b.
    let w = pattern(9, 3000);
    b.mr.write(65536, &w).unwrap();
    b.post(2, SendOp::Write(a.mr.remote(131_072)), 65536, 3000);
    ok(&mut b.cq, 2, WcOpcode::RdmaWrite);
    let mut got = vec![0; 3000];
    a.mr.read(131_072, &mut got).unwrap();
    assert_eq!(got, w);
    a.post(3, SendOp::Read(b.mr.remote(65536)), 262_144, 3000);
    ok(&mut a.cq, 3, WcOpcode::RdmaRead);
    a.mr.read(262_144, &mut got).unwrap();
    assert_eq!(got, w);

    // A direct end's QP is in its own engine; rocexd's `Stat` shows it as its board says.
    for (e, d) in [(&a, da), (&b, db)]
        .into_iter()
        .filter(|(e, _)| e.ctx.is_direct())
    {
        shown_by_the_daemon_as_in_the_engine(e, d);
    }

    // DREQ from a: both QPs leave RTS, both ends hear of it.
    a.ctx.cm_disconnect(id_a).unwrap();
    assert_eq!(event(&a.ctx, CmEventKind::Disconnected).id, id_a);
    assert_eq!(event(&b.ctx, CmEventKind::Disconnected).id, req.id);
    assert_eq!((state(&a), state(&b)), (QpState::Err, QpState::Err));
}

/// What a daemon-path context of `d` reads of direct end `e`'s QP (`rocex stat`'s view)
/// matches the engine's own, the owner's pid included, within the board's lag.
fn shown_by_the_daemon_as_in_the_engine(e: &End, d: &Daemon) {
    let qpn = e.qp.qpn();
    let watcher = Context::open_daemon_path(&d.sock).unwrap();
    let named = |s: &rocex_verbs::Stats, name: &str| {
        let q = s.qps.iter().find(|q| q.qpn == qpn).unwrap();
        q.counters.iter().find(|(n, _)| n == name).unwrap().1
    };
    let own = e.ctx.qp_stats(qpn).unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let seen = watcher.qp_stats(qpn).unwrap();
        let same = ["sq_psn", "rq_psn", "msn"].map(|n| named(&seen, n) == named(&own, n));
        if same == [true; 3] {
            assert_eq!(named(&seen, "client_pid"), u64::from(std::process::id()));
            assert_eq!(seen.qps[0].state, QpState::Rts);
            assert!(watcher.stats().unwrap().qps.iter().any(|q| q.qpn == qpn));
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "rocexd shows {seen:?}, the engine {own:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A program that listens again on a port it has just given up (perftest's `-R`, between
/// its control and its test connections) gets the REQ that came in between, as if it had
/// listened all along: rocexd holds it up to a second (`cm/relisten.rs`).
#[test]
fn a_request_between_a_listen_given_up_and_the_next_waits_for_the_next() {
    let da = ring_daemon("127.0.9.18", &[]);
    let db = ring_daemon("127.0.9.19", &[]);
    let (a, b) = (cm_end(&da), cm_end(&db));
    b.ctx.cm_listen(7475).unwrap();
    b.ctx.cm_unlisten(7475).unwrap();
    let id = a
        .ctx
        .cm_connect(&a.qp, b.ctx.gid_addr(), 7475, &[])
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(b.ctx.cm_poll_event().unwrap().is_none());
    assert!(
        a.ctx.cm_poll_event().unwrap().is_none(),
        "no REJ while held"
    );
    b.ctx.cm_listen(7475).unwrap();
    let req = event(&b.ctx, CmEventKind::ConnectRequest);
    b.ctx.cm_accept(req.id, &b.qp).unwrap();
    assert_eq!(event(&a.ctx, CmEventKind::Established).id, id);
    assert_eq!(event(&b.ctx, CmEventKind::Established).id, req.id);
}

#[test]
fn nobody_listening_and_a_refusal_are_rejections() {
    let da = ring_daemon("127.0.9.3", &[]);
    let db = ring_daemon("127.0.9.4", &[]);
    let a = cm_end(&da);
    let b = cm_end(&db);
    let peer = IpAddr::from([127, 0, 9, 4]);

    // No listener on port 9: REJ, invalid service ID (IBTA table 112, reason 8).
    let id = a.ctx.cm_connect(&a.qp, peer, 9, &[]).unwrap();
    let rej = event(&a.ctx, CmEventKind::Rejected);
    assert_eq!((rej.id, rej.reason), (id, 8));
    assert_eq!(state(&a), QpState::Init);

    // A listener that says no: REJ, consumer reason (28).
    b.ctx.cm_listen(18515).unwrap();
    let id = a.ctx.cm_connect(&a.qp, peer, 18515, &[]).unwrap();
    let req = event(&b.ctx, CmEventKind::ConnectRequest);
    b.ctx.cm_reject_with(req.id, b"no thanks").unwrap();
    let rej = event(&a.ctx, CmEventKind::Rejected);
    assert_eq!((rej.id, rej.reason), (id, 28));
    assert_eq!(rej.private_data.len(), 148);
    assert_eq!(&rej.private_data[..9], b"no thanks");
    assert!(
        b.ctx.cm_accept(req.id, &b.qp).is_err(),
        "a rejected request is gone"
    );

    // A port given up is nobody's again: the CM's own REJ, reason 8.
    b.ctx.cm_unlisten(18515).unwrap();
    let id = a.ctx.cm_connect(&a.qp, peer, 18515, &[]).unwrap();
    let rej = event(&a.ctx, CmEventKind::Rejected);
    assert_eq!((rej.id, rej.reason), (id, 8));
    assert!(b.ctx.cm_unlisten(18515).is_err(), "not b's any more");

    // Bad requests get typed refusals.
    assert!(a.ctx.cm_connect(&a.qp, peer, 1, &[0; 57]).is_err());
    assert!(a.ctx.cm_disconnect(12345).is_err());
    assert!(a.ctx.cm_poll_event().unwrap().is_none());
}
