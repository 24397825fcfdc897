//! A READ response or atomic ACK past the oldest unanswered READ or atomic shows that
//! request's response lost, as an ACK past it does: the requester goes back at once (rxe
//! `check_psn` in `rxe_comp.c`: COMPST_ERROR_RETRY), instead of waiting for its timer.
//! Found by `rocex conform replay --requester` on `pcaps/atomic_bw_faa-loss5.pcap`, where
//! rxe resent FETCH_ADD 401 0.1 ms after an ATOMIC_ACK for 406 arrived with 401's lost.

use rocex_proto::verbs::{AddressVector, Mtu, QpAttr, QpState, Remote, SendOp, SendWr, Sge};
use rocex_proto::{Access, Config, Engine, Instant};
use rocex_wire::{AethRepr, AtomicAckEthRepr, BthRepr, Opcode, PacketRepr, Psn, Syndrome};

mod common;
use common::{LOCAL, Node, Spec, inject, peer};

const SQ_PSN: u32 = 0x100;

struct Peer {
    e: Engine,
    qpn: u32,
    lkey: u32,
}

fn setup() -> Peer {
    setup_with(false)
}

/// `rxe_recovery`: retransmit only when rxe would (`Config::rxe_recovery`).
fn setup_with(rxe_recovery: bool) -> Peer {
    let config = Config {
        rxe_recovery,
        ..Config::new(LOCAL.into(), [3; 32])
    };
    let spec = Spec {
        iova: 0x1000,
        access: Access::LOCAL_WRITE,
        ..Spec::default()
    };
    let mut n = Node::new(config, spec);
    let attr = QpAttr {
        qp_state: QpState::Rts,
        ah_attr: Some(AddressVector { dest: peer().ip() }),
        path_mtu: Mtu::M1024,
        dest_qp_num: 0x11,
        sq_psn: SQ_PSN,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 8,
        max_dest_rd_atomic: 8,
        port_num: 1,
        ..QpAttr::default()
    };
    n.bring_up(n.qpn, &attr);
    Peer {
        e: n.e,
        qpn: n.qpn,
        lkey: n.keys.lkey,
    }
}

impl Peer {
    fn post(&mut self, id: u64, op: SendOp, len: u32) {
        let sge = Sge {
            addr: 0x1000 + 8 * id,
            length: len,
            lkey: self.lkey,
        };
        let wr = SendWr::new(id, op, [sge]);
        self.e.post_send(Instant::ZERO, self.qpn, wr).unwrap();
    }

    /// (opcode, PSN) of everything the engine sends now.
    fn sent(&mut self) -> Vec<(Opcode, u32)> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4200];
        while let Some(t) = self.e.poll_transmit(Instant::ZERO, &mut buf) {
            let p = PacketRepr::parse(&buf[..t.len]).unwrap().0;
            out.push((p.opcode(), p.bth.psn.value()));
        }
        out
    }

    fn inject(&mut self, p: PacketRepr<'_>) {
        inject(&mut self.e, Instant::ZERO, p);
    }
}

fn atomic_ack(qpn: u32, psn: u32) -> PacketRepr<'static> {
    let mut p = PacketRepr::new(BthRepr::new(
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        qpn,
        Psn::new(psn),
    ));
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK,
        msn: 2,
    });
    p.atomic_ack_eth = Some(AtomicAckEthRepr { orig: 7 });
    p
}

fn fetch_add(id: u64) -> SendOp {
    SendOp::FetchAdd {
        remote: Remote {
            addr: 0x8000 + 8 * id,
            rkey: 0x2fa,
        },
        add: 1,
    }
}

#[test]
fn an_atomic_ack_past_an_unanswered_atomic_resends_it_at_once() {
    let mut p = setup();
    p.post(0, fetch_add(0), 8);
    p.post(1, fetch_add(1), 8);
    assert_eq!(
        p.sent(),
        [
            (Opcode::RC_FETCH_ADD, SQ_PSN),
            (Opcode::RC_FETCH_ADD, SQ_PSN + 1)
        ]
    );
    // The first ACK is lost; the second says so.
    p.inject(atomic_ack(p.qpn, SQ_PSN + 1));
    assert_eq!(
        p.sent(),
        [
            (Opcode::RC_FETCH_ADD, SQ_PSN),
            (Opcode::RC_FETCH_ADD, SQ_PSN + 1)
        ]
    );
    assert_eq!(p.e.counters().completer_retry_err, 1);
    // Further signs of the same loss start no second retry (rxe `started_retry`).
    p.inject(atomic_ack(p.qpn, SQ_PSN + 1));
    assert!(p.sent().is_empty());
    assert_eq!(p.e.counters().completer_retry_err, 1);
}

/// A READ of two responses whose FIRST is lost, the LAST handed to the requester.
fn read_with_first_lost(p: &mut Peer) {
    let remote = Remote {
        addr: 0x8000,
        rkey: 0x2fa,
    };
    p.post(0, SendOp::Read(remote), 2048);
    assert_eq!(p.sent(), [(Opcode::RC_RDMA_READ_REQUEST, SQ_PSN)]);
    read_again_last(p);
}

#[test]
fn a_read_response_inside_its_own_read_after_a_gap_waits_for_the_timer_in_rxe_recovery() {
    // rxe's completer drops it and leaves the loss to its timer (`check_psn`: COMPST_DONE).
    let mut p = setup_with(true);
    read_with_first_lost(&mut p);
    assert!(p.sent().is_empty());
    assert_eq!(p.e.counters().completer_retry_err, 0);
    assert_eq!(p.e.counters().drop_out_of_seq, 1);
}

#[test]
fn a_read_response_inside_its_own_read_after_a_gap_restarts_the_read_at_once() {
    // rocex asks again from the first missing response, the READ rxe's timer would send.
    let mut p = setup();
    read_with_first_lost(&mut p);
    assert_eq!(p.sent(), [(Opcode::RC_RDMA_READ_REQUEST, SQ_PSN)]);
    assert_eq!(p.e.counters().completer_retry_err, 1);
    // The same loss seen again starts no second retry (rxe `started_retry`).
    read_again_last(&mut p);
    assert!(p.sent().is_empty());
    assert_eq!(p.e.counters().completer_retry_err, 1);
    assert_eq!(p.e.counters().drop_out_of_seq, 2);
}

/// The READ's LAST response, at PSN + 1.
fn read_again_last(p: &mut Peer) {
    let data = [0u8; 1024];
    let mut last = PacketRepr::new(BthRepr::new(
        Opcode::RC_RDMA_READ_RESPONSE_LAST,
        p.qpn,
        Psn::new(SQ_PSN + 1),
    ));
    last.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK,
        msn: 1,
    });
    last.payload = &data;
    p.inject(last);
}
