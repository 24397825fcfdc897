//! Driving a fresh rocex responder with a connection's captured requests.

use core::net::SocketAddr;
use std::sync::Arc;

use rocex_proto::verbs::{AddressVector, QpAttr, QpCap, RecvWr, Sge, WcOpcode};
use rocex_proto::{Access, Engine, IcrcStatus, Instant, Keys, PdId, Region, VecRegion};
use rocex_wire::PacketRepr;
use rocex_wire::opcode::Operation;

use crate::ConformError;
use crate::connection::{Connection, Pkt};
use crate::infer::Plan;
use crate::response::Response;
use crate::setup::{self, MAX_MSG, RXE_MAX_QP_RD_ATOM, Side};

/// A response the engine emitted.
#[derive(Debug, Clone, Copy)]
pub struct Emitted {
    /// Index of the request it followed.
    pub request: usize,
    /// What it says.
    pub resp: Response,
}

/// The result of one replay.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// What the engine emitted, in order.
    pub emitted: Vec<Emitted>,
    /// Receive WQEs posted.
    pub recvs_posted: u64,
}

struct Responder {
    engine: Engine,
    pd: PdId,
    cq: u32,
    qpn: u32,
    regions: Vec<(u32, u64, Arc<VecRegion>)>,
    recv: Option<(Keys, u64)>,
    outstanding: u64,
}

impl Responder {
    fn new(conn: &Connection, plan: &Plan) -> Result<Self, ConformError> {
        let cap = QpCap {
            max_send_wr: 16,
            max_recv_wr: 1024,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let attr = QpAttr {
            qp_access_flags: plan.qp_access,
            port_num: 1,
            ah_attr: Some(AddressVector {
                dest: conn.requester,
            }),
            path_mtu: plan.mtu,
            dest_qp_num: plan.req_qpn,
            rq_psn: plan.start_psn.value(),
            max_dest_rd_atomic: RXE_MAX_QP_RD_ATOM,
            min_rnr_timer: plan.min_rnr_timer,
            max_rd_atomic: 1,
            ..QpAttr::default()
        };
        let Side {
            engine,
            pd,
            cq,
            qpn,
        } = setup::rc_side(conn, conn.responder, 0x5a, conn.resp_qpn, cap, &attr, true)?;
        let mut me = Self {
            engine,
            pd,
            cq,
            qpn,
            regions: Vec::new(),
            recv: None,
            outstanding: 0,
        };
        me.register(conn, plan)?;
        Ok(me)
    }

    /// Registers the captured rkeys and windows over the memories the plan infers.
    fn register(&mut self, conn: &Connection, plan: &Plan) -> Result<(), ConformError> {
        self.regions = crate::memory::register(&mut self.engine, self.pd, conn, plan)?;
        Ok(())
    }

    fn seed(&self, rkey: u32, va: u64, value: u64) {
        if let Some((_, iova, region)) = self.regions.iter().find(|(k, ..)| *k == rkey) {
            region.write(va.wrapping_sub(*iova), &value.to_ne_bytes());
        }
    }

    /// Posts one receive WQE covering the whole receive buffer.
    fn post_recv(&mut self, conn: &Connection, now: Instant) -> Result<(), ConformError> {
        let (keys, base) = match self.recv {
            Some(r) => r,
            None => {
                let region: Arc<dyn Region> = Arc::new(VecRegion::new(MAX_MSG as usize));
                let base = 0x1000;
                let keys = self
                    .engine
                    .reg_mr(self.pd, base, MAX_MSG, Access::LOCAL_WRITE, region)
                    .map_err(ConformError::setup(conn, "reg_mr (receive buffer)"))?;
                self.recv = Some((keys, base));
                (keys, base)
            }
        };
        let wr = RecvWr::new(
            0,
            [Sge {
                addr: base,
                length: MAX_MSG as u32,
                lkey: keys.lkey,
            }],
        );
        self.engine
            .post_recv(now, self.qpn, wr)
            .map_err(ConformError::setup(conn, "post_recv"))?;
        self.outstanding += 1;
        Ok(())
    }

    fn expected_psn(&self) -> Option<u32> {
        self.engine.query_qp(self.qpn).ok().map(|(a, _)| a.rq_psn)
    }

    fn drain_cq(&mut self) {
        while let Some(wc) = self.engine.poll_cq(self.cq) {
            if matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                self.outstanding = self.outstanding.saturating_sub(1);
            }
        }
    }
}

/// Whether the request starts a message that takes a receive WQE.
fn needs_recv(req: &Pkt) -> bool {
    match req.info.operation {
        Operation::Send => req.info.position.starts(),
        Operation::Write => req.info.immediate,
        _ => false,
    }
}

/// Replays the connection's requests, in captured order, into a fresh responder.
pub fn run(conn: &Connection, plan: &Plan) -> Result<Run, ConformError> {
    let mut r = Responder::new(conn, plan)?;
    let mut out = Run::default();
    let t0 = conn.requests.first().map_or(0.0, |p| p.ts);
    let src = SocketAddr::new(conn.requester, conn.sport);
    let mut buf = vec![0u8; 4096 + 128];
    for (i, req) in conn.requests.iter().enumerate() {
        let now = setup::clock(t0, req.ts);
        for s in plan.seeds.iter().filter(|s| s.request == i) {
            r.seed(s.rkey, s.va, s.value);
        }
        if needs_recv(req)
            && !plan.rnr[i]
            && r.outstanding == 0
            && r.expected_psn() == Some(req.psn.value())
        {
            r.post_recv(conn, now)?;
            out.recvs_posted += 1;
        }
        r.engine
            .handle_packet(now, src, conn.responder, &req.udp, IcrcStatus::Valid);
        while let Some(t) = r.engine.poll_transmit(now, &mut buf) {
            if let Ok((p, _)) = PacketRepr::parse(&buf[..t.len]) {
                out.emitted.push(Emitted {
                    request: i,
                    resp: Response::of(&p),
                });
            }
        }
        r.drain_cq();
    }
    Ok(out)
}
