//! The CM between two in-process engines, its MADs on each engine's QP1 (UD, Q_Key
//! 0x80010000) and its QP attributes applied to real RC QPs, over a seeded lossy link in
//! virtual time: the handshake completes, SENDs flow both ways on the connected QPs, and
//! the disconnect ends both sides, at every seed with a fifth of all packets lost.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rocex_cm::conn::{self, AcceptParams, Conn, Event, Local, State};
use rocex_cm::{MAD_LEN, Mad, Message, cma};
use rocex_proto::verbs::{
    AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendData, SendOp, SendWr, Sge, UdDest,
    WcOpcode, WcStatus,
};
use rocex_proto::{
    Access, Config, Engine, GRH_LEN, GSI_QPN, IcrcStatus, Instant, QpInit, Region, VecRegion,
};

mod common;

const GSI_QKEY: u32 = 0x8001_0000;
const SLOT: u64 = (GRH_LEN + MAD_LEN) as u64;
const SLOTS: u64 = 16;
const GSI_BASE: u64 = 0x10_0000;
const DATA_BASE: u64 = 0x20_0000;
const MSG: u32 = 64;
const MSGS: u32 = 5;

struct Node {
    ip: IpAddr,
    e: Engine,
    gsi_cq: u32,
    lkey: u32,
    mem: Arc<VecRegion>,
    rc_cq: u32,
    rc_qp: u32,
}

impl Node {
    fn new(ip: [u8; 4], seed: u8) -> Self {
        let ip = IpAddr::from(ip);
        let mut e = Engine::new(Config::new(ip, [seed; 32]));
        let pd = e.alloc_pd();
        let mem = Arc::new(VecRegion::new(0x20_0000));
        let keys = e
            .reg_mr(pd, GSI_BASE, 0x20_0000, Access::LOCAL_WRITE, mem.clone())
            .unwrap();
        let gsi_cq = e.create_cq(128).unwrap();
        let rc_cq = e.create_cq(128).unwrap();
        let init = |qp_type, cq| QpInit {
            qp_type,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
        };
        e.create_gsi_qp(init(QpType::Ud, gsi_cq)).unwrap();
        let mut a = QpAttr {
            qp_state: QpState::Init,
            qkey: GSI_QKEY,
            ..QpAttr::default()
        };
        let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT;
        e.modify_qp(1, &a, m | AttrMask::QKEY).unwrap();
        a.qp_state = QpState::Rtr;
        e.modify_qp(1, &a, AttrMask::STATE).unwrap();
        a.qp_state = QpState::Rts;
        e.modify_qp(1, &a, AttrMask::STATE | AttrMask::SQ_PSN)
            .unwrap();
        let rc_qp = e.create_qp(init(QpType::Rc, rc_cq)).unwrap();
        let a = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::LOCAL_WRITE,
            ..QpAttr::default()
        };
        e.modify_qp(rc_qp, &a, m | AttrMask::ACCESS_FLAGS).unwrap();
        let mut n = Self {
            ip,
            e,
            gsi_cq,
            lkey: keys.lkey,
            mem,
            rc_cq,
            rc_qp,
        };
        for slot in 0..SLOTS {
            n.post_gsi_recv(slot);
        }
        for i in 0..MSGS {
            let wr = RecvWr {
                wr_id: 100 + u64::from(i),
                sges: vec![Sge {
                    addr: DATA_BASE + u64::from(i * MSG),
                    length: MSG,
                    lkey: n.lkey,
                }]
                .into(),
            };
            n.e.post_recv(Instant::ZERO, n.rc_qp, wr).unwrap();
        }
        n
    }

    fn post_gsi_recv(&mut self, slot: u64) {
        let wr = RecvWr {
            wr_id: slot,
            sges: vec![Sge {
                addr: GSI_BASE + slot * SLOT,
                length: SLOT as u32,
                lkey: self.lkey,
            }]
            .into(),
        };
        self.e.post_recv(Instant::ZERO, GSI_QPN, wr).unwrap();
    }

    fn send_mad(&mut self, now: Instant, to: IpAddr, mad: &Mad) {
        let mut b = vec![0u8; MAD_LEN];
        mad.emit(&mut b).unwrap();
        let mut wr = SendWr::new(u64::MAX, SendOp::Send, vec![]);
        wr.data = SendData::Inline(b);
        wr.ud = Some(UdDest {
            dest: to,
            remote_qpn: GSI_QPN,
            remote_qkey: GSI_QKEY,
        });
        self.e.post_send(now, GSI_QPN, wr).unwrap();
    }

    fn recv_mads(&mut self) -> Vec<Mad> {
        let mut v = Vec::new();
        while let Some(wc) = self.e.poll_cq(self.gsi_cq) {
            if wc.wr_id == u64::MAX {
                continue;
            }
            assert_eq!((wc.status, wc.src_qp), (WcStatus::Success, GSI_QPN));
            let mut b = vec![0u8; MAD_LEN];
            self.mem.read(wc.wr_id * SLOT + GRH_LEN as u64, &mut b);
            v.push(Mad::parse(&b).expect("a CM MAD"));
            self.post_gsi_recv(wc.wr_id);
        }
        v
    }

    fn send_data(&mut self, now: Instant) {
        for i in 0..MSGS {
            let at = DATA_BASE + 0x1000 + u64::from(i * MSG);
            self.mem.write(
                at - GSI_BASE,
                &[self.ip.to_string().len() as u8 + i as u8; MSG as usize],
            );
            let wr = SendWr::new(
                i.into(),
                SendOp::Send,
                vec![Sge {
                    addr: at,
                    length: MSG,
                    lkey: self.lkey,
                }],
            );
            self.e.post_send(now, self.rc_qp, wr).unwrap();
        }
    }
}

/// Two nodes on a link that drops packets by a seeded coin.
struct Net {
    now: Instant,
    rng: u64,
    loss_per_mille: u64,
    lost: u64,
    nodes: [Node; 2],
    buf: Vec<u8>,
}

impl Net {
    fn coin(&mut self) -> u64 {
        // xorshift64*: reproducible per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) % 1000
    }

    /// Delivers everything the engines send (20 µs a hop), lossily, until both are quiet.
    fn exchange(&mut self) {
        loop {
            let mut any = false;
            for from in 0..2 {
                while let Some(t) = self.nodes[from].e.poll_transmit(self.now, &mut self.buf) {
                    any = true;
                    if self.coin() < self.loss_per_mille {
                        self.lost += 1;
                        continue;
                    }
                    let src = SocketAddr::new(self.nodes[from].ip, 4791);
                    let pkt = self.buf[..t.len].to_vec();
                    self.now = self.now + Duration::from_micros(20);
                    let to = &mut self.nodes[1 - from];
                    to.e.handle_packet(self.now, src, t.dest, &pkt, IcrcStatus::Valid);
                }
            }
            if !any {
                return;
            }
        }
    }

    /// Moves time to the next timer of an engine or a connection and runs it.
    fn advance(&mut self, conns: &mut [&mut Conn]) {
        let next = self
            .nodes
            .iter()
            .filter_map(|n| n.e.poll_timeout())
            .chain(conns.iter().filter_map(|c| c.poll_timeout()))
            .min()
            .expect("something is pending");
        self.now = self.now.max(next);
        for n in &mut self.nodes {
            n.e.handle_timeout(self.now);
        }
        for c in conns.iter_mut() {
            c.handle_timeout(self.now);
        }
    }
}

fn pump(net: &mut Net, side: usize, c: &mut Conn) {
    for mad in net.nodes[side].recv_mads() {
        let from = net.nodes[1 - side].ip;
        if c.owns(from, &mad) {
            c.handle(net.now, &mad);
        }
    }
    while let Some(m) = c.poll_transmit() {
        net.nodes[side].send_mad(net.now, from_ip(net, 1 - side), &m);
    }
}

fn from_ip(net: &Net, i: usize) -> IpAddr {
    net.nodes[i].ip
}

fn run(seed: u64, loss_per_mille: u64) -> u64 {
    let mut net = Net {
        now: Instant::ZERO,
        rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        loss_per_mille,
        lost: 0,
        nodes: [Node::new([198, 18, 0, 1], 1), Node::new([198, 18, 0, 2], 2)],
        buf: vec![0u8; 4096 + 80],
    };
    let (a_ip, b_ip) = (net.nodes[0].ip, net.nodes[1].ip);
    let hdr = cma::Repr {
        src_port: 0xc123,
        src: a_ip,
        dst: b_ip,
    };
    let p = common::connect_params(net.nodes[0].rc_qp, net.nodes[0].e.random_psn(), &hdr);
    let local = |ip| Local {
        addr: ip,
        ca_guid: 1,
    };
    let mut a = Conn::connect(net.now, local(a_ip), b_ip, &p, seed, 0xa0 + seed as u32);
    let mut b: Option<Conn> = None;
    let (mut a_got, mut b_got, mut a_sent, mut b_sent) = (0, 0, false, false);
    let limit = Instant::from_millis(10 * 60 * 1000);
    loop {
        pump(&mut net, 0, &mut a);
        if let Some(b) = &mut b {
            pump(&mut net, 1, b);
        } else {
            // B listens: the first REQ makes its connection.
            for mad in net.nodes[1].recv_mads() {
                let Message::Req(req) = mad.msg else { continue };
                let (_, port, hdr) = conn::rdma_cm_target(&req).unwrap();
                assert_eq!((port, hdr.src), (7174, a_ip));
                let ap = AcceptParams {
                    qpn: net.nodes[1].rc_qp,
                    starting_psn: net.nodes[1].e.random_psn(),
                    responder_resources: 1,
                    initiator_depth: 1,
                    rnr_retry_count: 7,
                    max_mtu: Mtu::M4096,
                    private_data: [0; rocex_cm::rep::PRIVATE_DATA_LEN],
                };
                let mut c =
                    Conn::accept(net.now, local(b_ip), a_ip, mad.tid, &req, &ap, 0xb0).unwrap();
                let params = c.params().unwrap();
                let (rtr, m) = params.rtr();
                let qp = net.nodes[1].rc_qp;
                net.nodes[1].e.modify_qp(qp, &rtr, m).unwrap();
                let (rts, m) = params.rts();
                net.nodes[1].e.modify_qp(qp, &rts, m).unwrap();
                pump(&mut net, 1, &mut c);
                b = Some(c);
                break;
            }
        }
        while let Some(ev) = a.poll_event() {
            match ev {
                Event::Reply(params) => {
                    let qp = net.nodes[0].rc_qp;
                    let (rtr, m) = params.rtr();
                    net.nodes[0].e.modify_qp(qp, &rtr, m).unwrap();
                    let (rts, m) = params.rts();
                    net.nodes[0].e.modify_qp(qp, &rts, m).unwrap();
                    a.establish();
                    pump(&mut net, 0, &mut a);
                }
                Event::Established if !a_sent => {
                    net.nodes[0].send_data(net.now);
                    a_sent = true;
                }
                Event::Disconnected => {}
                other => panic!("seed {seed}: A saw {other:?}"),
            }
        }
        if let Some(b) = &mut b {
            while let Some(ev) = b.poll_event() {
                assert!(
                    matches!(ev, Event::Established | Event::Disconnected),
                    "seed {seed}: B saw {ev:?}"
                );
            }
        }
        for (i, got) in [(0, &mut a_got), (1, &mut b_got)] {
            while let Some(wc) = net.nodes[i].e.poll_cq(net.nodes[i].rc_cq) {
                assert_eq!(wc.status, WcStatus::Success, "seed {seed}");
                if wc.opcode == WcOpcode::Recv {
                    *got += 1;
                    if i == 1 {
                        b.as_mut().unwrap().comm_established();
                    }
                }
            }
        }
        // B sends once connected: by the RTU, or by A's first message in its place.
        if b.as_ref().is_some_and(|b| b.state() == State::Established) && !b_sent {
            net.nodes[1].send_data(net.now);
            b_sent = true;
        }
        if a_got == MSGS && b_got == MSGS && a.state() == State::Established {
            a.disconnect(net.now);
            pump(&mut net, 0, &mut a);
        }
        let b_done = b
            .as_ref()
            .is_some_and(|b| matches!(b.state(), State::TimeWait | State::Closed));
        if matches!(a.state(), State::TimeWait | State::Closed) && b_done {
            break;
        }
        net.exchange();
        if net
            .nodes
            .iter()
            .any(|n| n.e.cq_len(n.gsi_cq) + n.e.cq_len(n.rc_cq) > 0)
        {
            continue;
        }
        assert!(
            net.now < limit,
            "seed {seed}: stuck at {:?} ({:?})",
            net.now,
            a.state()
        );
        let mut conns: Vec<&mut Conn> = vec![&mut a];
        if let Some(b) = &mut b {
            conns.push(b);
        }
        net.advance(&mut conns);
    }
    assert_eq!((a_got, b_got), (MSGS, MSGS), "seed {seed}");
    net.lost
}

#[test]
fn connects_exchanges_and_disconnects_without_loss() {
    assert_eq!(run(1, 0), 0);
}

#[test]
fn connects_exchanges_and_disconnects_at_every_seed_with_20_percent_loss() {
    let lost: u64 = (0..40).map(|seed| run(seed, 200)).sum();
    assert!(lost > 40, "the link lost {lost} packets");
}
