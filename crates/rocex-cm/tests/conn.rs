//! The CM state machines against each other, message by message in virtual time: the
//! handshake, refusal, loss of each message, duplicates, MRA, and the disconnect.

use core::net::IpAddr;
use core::time::Duration;

use rocex_cm::conn::{self, AcceptParams, Conn, Event, Local, QpParams, Role, State};
use rocex_cm::{Mad, Message, MraRepr, MsgKind, cma, rej};
use rocex_proto::Instant;
use rocex_proto::verbs::{Mtu, QpState};

mod common;

const A: [u8; 4] = [198, 18, 0, 1];
const B: [u8; 4] = [198, 18, 0, 2];

fn local(ip: [u8; 4]) -> Local {
    Local {
        addr: ip.into(),
        ca_guid: 0x0200_00ff_fe00_0000 | u64::from(ip[3]),
    }
}

/// A's connect to B from QP 0x11 at PSN 0xae0b81, transaction `tid`, communication ID
/// `comm_id`.
fn connect(tid: u64, comm_id: u32) -> Conn {
    let hdr = cma::Repr {
        src_port: 0xae22,
        src: A.into(),
        dst: B.into(),
    };
    let p = common::connect_params(0x11, 0xae0b81, &hdr);
    Conn::connect(Instant::ZERO, local(A), B.into(), &p, tid, comm_id)
}

fn accept_params() -> AcceptParams {
    AcceptParams {
        qpn: 0x22,
        starting_psn: 0x253bc1,
        responder_resources: 4,
        initiator_depth: 4,
        rnr_retry_count: 7,
        max_mtu: Mtu::M4096,
        private_data: [0; rocex_cm::rep::PRIVATE_DATA_LEN],
    }
}

/// Everything `c` sends, through the wire format and back.
fn drain(c: &mut Conn) -> Vec<Mad> {
    let mut v = Vec::new();
    while let Some(m) = c.poll_transmit() {
        let mut b = [0u8; 256];
        m.emit(&mut b).unwrap();
        v.push(Mad::parse(&b).unwrap());
    }
    v
}

fn events(c: &mut Conn) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn req_of(m: &Mad) -> rocex_cm::ReqRepr {
    match m.msg {
        Message::Req(r) => r,
        other => panic!("expected a REQ, got {other:?}"),
    }
}

/// The passive side's answer to a REQ, as the CLI makes it.
fn accept(now: Instant, m: &Mad) -> Conn {
    let req = req_of(m);
    let (ps, port, hdr) = conn::rdma_cm_target(&req).expect("an rdma_cm REQ");
    assert_eq!((ps, port), (cma::PS_TCP, 7174));
    assert_eq!(hdr.src, IpAddr::from(A));
    Conn::accept(now, local(B), A.into(), m.tid, &req, &accept_params(), 0xb2).unwrap()
}

/// A's connect (transaction 1, ID 0xa1) with its REQ sent, and B's acceptance of that REQ.
fn connect_and_accept() -> (Conn, Conn) {
    let mut a = connect(1, 0xa1);
    let req = drain(&mut a);
    let b = accept(Instant::ZERO, &req[0]);
    (a, b)
}

#[test]
fn handshake_settles_both_qps_and_disconnect_ends_both() {
    let t0 = Instant::ZERO;
    let mut a = connect(0x2d59786b9, 0xa1);
    let req = drain(&mut a);
    assert_eq!(req.len(), 1);
    let mut b = accept(t0, &req[0]);
    assert_eq!(b.role(), Role::Passive);
    let rep = drain(&mut b);
    assert!(matches!(
        rep[..],
        [Mad {
            msg: Message::Rep(_),
            tid: 0x2d59786b9
        }]
    ));
    assert!(a.owns(B.into(), &rep[0]));
    assert!(!a.owns(A.into(), &rep[0]), "from the wrong address");
    a.handle(t0, &rep[0]);
    let [Event::Reply(pa)] = events(&mut a)[..] else {
        panic!("no Reply")
    };
    a.establish();
    assert_eq!(events(&mut a), [Event::Established]);
    let rtu = drain(&mut a);
    assert!(b.owns(A.into(), &rtu[0]));
    b.handle(t0, &rtu[0]);
    assert_eq!(events(&mut b), [Event::Established]);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );

    // Each QP's send PSN is the other's receive PSN; the READ limits meet in the middle.
    let pb = b.params().unwrap();
    assert_eq!((pa.remote_qpn, pb.remote_qpn), (0x22, 0x11));
    assert_eq!((pa.sq_psn, pa.rq_psn), (pb.rq_psn, pb.sq_psn));
    // Each side sends from the PSN the other's message named (the kernel's reading).
    assert_eq!((pa.sq_psn, pb.sq_psn), (0x253bc1, 0xae0b81));
    assert_eq!((pa.max_rd_atomic, pa.max_dest_rd_atomic), (1, 1));
    assert_eq!((pb.max_rd_atomic, pb.max_dest_rd_atomic), (1, 1));
    assert_eq!((pa.path_mtu, pb.path_mtu), (Mtu::M1024, Mtu::M1024));
    assert_eq!((pa.retry_cnt, pa.rnr_retry, pa.timeout), (7, 7, 17));
    assert_eq!((pb.retry_cnt, pb.rnr_retry, pb.timeout), (7, 7, 17));
    assert_eq!((pa.remote, pb.remote), (IpAddr::from(B), IpAddr::from(A)));
    let (rtr, _) = pa.rtr();
    assert_eq!((rtr.dest_qp_num, rtr.rq_psn), (0x22, 0xae0b81));
    let (rts, _) = pb.rts();
    assert_eq!((rts.sq_psn, rts.max_rd_atomic), (0xae0b81, 1));
    assert_eq!((rtr.qp_state, rts.qp_state), (QpState::Rtr, QpState::Rts));

    let t1 = t0 + Duration::from_secs(1);
    b.disconnect(t1);
    let dreq = drain(&mut b);
    let Message::Dreq(d) = dreq[0].msg else {
        panic!("no DREQ")
    };
    assert_eq!(d.remote_qpn, 0x11);
    a.handle(t1, &dreq[0]);
    assert_eq!(events(&mut a), [Event::Disconnected]);
    let drep = drain(&mut a);
    assert!(matches!(
        drep[..],
        [Mad {
            msg: Message::Drep(_),
            ..
        }]
    ));
    b.handle(t1, &drep[0]);
    assert_eq!(events(&mut b), [Event::Disconnected]);
    assert_eq!((a.state(), b.state()), (State::TimeWait, State::TimeWait));
    // A repeated DREQ in TimeWait gets the DREP again.
    a.handle(t1, &dreq[0]);
    assert_eq!(drain(&mut a), drep);
    assert!(events(&mut a).is_empty());
    let end = t1 + Duration::from_secs(10);
    a.handle_timeout(end);
    b.handle_timeout(end);
    assert_eq!((a.state(), b.state()), (State::Closed, State::Closed));
}

#[test]
fn a_lost_req_is_resent_after_the_response_timeout_then_gives_up_with_a_rej() {
    let t0 = Instant::ZERO;
    let mut a = connect(1, 0xa1);
    let first = drain(&mut a);
    let t1 = a.poll_timeout().unwrap();
    // rdma_cm's wait: 4.096 us x 2^20 plus two packet lifetimes of 4.096 us x 2^16.
    assert_eq!(t1 - t0, conn::timeout(20) + conn::timeout(16) * 2);
    a.handle_timeout(Instant::from_nanos(t1.nanos() - 1));
    assert!(drain(&mut a).is_empty(), "not before the timeout");
    a.handle_timeout(t1);
    assert_eq!(drain(&mut a), first, "the same REQ, same TID");
    for _ in 1..conn::MAX_CM_RETRIES {
        let t = a.poll_timeout().unwrap();
        a.handle_timeout(t);
        assert_eq!(drain(&mut a), first);
    }
    let t = a.poll_timeout().unwrap();
    a.handle_timeout(t);
    let out = drain(&mut a);
    let [
        Mad {
            msg: Message::Rej(r),
            ..
        },
    ] = out[..]
    else {
        panic!("no REJ: {out:?}")
    };
    assert_eq!(
        (r.reason, r.message_rejected),
        (rej::REASON_TIMEOUT, MsgKind::Req)
    );
    assert_eq!(events(&mut a), [Event::TimedOut]);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn a_lost_rep_is_answered_again_on_the_repeated_req_and_by_its_own_timer() {
    let (mut a, mut b) = connect_and_accept();
    let rep = drain(&mut b); // lost
    let t1 = a.poll_timeout().unwrap();
    a.handle_timeout(t1);
    let req2 = drain(&mut a);
    assert!(
        b.owns(A.into(), &req2[0]),
        "the repeated REQ is this connection's"
    );
    b.handle(t1, &req2[0]);
    assert_eq!(drain(&mut b), rep, "the REP again");
    // The passive side's own timer resends it too.
    let tb = b.poll_timeout().unwrap();
    b.handle_timeout(tb);
    assert_eq!(drain(&mut b), rep);
    a.handle(tb, &rep[0]);
    assert!(matches!(events(&mut a)[..], [Event::Reply(_)]));
    a.establish();
    // A REP repeated after the RTU (the RTU was lost) gets the RTU again.
    let rtu = drain(&mut a);
    a.handle(tb, &rep[0]);
    assert_eq!(drain(&mut a), rtu);
    assert_eq!(a.state(), State::Established);
}

#[test]
fn a_lost_rtu_is_covered_by_traffic_on_the_qp() {
    let t0 = Instant::ZERO;
    let (mut a, mut b) = connect_and_accept();
    let rep = drain(&mut b);
    a.handle(t0, &rep[0]);
    a.establish();
    let _lost_rtu = drain(&mut a);
    b.comm_established();
    assert_eq!(events(&mut b), [Event::Established]);
    assert_eq!(b.poll_timeout(), None, "no more REP resends");
}

#[test]
fn an_mra_stretches_the_wait_for_the_rep() {
    let t0 = Instant::ZERO;
    let mut a = connect(1, 0xa1);
    let _ = drain(&mut a);
    let mra = Mad {
        tid: 1,
        msg: Message::Mra(MraRepr {
            local_comm_id: 0xb2,
            remote_comm_id: 0xa1,
            message_mraed: MsgKind::Req,
            service_timeout: 24,
            private_data: [0; 222],
        }),
    };
    assert!(a.owns(B.into(), &mra));
    a.handle(t0, &mra);
    assert_eq!(a.state(), State::MraRcvd);
    let t = a.poll_timeout().unwrap();
    assert!(
        t - t0 > conn::timeout(24),
        "waits at least the MRA's service timeout"
    );
    a.handle_timeout(t0 + conn::timeout(22));
    assert!(drain(&mut a).is_empty());
}

#[test]
fn a_rej_refuses_and_unknown_services_are_rejected_without_a_connection() {
    let t0 = Instant::ZERO;
    let mut a = connect(7, 0xa1);
    let req = drain(&mut a);
    let rej = conn::reject(req[0].tid, &req_of(&req[0]), rej::REASON_INVALID_SERVICE_ID);
    let Message::Rej(r) = rej.msg else {
        unreachable!()
    };
    assert_eq!((r.local_comm_id, r.remote_comm_id), (0, 0xa1));
    assert!(a.owns(B.into(), &rej));
    a.handle(t0, &rej);
    assert_eq!(events(&mut a), [Event::Rejected(8)]);
    assert_eq!(a.state(), State::Closed);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn a_lost_dreq_is_resent_and_an_unanswered_one_still_disconnects() {
    let t0 = Instant::ZERO;
    let (mut a, mut b) = connect_and_accept();
    a.handle(t0, &drain(&mut b)[0]);
    a.establish();
    b.handle(t0, &drain(&mut a)[0]);
    let _ = (events(&mut a), events(&mut b));
    a.disconnect(t0);
    let dreq = drain(&mut a);
    let t1 = a.poll_timeout().unwrap();
    a.handle_timeout(t1);
    assert_eq!(drain(&mut a), dreq);
    while let Some(t) = a.poll_timeout() {
        a.handle_timeout(t);
        let _ = drain(&mut a);
        if a.state() != State::DreqSent {
            break;
        }
    }
    assert_eq!(a.state(), State::TimeWait);
    assert_eq!(events(&mut a), [Event::Disconnected]);
    // The peer, hearing only the last copy, still answers it.
    b.handle(t1, &dreq[0]);
    assert!(matches!(
        drain(&mut b)[..],
        [Mad {
            msg: Message::Drep(_),
            ..
        }]
    ));
    assert_eq!(events(&mut b), [Event::Disconnected]);
}

#[test]
fn an_invalid_path_mtu_in_a_req_is_refused() {
    let t0 = Instant::ZERO;
    let mut a = connect(1, 0xa1);
    let mut req = req_of(&drain(&mut a)[0]);
    req.path_mtu = 9;
    assert!(QpParams::for_passive(A.into(), &req, &accept_params()).is_none());
    assert!(Conn::accept(t0, local(B), A.into(), 1, &req, &accept_params(), 2).is_none());
}

/// The passive side's REP and REJ carry the consumer's private data over the wire, and the
/// active side keeps each whole field (196 and 148 bytes), as the kernel's rdma_cm hands
/// them to its `ESTABLISHED` and `REJECTED` events.
#[test]
fn rep_and_rej_private_data_reach_the_active_side() {
    let t0 = Instant::ZERO;
    let mut a = connect(0x51, 0xa3);
    let req = drain(&mut a);
    let mut p = accept_params();
    p.private_data[..3].copy_from_slice(b"rep");
    p.private_data[195] = 0xee;
    let mut b = Conn::accept(
        t0,
        local(B),
        A.into(),
        req[0].tid,
        &req_of(&req[0]),
        &p,
        0xb3,
    )
    .unwrap();
    assert!(a.peer_private_data().is_empty());
    a.handle(t0, &drain(&mut b)[0]);
    assert_eq!(a.peer_private_data(), &p.private_data[..]);

    let mut a = connect(0x52, 0xa4);
    let req = drain(&mut a);
    let rej = conn::reject_with(req[0].tid, &req_of(&req[0]), rej::REASON_CONSUMER, b"no");
    let mut b = [0u8; 256];
    rej.emit(&mut b).unwrap();
    a.handle(t0, &Mad::parse(&b).unwrap());
    assert_eq!(events(&mut a), [Event::Rejected(rej::REASON_CONSUMER)]);
    let mut want = [0u8; rej::PRIVATE_DATA_LEN];
    want[..2].copy_from_slice(b"no");
    assert_eq!(a.peer_private_data(), &want[..]);
}
