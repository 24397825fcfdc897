//! Two RC connections between the same two hosts, as perftest's `-R` makes them between
//! rocexd and rxe: rocexd's requests leave from UDP port 4791, rxe's ACKs from the port
//! its rdma_cm flow label gives each connection. The ACKs are tied to their connections
//! by the QPN pairs the capture's CM REQ and REP name; without those MADs they cannot be
//! (they were counted as orphans).

use core::net::IpAddr;

use rocex_cm::conn::{AcceptParams, Conn, ConnectParams, Local};
use rocex_cm::{MAD_LEN, Mad, ReqRepr, rep, req};
use rocex_conform::connection::{Split, split};
use rocex_dump::capture::Captured;
use rocex_proto::Instant;
use rocex_proto::verbs::Mtu;
use rocex_wire::frame::FrameRepr;
use rocex_wire::{
    AethRepr, BthRepr, DethRepr, Opcode, PacketRepr, Psn, ROCE_V2_PORT, RethRepr, Syndrome,
};

const A: [u8; 4] = [198, 18, 0, 1];
const B: [u8; 4] = [198, 18, 0, 2];
/// (active QPN at A, passive QPN at B) of each connection.
const CONNS: [(u32, u32); 2] = [(0x11, 0x21), (0x12, 0x22)];

fn frame(ts: f64, src: [u8; 4], dst: [u8; 4], sport: u16, p: PacketRepr<'_>) -> Captured {
    let f = FrameRepr::ipv4(([2; 6], [4; 6]), (src, dst), sport, p).unwrap();
    let mut data = vec![0; 9000];
    let n = f.emit(&mut data).unwrap();
    data.truncate(n);
    Captured {
        ts,
        data,
        orig_len: n as u32,
    }
}

/// A CM MAD as rxe sends it: a UD SEND to QP1.
fn mad(ts: f64, src: [u8; 4], dst: [u8; 4], m: &Mad) -> Captured {
    let mut body = [0u8; MAD_LEN];
    m.emit(&mut body).unwrap();
    let mut p = PacketRepr::new(BthRepr::new(Opcode::UD_SEND_ONLY, 1, Psn::new(0)));
    p.deth = Some(DethRepr {
        qkey: 0x8001_0000,
        src_qp: 1,
        reserved: 0,
    });
    p.payload = &body;
    frame(ts, src, dst, ROCE_V2_PORT, p)
}

/// The REQ from A and the REP from B that connect A's `qa` with B's `qb`.
fn handshake(ts: f64, (qa, qb): (u32, u32)) -> [Captured; 2] {
    let (a, b) = (IpAddr::from(A), IpAddr::from(B));
    let connect = ConnectParams {
        qpn: qa,
        starting_psn: 100,
        service_id: 0x0106_0000_0000_4567,
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        path_mtu: Mtu::M1024,
        traffic_class: 0,
        private_data: [0; req::PRIVATE_DATA_LEN],
    };
    let comm_id = 0x1000 + qa;
    let req = Conn::connect(Instant::ZERO, Local::at(a), b, &connect, 7, comm_id)
        .poll_transmit()
        .unwrap();
    let rocex_cm::Message::Req(r) = req.msg else {
        panic!("a REQ first")
    };
    let accept = AcceptParams {
        qpn: qb,
        starting_psn: 500,
        responder_resources: 1,
        initiator_depth: 1,
        rnr_retry_count: 7,
        max_mtu: Mtu::M1024,
        private_data: [0; rep::PRIVATE_DATA_LEN],
    };
    let rep = accept_rep(b, a, &r, &accept);
    [mad(ts, A, B, &req), mad(ts + 1e-4, B, A, &rep)]
}

fn accept_rep(b: IpAddr, a: IpAddr, r: &ReqRepr, p: &AcceptParams) -> Mad {
    Conn::accept(Instant::ZERO, Local::at(b), a, 7, r, p, 0x2000 + p.qpn)
        .unwrap()
        .poll_transmit()
        .unwrap()
}

/// A WRITE_ONLY from A to B's `qb` at `psn`, and B's ACK of it to A's `qa`, from UDP port
/// `ack_sport`.
fn write_and_ack(ts: f64, (qa, qb): (u32, u32), psn: u32, ack_sport: u16) -> [Captured; 2] {
    let data = [0x5a; 64];
    let mut w = PacketRepr::new(BthRepr::new(Opcode::RC_RDMA_WRITE_ONLY, qb, Psn::new(psn)));
    w.bth.ack_req = true;
    w.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0x77,
        dma_len: 64,
    });
    w.payload = &data;
    let mut ack = PacketRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, qa, Psn::new(psn)));
    ack.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK,
        msn: 1,
    });
    [
        frame(ts, A, B, ROCE_V2_PORT, w),
        frame(ts + 1e-5, B, A, ack_sport, ack),
    ]
}

/// The capture: (with `cm`) both handshakes, both WRITEs, then the second connection's
/// ACK before the first's.
fn capture(cm: bool) -> Vec<Captured> {
    let mut f = Vec::new();
    if cm {
        f.extend(handshake(1.0, CONNS[0]));
        f.extend(handshake(1.1, CONNS[1]));
    }
    let [w1, ack1] = write_and_ack(2.0, CONNS[0], 500, 0xc0f1);
    let [w2, ack2] = write_and_ack(2.0, CONNS[1], 900, 0xd3a7);
    f.extend([w1, w2, ack2, ack1]);
    f
}

/// Each connection's (responder QPN, requester QPN, destination QPNs of its responses).
fn attribution(s: &Split) -> Vec<(u32, Option<u32>, Vec<u32>)> {
    s.connections
        .iter()
        .map(|c| {
            let to = c.responses.iter().map(|r| r.dest_qpn).collect();
            (c.resp_qpn, c.req_qpn, to)
        })
        .collect()
}

#[test]
fn cm_qpn_pairs_split_connections_sharing_a_port() {
    let s = split(&capture(true), |p| p == ROCE_V2_PORT);
    assert_eq!(s.skipped.cm, 4);
    assert_eq!(
        attribution(&s),
        [
            (0x21, Some(0x11), vec![0x11]),
            (0x22, Some(0x12), vec![0x12]),
        ]
    );
}

#[test]
fn without_cm_the_ports_cannot_tie_the_acks() {
    let s = split(&capture(false), |p| p == ROCE_V2_PORT);
    assert_eq!(s.skipped.orphan_responses, 2);
    assert_eq!(
        attribution(&s),
        [(0x21, None, vec![]), (0x22, None, vec![])]
    );
}
