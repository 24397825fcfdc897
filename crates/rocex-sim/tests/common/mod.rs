//! Two connected RC engines on a simulated fabric, with a registered buffer each.
#![allow(dead_code, unreachable_pub)]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rocex_proto::verbs::{
    AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, Remote, SendOp, SendWr,
    Sge, WcStatus, WorkCompletion,
};
use rocex_proto::{Access, Config, Engine, Instant, Keys, PdId, QpInit, VecRegion};
use rocex_sim::{Fabric, Link};

/// Deterministic bytes for a message.
#[allow(unused_imports)] // not every test uses it
pub use rocex_testkit::pattern;

/// One side: its engine index, QP, CQ, PD and buffer.
#[derive(Clone)]
pub struct Side {
    pub node: usize,
    pub addr: IpAddr,
    pub pd: PdId,
    pub cq: u32,
    pub qpn: u32,
    pub buf: Arc<VecRegion>,
    pub keys: Keys,
    pub base: u64,
}

pub struct Pair {
    pub fabric: Fabric,
    pub a: Side,
    pub b: Side,
}

/// Connection parameters.
#[derive(Clone, Copy)]
pub struct Params {
    pub mtu: Mtu,
    pub buf_len: usize,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub psn_a: u32,
    pub psn_b: u32,
    pub max_rd_atomic: u8,
    pub qp_type: QpType,
    /// The rights of each side's MR.
    pub access: Access,
    /// The remote operations each side's QP allows (`qp_access_flags`).
    pub qp_access: Access,
    pub depth: u32,
    /// Retransmit only when rxe would (`Config::rxe_recovery`).
    pub rxe_recovery: bool,
    /// Selective repeat on side a and on side b (`Config::selective_repeat`).
    pub selective_repeat: (bool, bool),
    /// PSNs in flight at most (`Config::window`).
    pub window: u32,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            mtu: Mtu::M1024,
            buf_len: 1 << 20,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            psn_a: 100,
            psn_b: 5000,
            max_rd_atomic: 16,
            qp_type: QpType::Rc,
            access: Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
            qp_access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            depth: 1024,
            rxe_recovery: false,
            selective_repeat: (false, false),
            window: rocex_proto::MAX_UNACKED_PSNS,
        }
    }
}

const BASE_A: u64 = 0x7f00_0000_0000;
const BASE_B: u64 = 0x5500_0000_0000;

fn side(fabric: &mut Fabric, i: u8, p: &Params, base: u64) -> Side {
    let addr: IpAddr = [198, 18, 0, i].into();
    let mut config = Config::new(addr, [i; 32]);
    config.port_mtu = Mtu::M4096;
    config.rxe_recovery = p.rxe_recovery;
    config.window = p.window;
    config.selective_repeat = if i == 1 {
        p.selective_repeat.0
    } else {
        p.selective_repeat.1
    };
    let mut e = Engine::new(config);
    let pd = e.alloc_pd();
    let cq = e.create_cq(1 << 15).unwrap();
    let cap = QpCap {
        max_send_wr: p.depth,
        max_recv_wr: p.depth,
        max_send_sge: 4,
        max_recv_sge: 4,
        max_inline_data: 256,
    };
    let qpn = e
        .create_qp(QpInit {
            qp_type: p.qp_type,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap,
        })
        .unwrap();
    let buf = Arc::new(VecRegion::new(p.buf_len));
    let keys = e
        .reg_mr(
            pd,
            base,
            p.buf_len as u64,
            p.access | Access::LOCAL_WRITE,
            buf.clone(),
        )
        .unwrap();
    let node = fabric.add(e);
    Side {
        node,
        addr,
        pd,
        cq,
        qpn,
        buf,
        keys,
        base,
    }
}

/// RESET -> INIT -> RTR -> RTS for `qpn` on `e` towards `peer` (its address, QPN and
/// first send PSN), sending from `my_psn`, with `p`'s access, path MTU, timers and retries
/// (`QpAttr::rc_steps`).
pub fn connect_qp(e: &mut Engine, qpn: u32, peer: (IpAddr, u32, u32), my_psn: u32, p: &Params) {
    let attr = QpAttr {
        qp_access_flags: p.qp_access,
        port_num: 1,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: p.mtu,
        dest_qp_num: peer.1,
        rq_psn: peer.2,
        max_dest_rd_atomic: 16,
        min_rnr_timer: p.min_rnr_timer,
        sq_psn: my_psn,
        timeout: p.timeout,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        max_rd_atomic: p.max_rd_atomic,
        ..QpAttr::default()
    };
    // A UC QP's RTR and RTS masks: the peer and the PSNs, without RC's resources,
    // timers and retries.
    let uc = [
        AttrMask::STATE | AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN,
        AttrMask::STATE | AttrMask::SQ_PSN,
    ];
    for (i, (step, rc_mask)) in attr.rc_steps().into_iter().enumerate() {
        let mask = match (p.qp_type, i) {
            (QpType::Rc, _) | (_, 0) => rc_mask,
            (_, i) => uc[i - 1],
        };
        e.modify_qp(qpn, &step, mask).unwrap();
    }
}

impl Pair {
    pub fn new(seed: u64, link: Link, p: Params) -> Self {
        let mut fabric = Fabric::new(seed, link);
        let a = side(&mut fabric, 1, &p, BASE_A);
        let b = side(&mut fabric, 2, &p, BASE_B);
        let (na, nb) = (a.node, b.node);
        connect_qp(
            fabric.node(na),
            a.qpn,
            (b.addr, b.qpn, p.psn_b),
            p.psn_a,
            &p,
        );
        connect_qp(
            fabric.node(nb),
            b.qpn,
            (a.addr, a.qpn, p.psn_a),
            p.psn_b,
            &p,
        );
        Self { fabric, a, b }
    }

    /// Another RC QP from a to b with `p`'s attributes, both ends at PSN 0, a's on a CQ
    /// of its own with room for `max_send_wr` sends: `(QPN, CQ)` on a. Its WRITEs share
    /// the fabric, and b's queue, with the pair's.
    pub fn second_qp(&mut self, p: &Params, max_send_wr: u32) -> (u32, u32) {
        let cap = QpCap {
            max_send_wr,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let (a, b) = (self.a.clone(), self.b.clone());
        let ea = self.fabric.node(a.node);
        let cq = ea.create_cq(1024).unwrap();
        let qa = ea.create_qp(QpInit::rc(a.pd, cq, cap)).unwrap();
        let qb = self
            .fabric
            .node(b.node)
            .create_qp(QpInit::rc(b.pd, b.cq, cap))
            .unwrap();
        connect_qp(self.fabric.node(a.node), qa, (b.addr, qb, 0), 0, p);
        connect_qp(self.fabric.node(b.node), qb, (a.addr, qa, 0), 0, p);
        (qa, cq)
    }

    pub fn side(&self, which: char) -> Side {
        if which == 'a' {
            self.a.clone()
        } else {
            self.b.clone()
        }
    }

    pub fn now(&self) -> Instant {
        self.fabric.now()
    }

    pub fn post_send(&mut self, from: &Side, wr: SendWr) {
        let now = self.fabric.now();
        self.fabric
            .node(from.node)
            .post_send(now, from.qpn, wr)
            .unwrap();
    }

    /// Posts `op` as WR `id` with one SGE: `len` bytes at `offset` in `from`'s buffer.
    pub fn post(&mut self, from: &Side, id: u64, op: SendOp, offset: u64, len: u32) {
        self.post_send(from, wr(id, op, vec![sge(from, offset, len)]));
    }

    pub fn post_recv(&mut self, on: &Side, wr_id: u64, offset: u64, len: u32) {
        let now = self.fabric.now();
        let wr = RecvWr {
            wr_id,
            sges: vec![Sge {
                addr: on.base + offset,
                length: len,
                lkey: on.keys.lkey,
            }]
            .into(),
        };
        self.fabric
            .node(on.node)
            .post_recv(now, on.qpn, wr)
            .unwrap();
    }

    /// Runs until `n` completions arrived on `side`'s CQ or `limit` of virtual time passed.
    pub fn completions(&mut self, side: &Side, n: usize, limit: Duration) -> Vec<WorkCompletion> {
        let deadline = self.fabric.now() + limit;
        let mut got = Vec::new();
        let (node, cq) = (side.node, side.cq);
        self.fabric.run_until(deadline, |f| {
            while let Some(wc) = f.node(node).poll_cq(cq) {
                got.push(wc);
            }
            got.len() >= n
        });
        got
    }

    /// Runs until nothing is left to do or `limit` passes.
    pub fn settle(&mut self, limit: Duration) {
        let deadline = self.fabric.now() + limit;
        self.fabric.run_until(deadline, |_| false);
    }

    pub fn qp_state(&mut self, side: &Side) -> QpState {
        self.fabric
            .node(side.node)
            .query_qp(side.qpn)
            .unwrap()
            .0
            .qp_state
    }
}

pub fn sge(side: &Side, offset: u64, len: u32) -> Sge {
    Sge {
        addr: side.base + offset,
        length: len,
        lkey: side.keys.lkey,
    }
}

pub fn remote(side: &Side, offset: u64) -> Remote {
    Remote {
        addr: side.base + offset,
        rkey: side.keys.rkey,
    }
}

pub fn wr(id: u64, op: SendOp, sges: Vec<Sge>) -> SendWr {
    SendWr::new(id, op, sges)
}

pub fn write_bytes(side: &Side, offset: u64, data: &[u8]) {
    use rocex_proto::Region;
    side.buf.write(offset, data);
}

pub fn read_bytes(side: &Side, offset: u64, len: usize) -> Vec<u8> {
    use rocex_proto::Region;
    let mut out = vec![0; len];
    side.buf.read(offset, &mut out);
    out
}

pub fn assert_ok(wcs: &[WorkCompletion]) {
    for wc in wcs {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
    }
}
