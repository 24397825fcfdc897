//! Timed scripts: one engine under test against a peer played by the test, packet by
//! packet, as smoltcp tests its TCP: the error paths datenlord/roce-sim tests and rxe's
//! responder behaviour (docs/rxe-behaviour.md).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rocex_proto::verbs::{
    AddressVector, Mtu, QpAttr, QpState, RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};
use rocex_proto::{Access, Config, Engine, IcrcStatus, Instant, Keys, Region, VecRegion};
use rocex_wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, NakCode, Opcode, PacketRepr, Psn, RethRepr,
    Syndrome,
};

mod common;
use common::{LOCAL, Node, Spec, inject, peer};

const PEER_QPN: u32 = 0x11;
const PEER_PSN: u32 = 0x00_1000;
const BASE: u64 = 0x10_0000;

/// A packet the engine sent, kept as bytes.
struct Sent(Vec<u8>);

impl Sent {
    fn pkt(&self) -> PacketRepr<'_> {
        PacketRepr::parse(&self.0).unwrap().0
    }
    fn op(&self) -> Opcode {
        self.pkt().opcode()
    }
    fn psn(&self) -> u32 {
        self.pkt().bth.psn.value()
    }
    fn aeth(&self) -> (Syndrome, u32) {
        let a = self.pkt().aeth.expect("an AETH");
        (a.syndrome, a.msn)
    }
}

struct Script {
    e: Engine,
    now: Instant,
    qpn: u32,
    cq: u32,
    keys: Keys,
    mem: Arc<VecRegion>,
    sq_psn: u32,
}

struct Setup {
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            timeout: 10,
            retry_cnt: 3,
            rnr_retry: 2,
            min_rnr_timer: 12,
        }
    }
}

impl Script {
    fn new(s: Setup) -> Self {
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let spec = Spec {
            cqes: 256,
            iova: BASE,
            len: 1 << 20,
            access,
            ..Spec::default()
        };
        let mut n = Node::new(Config::new(LOCAL.into(), [9; 32]), spec);
        let sq_psn = 0x00_0100;
        let attr = QpAttr {
            qp_access_flags: access,
            ah_attr: Some(AddressVector { dest: peer().ip() }),
            path_mtu: Mtu::M1024,
            dest_qp_num: PEER_QPN,
            rq_psn: PEER_PSN,
            max_dest_rd_atomic: 4,
            min_rnr_timer: s.min_rnr_timer,
            sq_psn,
            timeout: s.timeout,
            retry_cnt: s.retry_cnt,
            rnr_retry: s.rnr_retry,
            max_rd_atomic: 4,
            ..QpAttr::default()
        };
        n.bring_up(n.qpn, &attr);
        Self {
            e: n.e,
            now: Instant::ZERO,
            qpn: n.qpn,
            cq: n.cq,
            keys: n.keys,
            mem: n.mem,
            sq_psn,
        }
    }

    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: BASE + off,
            length: len,
            lkey: self.keys.lkey,
        }
    }

    fn post(&mut self, id: u64, op: SendOp, sges: Vec<Sge>) {
        self.e
            .post_send(self.now, self.qpn, SendWr::new(id, op, sges))
            .unwrap();
    }

    fn post_recv(&mut self, id: u64) {
        let wr = RecvWr {
            wr_id: id,
            sges: vec![self.sge(0x8_0000, 0x1_0000)].into(),
        };
        self.e.post_recv(self.now, self.qpn, wr).unwrap();
    }

    /// Everything the engine sends now.
    fn sent(&mut self) -> Vec<Sent> {
        let mut out = Vec::new();
        let mut buf = [0u8; 9000];
        while let Some(t) = self.e.poll_transmit(self.now, &mut buf) {
            assert_eq!(t.dest, peer().ip());
            out.push(Sent(buf[..t.len].to_vec()));
        }
        out
    }

    /// Sends the engine a packet from the peer (the ICRC is taken as checked).
    fn inject(&mut self, mut p: PacketRepr<'_>) {
        p.bth.dest_qp = self.qpn;
        inject(&mut self.e, self.now, p);
    }

    /// A READ response from the peer; FIRST, LAST and ONLY carry an AETH, MIDDLE does not.
    fn read_response(&mut self, op: Opcode, psn: u32, data: &[u8]) {
        let mut p = PacketRepr::new(BthRepr::new(op, 0, Psn::new(psn)));
        if op != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE {
            p.aeth = Some(AethRepr {
                syndrome: Syndrome::ACK,
                msn: 1,
            });
        }
        p.payload = data;
        self.inject(p);
    }

    fn ack(&mut self, psn: u32, syndrome: Syndrome) {
        let mut p = PacketRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, 0, Psn::new(psn)));
        p.aeth = Some(AethRepr { syndrome, msn: 0 });
        self.inject(p);
    }

    /// Advances time to `at` (relative to the start), running timers on the way.
    fn at(&mut self, at: Duration) {
        let target = Instant::ZERO + at;
        while let Some(t) = self.e.poll_timeout() {
            if t > target {
                break;
            }
            self.now = t;
            self.e.handle_timeout(t);
        }
        self.now = target;
    }

    /// When the engine's next timer fires.
    fn next_timer(&self) -> Option<Duration> {
        self.e.poll_timeout().map(|t| t - Instant::ZERO)
    }

    fn completions(&mut self) -> Vec<WorkCompletion> {
        std::iter::from_fn(|| self.e.poll_cq(self.cq)).collect()
    }

    fn state(&self) -> QpState {
        self.e.query_qp(self.qpn).unwrap().0.qp_state
    }

    fn remote(&self, off: u64) -> Remote {
        Remote {
            addr: 0x5000 + off,
            rkey: 0x77,
        }
    }
}

fn t(n: u64, timeout: u8) -> Duration {
    Duration::from_nanos(n * (4096 << timeout))
}

#[test]
fn timeout_retries_then_retry_exc_err_at_the_computed_times() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Write(s.remote(0)), vec![s.sge(0, 100)]);
    let first = s.sent();
    assert_eq!(
        (first.len(), first[0].op(), first[0].psn()),
        (1, Opcode::RC_RDMA_WRITE_ONLY, s.sq_psn)
    );
    // retry_cnt = 3: resent at T, 2T, 3T (T = 4.096 us x 2^10), failed at 4T.
    for n in 1..=3 {
        assert_eq!(s.next_timer(), Some(t(n, 10)));
        s.at(t(n, 10));
        let again = s.sent();
        assert_eq!((again.len(), again[0].psn()), (1, s.sq_psn), "retry {n}");
        assert!(s.completions().is_empty());
    }
    s.at(t(4, 10));
    assert!(s.sent().is_empty());
    let wc = s.completions();
    assert_eq!(
        (wc.len(), wc[0].wr_id, wc[0].status),
        (1, 1, WcStatus::RetryExcErr)
    );
    assert_eq!(s.state(), QpState::Err);
    assert_eq!(s.e.counters().retry_exceeded_err, 1);
}

#[test]
fn timeout_retries_within_the_limit_succeed() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Write(s.remote(0)), vec![s.sge(0, 100)]);
    s.sent();
    for n in 1..=3 {
        s.at(t(n, 10));
        assert_eq!(s.sent().len(), 1);
    }
    s.ack(s.sq_psn, Syndrome::ACK);
    let wc = s.completions();
    assert_eq!((wc.len(), wc[0].status), (1, WcStatus::Success));
    assert_eq!(s.state(), QpState::Rts);
    assert_eq!(s.next_timer(), None, "nothing outstanding, no timer");
}

#[test]
fn rnr_retries_then_rnr_retry_exc_err() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Send, vec![s.sge(0, 10)]);
    assert_eq!(s.sent()[0].op(), Opcode::RC_SEND_ONLY);
    // rnr_retry = 2; timer code 1 = 10 us.
    let mut now = Duration::ZERO;
    for n in 1..=2 {
        s.ack(s.sq_psn, Syndrome::RnrNak { timer: 1 });
        assert!(s.sent().is_empty(), "waits out the RNR timer");
        now += Duration::from_micros(10);
        assert_eq!(s.next_timer(), Some(now));
        s.at(now);
        let again = s.sent();
        assert_eq!(
            (again.len(), again[0].psn()),
            (1, s.sq_psn),
            "RNR retry {n}"
        );
    }
    s.ack(s.sq_psn, Syndrome::RnrNak { timer: 1 });
    let wc = s.completions();
    assert_eq!((wc.len(), wc[0].status), (1, WcStatus::RnrRetryExcErr));
    assert_eq!(s.state(), QpState::Err);
    assert_eq!(s.e.counters().rcvd_rnr_err, 3);
}

#[test]
fn rnr_retries_within_the_limit_succeed() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Send, vec![s.sge(0, 10)]);
    s.sent();
    s.ack(s.sq_psn, Syndrome::RnrNak { timer: 3 });
    s.at(Duration::from_micros(30));
    assert_eq!(s.sent().len(), 1);
    s.ack(s.sq_psn, Syndrome::ACK);
    assert_eq!(s.completions()[0].status, WcStatus::Success);
}

#[test]
fn psn_sequence_nak_retries_once_then_timeouts_exhaust_the_count() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Write(s.remote(0)), vec![s.sge(0, 3000)]);
    assert_eq!(s.sent().len(), 3);
    s.ack(s.sq_psn, Syndrome::Nak(NakCode::PsnSequenceError));
    let again = s.sent();
    assert_eq!(
        (again.len(), again[0].op()),
        (3, Opcode::RC_RDMA_WRITE_FIRST),
        "go-back-N"
    );
    // A second NAK of the same PSN with no progress between starts no second retry (rxe
    // `started_retry`); the timer does.
    s.ack(s.sq_psn, Syndrome::Nak(NakCode::PsnSequenceError));
    assert!(s.sent().is_empty());
    for n in 1..=2 {
        s.at(t(n, 10));
        assert_eq!(s.sent().len(), 3, "timeout retry {n}");
    }
    s.at(t(3, 10));
    assert_eq!(s.completions()[0].status, WcStatus::RetryExcErr);
    assert_eq!(
        (
            s.e.counters().rcvd_seq_err,
            s.e.counters().completer_retry_err
        ),
        (2, 3)
    );
}

#[test]
fn partial_retry_of_a_write_resumes_at_the_nakked_packet() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Write(s.remote(0)), vec![s.sge(0, 4000)]);
    let first = s.sent();
    assert_eq!(
        first.iter().map(Sent::op).collect::<Vec<_>>(),
        [
            Opcode::RC_RDMA_WRITE_FIRST,
            Opcode::RC_RDMA_WRITE_MIDDLE,
            Opcode::RC_RDMA_WRITE_MIDDLE,
            Opcode::RC_RDMA_WRITE_LAST
        ]
    );
    // The peer got the first two packets: NAK at the third.
    s.ack(s.sq_psn + 2, Syndrome::Nak(NakCode::PsnSequenceError));
    let again = s.sent();
    assert_eq!(
        again.iter().map(|p| (p.op(), p.psn())).collect::<Vec<_>>(),
        [
            (Opcode::RC_RDMA_WRITE_MIDDLE, s.sq_psn + 2),
            (Opcode::RC_RDMA_WRITE_LAST, s.sq_psn + 3)
        ]
    );
    assert_eq!(
        again[0].pkt().payload,
        first[2].pkt().payload,
        "the same bytes at the same PSN"
    );
    s.ack(s.sq_psn + 3, Syndrome::ACK);
    assert_eq!(s.completions()[0].status, WcStatus::Success);
}

#[test]
fn partial_retry_of_a_read_asks_for_the_rest() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Read(s.remote(0)), vec![s.sge(0, 4000)]);
    let req = s.sent();
    let reth = req[0].pkt().reth.unwrap();
    assert_eq!(
        (req[0].op(), reth.dma_len),
        (Opcode::RC_RDMA_READ_REQUEST, 4000)
    );
    let data: Vec<u8> = (0..4000u32).map(|i| i as u8).collect();
    let p0 = s.sq_psn;
    s.read_response(Opcode::RC_RDMA_READ_RESPONSE_FIRST, p0, &data[..1024]);
    s.read_response(
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        p0 + 1,
        &data[1024..2048],
    );
    // The second MIDDLE is lost; the LAST after the gap is dropped, and the READ is asked
    // again at once from the first missing response (what rxe's timer would send later;
    // `Config::rxe_recovery`).
    s.read_response(Opcode::RC_RDMA_READ_RESPONSE_LAST, p0 + 3, &data[3072..]);
    let retry = s.sent();
    assert_eq!(retry.len(), 1);
    let r = retry[0].pkt();
    assert_eq!(
        (r.opcode(), r.bth.psn.value()),
        (Opcode::RC_RDMA_READ_REQUEST, p0 + 2)
    );
    assert_eq!(
        (r.reth.unwrap().va, r.reth.unwrap().dma_len),
        (reth.va + 2048, 4000 - 2048)
    );
    // rxe replays from the middle: MIDDLE, LAST.
    s.read_response(
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        p0 + 2,
        &data[2048..3072],
    );
    s.read_response(Opcode::RC_RDMA_READ_RESPONSE_LAST, p0 + 3, &data[3072..]);
    let wc = s.completions();
    assert_eq!((wc[0].status, wc[0].byte_len), (WcStatus::Success, 4000));
    let mut got = vec![0; 4000];
    s.mem.read(0, &mut got);
    assert_eq!(got, data);
}

#[test]
fn implied_nak_resends_an_unanswered_read() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Read(s.remote(0)), vec![s.sge(0, 8)]);
    s.post(2, SendOp::Send, vec![s.sge(8, 8)]);
    let sent = s.sent();
    assert_eq!(
        sent.iter().map(|p| (p.op(), p.psn())).collect::<Vec<_>>(),
        [
            (Opcode::RC_RDMA_READ_REQUEST, s.sq_psn),
            (Opcode::RC_SEND_ONLY, s.sq_psn + 1)
        ]
    );
    // An ACK of the SEND says the READ's response was lost.
    s.ack(s.sq_psn + 1, Syndrome::ACK);
    let again = s.sent();
    assert_eq!(
        (again[0].op(), again[0].psn()),
        (Opcode::RC_RDMA_READ_REQUEST, s.sq_psn)
    );
    assert!(s.completions().is_empty(), "nothing completes out of order");
    assert_eq!(s.e.counters().completer_retry_err, 1);
}

#[test]
fn ghost_ack_is_dropped() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Send, vec![s.sge(0, 8)]);
    s.sent();
    s.ack(s.sq_psn + 5, Syndrome::ACK);
    assert!(s.completions().is_empty());
    assert_eq!(s.e.counters().drop_ghost_ack, 1);
    s.ack(s.sq_psn, Syndrome::ACK);
    assert_eq!(s.completions()[0].status, WcStatus::Success);
}

#[test]
fn a_response_of_the_wrong_kind_is_a_bad_response() {
    let mut s = Script::new(Setup::default());
    s.post(1, SendOp::Read(s.remote(0)), vec![s.sge(0, 8)]);
    s.sent();
    let mut p = PacketRepr::new(BthRepr::new(
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        0,
        Psn::new(s.sq_psn),
    ));
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK,
        msn: 1,
    });
    p.atomic_ack_eth = Some(AtomicAckEthRepr { orig: 5 });
    s.inject(p);
    assert_eq!(s.completions()[0].status, WcStatus::BadRespErr);
    assert_eq!(s.state(), QpState::Err);
}

#[test]
fn each_nak_code_completes_with_its_status() {
    for (code, status) in [
        (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
        (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
        (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
    ] {
        let mut s = Script::new(Setup::default());
        s.post(1, SendOp::Send, vec![s.sge(0, 8)]);
        s.post(2, SendOp::Send, vec![s.sge(0, 8)]);
        s.post(3, SendOp::Send, vec![s.sge(0, 8)]);
        assert_eq!(s.sent().len(), 3);
        s.ack(s.sq_psn + 1, Syndrome::Nak(code));
        let wc: Vec<_> = s
            .completions()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect();
        assert_eq!(
            wc,
            [
                (1, WcStatus::Success),
                (2, status),
                (3, WcStatus::WrFlushErr)
            ],
            "{code:?}"
        );
        assert_eq!(s.state(), QpState::Err);
    }
}

// ---- The engine as responder ----

fn request(op: Opcode, psn: u32, ack: bool, payload: &[u8]) -> PacketRepr<'_> {
    let mut b = BthRepr::new(op, 0, Psn::new(psn));
    b.ack_req = ack;
    let mut p = PacketRepr::new(b);
    p.payload = payload;
    p
}

#[test]
fn rkey_violation_naks_and_errs_the_responder() {
    let mut s = Script::new(Setup::default());
    s.post_recv(9);
    let mut p = request(Opcode::RC_RDMA_WRITE_ONLY, PEER_PSN, true, b"abcd");
    p.reth = Some(RethRepr {
        va: BASE,
        rkey: s.keys.rkey ^ 1,
        dma_len: 4,
    });
    s.inject(p);
    let out = s.sent();
    assert_eq!(
        (out[0].op(), out[0].psn(), out[0].aeth()),
        (
            Opcode::RC_ACKNOWLEDGE,
            PEER_PSN,
            (Syndrome::Nak(NakCode::RemoteAccessError), 0)
        )
    );
    assert_eq!(s.state(), QpState::Err);
    let wc = s.completions();
    assert_eq!(
        (wc[0].wr_id, wc[0].status),
        (9, WcStatus::WrFlushErr),
        "posted receives are flushed"
    );
}

#[test]
fn out_of_bounds_write_is_a_remote_access_error() {
    let mut s = Script::new(Setup::default());
    let mut p = request(Opcode::RC_RDMA_WRITE_ONLY, PEER_PSN, true, b"abcd");
    p.reth = Some(RethRepr {
        va: BASE + (1 << 20) - 2,
        rkey: s.keys.rkey,
        dma_len: 4,
    });
    s.inject(p);
    assert_eq!(
        s.sent()[0].aeth().0,
        Syndrome::Nak(NakCode::RemoteAccessError)
    );
}

#[test]
fn missing_first_is_an_invalid_request() {
    let mut s = Script::new(Setup::default());
    s.post_recv(1);
    s.inject(request(Opcode::RC_SEND_MIDDLE, PEER_PSN, true, &[0; 1024]));
    assert_eq!(s.sent()[0].aeth().0, Syndrome::Nak(NakCode::InvalidRequest));
    assert_eq!(s.state(), QpState::Err);
}

#[test]
fn acks_follow_ackreq_and_count_messages() {
    let mut s = Script::new(Setup::default());
    for i in 0..3 {
        s.post_recv(i);
    }
    s.inject(request(Opcode::RC_SEND_ONLY, PEER_PSN, false, b"x"));
    assert!(s.sent().is_empty(), "no AckReq, no ACK");
    s.inject(request(
        Opcode::RC_SEND_FIRST,
        PEER_PSN + 1,
        false,
        &[1; 1024],
    ));
    s.inject(request(Opcode::RC_SEND_LAST, PEER_PSN + 2, true, b"yz"));
    let out = s.sent();
    assert_eq!(
        (out.len(), out[0].psn(), out[0].aeth()),
        (1, PEER_PSN + 2, (Syndrome::ACK, 2))
    );
    let wc = s.completions();
    assert_eq!(wc.iter().map(|w| w.byte_len).collect::<Vec<_>>(), [1, 1026]);
}

#[test]
fn one_nak_per_gap_then_silence() {
    let mut s = Script::new(Setup::default());
    s.post_recv(1);
    for psn in [PEER_PSN + 1, PEER_PSN + 2, PEER_PSN + 3] {
        s.inject(request(Opcode::RC_SEND_ONLY, psn, true, b"x"));
    }
    let out = s.sent();
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].psn(), out[0].aeth().0),
        (PEER_PSN, Syndrome::Nak(NakCode::PsnSequenceError))
    );
    assert_eq!(s.e.counters().out_of_seq_request, 3);
    s.inject(request(Opcode::RC_SEND_ONLY, PEER_PSN, true, b"x"));
    assert_eq!(s.sent()[0].aeth(), (Syndrome::ACK, 1));
}

#[test]
fn duplicate_send_is_acked_with_the_last_psn_accepted() {
    let mut s = Script::new(Setup::default());
    s.post_recv(1);
    s.post_recv(2);
    for psn in [PEER_PSN, PEER_PSN + 1] {
        s.inject(request(Opcode::RC_SEND_ONLY, psn, false, b"x"));
    }
    s.inject(request(Opcode::RC_SEND_ONLY, PEER_PSN, false, b"x"));
    let out = s.sent();
    assert_eq!(
        (out.len(), out[0].psn(), out[0].aeth()),
        (1, PEER_PSN + 1, (Syndrome::ACK, 2))
    );
    assert_eq!(s.completions().len(), 2, "executed once");
}

#[test]
fn rnr_nak_carries_the_psn_and_does_not_advance() {
    let mut s = Script::new(Setup::default());
    let p = request(Opcode::RC_SEND_ONLY, PEER_PSN, true, b"x");
    s.inject(p);
    let out = s.sent();
    assert_eq!(
        (out[0].psn(), out[0].aeth()),
        (PEER_PSN, (Syndrome::RnrNak { timer: 12 }, 0))
    );
    s.post_recv(1);
    s.inject(p);
    assert_eq!(
        s.sent()[0].aeth(),
        (Syndrome::ACK, 1),
        "the resent request is new, not a duplicate"
    );
}

#[test]
fn duplicate_read_is_replayed_from_its_psn_with_the_current_msn() {
    let mut s = Script::new(Setup::default());
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    s.mem.write(0, &data);
    let mut p = request(Opcode::RC_RDMA_READ_REQUEST, PEER_PSN, true, &[]);
    p.reth = Some(RethRepr {
        va: BASE,
        rkey: s.keys.rkey,
        dma_len: 3000,
    });
    s.inject(p);
    let first = s.sent();
    assert_eq!(
        first.iter().map(|p| (p.op(), p.psn())).collect::<Vec<_>>(),
        [
            (Opcode::RC_RDMA_READ_RESPONSE_FIRST, PEER_PSN),
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, PEER_PSN + 1),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, PEER_PSN + 2)
        ]
    );
    s.post_recv(1);
    s.inject(request(Opcode::RC_SEND_ONLY, PEER_PSN + 3, true, b"z"));
    assert_eq!(s.sent()[0].aeth(), (Syndrome::ACK, 2));
    // The requester lost the last two responses and asks again from the middle.
    let mut again = request(Opcode::RC_RDMA_READ_REQUEST, PEER_PSN + 1, true, &[]);
    again.reth = Some(RethRepr {
        va: BASE + 1024,
        rkey: s.keys.rkey,
        dma_len: 3000 - 1024,
    });
    s.inject(again);
    let replay = s.sent();
    assert_eq!(
        replay.iter().map(|p| (p.op(), p.psn())).collect::<Vec<_>>(),
        [
            (Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, PEER_PSN + 1),
            (Opcode::RC_RDMA_READ_RESPONSE_LAST, PEER_PSN + 2)
        ]
    );
    assert_eq!(replay[1].aeth(), (Syndrome::ACK, 2), "the current MSN");
    assert_eq!(replay[0].pkt().payload, &data[1024..2048]);
}

#[test]
fn duplicate_atomic_returns_the_saved_value_without_executing() {
    let mut s = Script::new(Setup::default());
    s.mem.write(64, &10u64.to_ne_bytes());
    let mut p = request(Opcode::RC_FETCH_ADD, PEER_PSN, true, &[]);
    p.atomic_eth = Some(AtomicEthRepr {
        va: BASE + 64,
        rkey: s.keys.rkey,
        swap_add: 5,
        compare: 0,
    });
    s.inject(p);
    s.inject(p);
    let out = s.sent();
    assert_eq!(out.len(), 2);
    for o in &out {
        assert_eq!(
            (o.op(), o.psn(), o.pkt().atomic_ack_eth.unwrap().orig),
            (Opcode::RC_ATOMIC_ACKNOWLEDGE, PEER_PSN, 10)
        );
    }
    let mut v = [0u8; 8];
    s.mem.read(64, &mut v);
    assert_eq!(u64::from_ne_bytes(v), 15, "added once");
}

#[test]
fn misaligned_atomic_is_an_invalid_request() {
    let mut s = Script::new(Setup::default());
    let mut p = request(Opcode::RC_COMPARE_SWAP, PEER_PSN, true, &[]);
    p.atomic_eth = Some(AtomicEthRepr {
        va: BASE + 4,
        rkey: s.keys.rkey,
        swap_add: 5,
        compare: 0,
    });
    s.inject(p);
    assert_eq!(s.sent()[0].aeth().0, Syndrome::Nak(NakCode::InvalidRequest));
}

#[test]
fn packets_from_another_address_are_dropped() {
    let mut s = Script::new(Setup::default());
    s.post_recv(1);
    let mut p = request(Opcode::RC_SEND_ONLY, PEER_PSN, true, b"x");
    p.bth.dest_qp = s.qpn;
    let p = p.with_canonical_pad();
    let mut buf = vec![0u8; p.buffer_len()];
    p.emit(&mut buf).unwrap();
    let intruder = SocketAddr::new([198, 18, 0, 66].into(), 49458);
    s.e.handle_packet(s.now, intruder, LOCAL.into(), &buf, IcrcStatus::Valid);
    assert!(s.sent().is_empty());
    assert_eq!(s.e.counters().drop_wrong_source, 1);
    assert!(s.completions().is_empty());
    let _ = WcOpcode::Recv;
}

#[test]
fn ackreq_on_the_last_packet_and_every_64() {
    let mut s = Script::new(Setup::default());
    // 100 packets of 1024 bytes.
    s.post(1, SendOp::Write(s.remote(0)), vec![s.sge(0, 100 * 1024)]);
    let mut sent = s.sent();
    // The window holds 128 PSNs, so all 100 go out at once.
    assert_eq!(sent.len(), 100);
    let acked: Vec<usize> = sent
        .iter()
        .enumerate()
        .filter(|(_, p)| p.pkt().bth.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        acked,
        [64, 99],
        "rxe: AckReq when more than 64 packets went without one, and on the last"
    );
    sent.clear();
}

#[test]
fn unsignaled_requests_complete_silently_unless_they_fail() {
    let mut s = Script::new(Setup::default());
    let mut quiet = SendWr::new(1, SendOp::Send, vec![s.sge(0, 8)]);
    quiet.flags.signaled = false;
    s.e.post_send(s.now, s.qpn, quiet.clone()).unwrap();
    s.post(2, SendOp::Send, vec![s.sge(0, 8)]);
    s.e.post_send(s.now, s.qpn, SendWr { wr_id: 3, ..quiet })
        .unwrap();
    assert_eq!(s.sent().len(), 3);
    s.ack(s.sq_psn + 1, Syndrome::ACK);
    let wc: Vec<_> = s
        .completions()
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(wc, [(2, WcStatus::Success)], "only the signaled one");
    // The unsignaled third fails: it completes, in error.
    s.ack(s.sq_psn + 2, Syndrome::Nak(NakCode::RemoteOperationalError));
    let wc: Vec<_> = s
        .completions()
        .iter()
        .map(|w| (w.wr_id, w.status))
        .collect();
    assert_eq!(wc, [(3, WcStatus::RemOpErr)]);
}

#[test]
fn max_rd_atomic_bounds_outstanding_reads() {
    let mut s = Script::new(Setup::default());
    for i in 0..6 {
        s.post(i, SendOp::Read(s.remote(0)), vec![s.sge(0, 8)]);
    }
    // Setup gives max_rd_atomic = 4.
    let first = s.sent();
    assert_eq!(first.len(), 4);
    s.read_response(Opcode::RC_RDMA_READ_RESPONSE_ONLY, s.sq_psn, &[0; 8]);
    let more = s.sent();
    assert_eq!(
        (more.len(), more[0].psn()),
        (1, s.sq_psn + 4),
        "one answered, one more may go"
    );
}
