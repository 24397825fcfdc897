//! Opening the two daemons, creating and connecting the QP pairs (one process is the
//! client of both, so QP numbers and PSNs are exchanged in memory), and a first pass over
//! every buffer so that the daemons have touched all the memory the run will use before
//! their RSS is taken as the baseline.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use rocex_verbs::verbs::{
    AddressVector, Mtu, QpAttr, QpCap, QpType, Remote, SendOp, SendWr, WcStatus,
};
use rocex_verbs::{Access, Context, Cq, Mr, Pd, Qp, QpInitAttr};

use super::Env;
use super::counters;
use super::lane::Lane;
use super::plan::MAX_LEN;

const ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// READs and atomics in flight per QP, both ways (rocexd's `max_qp_rd_atom`).
const RD_ATOMIC: u8 = 16;

/// One daemon as the soak uses it: its memory region and one CQ for all its QPs. Fields
/// drop in order: the MR and CQ are released before the PD.
#[derive(Debug)]
pub(crate) struct Side {
    pub(crate) mr: Mr,
    pub(crate) cq: Cq,
    pd: Pd,
    ctx: Context,
}

impl Side {
    /// Opens the daemon at `socket` and allocates the region and CQ for `env`.
    pub(crate) fn open(socket: &Path, env: &Env, lanes: u32) -> rocex_verbs::Result<Self> {
        let ctx = Context::open(socket)?;
        let pd = ctx.alloc_pd()?;
        let mr = pd.alloc_mr(env.layout.len() as usize, ACCESS)?;
        mr.write(env.layout.pattern() as usize, &env.pattern)?;
        // Every lane's window of send completions and of receive completions at once.
        let cq = ctx.create_cq(2 * lanes * env.window + 64, None)?;
        Ok(Self { mr, cq, pd, ctx })
    }

    /// The daemon's counters now, as JSON.
    pub(crate) fn counters(&self) -> serde_json::Value {
        counters::take(&self.ctx)
    }

    fn qp(&self, window: u32) -> rocex_verbs::Result<Qp> {
        self.pd.create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &self.cq,
            recv_cq: &self.cq,
            cap: QpCap {
                max_send_wr: window,
                max_recv_wr: window,
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        })
    }
}

/// How the QPs are connected.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Link {
    /// Path MTU.
    pub(crate) mtu: Mtu,
    /// Local ACK timeout exponent (4.096 us x 2^timeout).
    pub(crate) timeout: u8,
}

/// RESET → INIT → RTR → RTS towards `peer` (address, QPN, its first PSN). Retries are
/// rxe's "infinite" (retry_cnt and rnr_retry 7): a lossy link must delay, never fail, a
/// request; the RNR timer is the shortest (0.01 ms).
fn connect(qp: &Qp, link: Link, my_psn: u32, peer: (IpAddr, u32, u32)) -> rocex_verbs::Result<()> {
    let to_rts = QpAttr {
        qp_access_flags: ACCESS,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: link.mtu,
        dest_qp_num: peer.1,
        rq_psn: peer.2,
        max_dest_rd_atomic: RD_ATOMIC,
        min_rnr_timer: 1,
        sq_psn: my_psn,
        timeout: link.timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: RD_ATOMIC,
        ..QpAttr::default()
    };
    for (a, mask) in to_rts.rc_steps() {
        qp.modify(&a, mask)?;
    }
    Ok(())
}

/// Lane `id`: a QP on each side, connected, sending from side `id % 2` (so both daemons
/// are requesters and responders), `total` messages. The sender's first PSN sits just
/// below the 24-bit wrap, so every lane crosses it early.
pub(crate) fn lane(
    sides: &[Side; 2],
    env: &Env,
    link: Link,
    id: u32,
    total: u64,
) -> rocex_verbs::Result<Lane> {
    let from = id as usize % 2;
    let (s, r) = (&sides[from], &sides[1 - from]);
    let send_qp = s.qp(env.window)?;
    let recv_qp = r.qp(env.window)?;
    let send_psn = 0xff_ff00 - 37 * id;
    let recv_psn = 0x1000 + id;
    connect(
        &send_qp,
        link,
        send_psn,
        (r.ctx.gid_addr(), recv_qp.qpn(), recv_psn),
    )?;
    connect(
        &recv_qp,
        link,
        recv_psn,
        (s.ctx.gid_addr(), send_qp.qpn(), send_psn),
    )?;
    let mut lane = Lane::new(id, from, send_qp, recv_qp, total);
    lane.post_receives(env, &r.mr)?;
    Ok(lane)
}

/// Writes every receive slot and WRITE target of each lane's receiver and READs into
/// every READ slot of its sender, 64 KiB each, so that both daemons have touched all the
/// memory the run uses. Fails on any error completion or when nothing completes for
/// `stall`.
pub(crate) fn prefault(
    sides: &mut [Side; 2],
    lanes: &mut [Lane],
    env: &Env,
    stall: Duration,
) -> Result<(), String> {
    let l = env.layout;
    let w = u64::from(env.window);
    for round in 0..3 {
        let mut pending = 0usize;
        for lane in lanes.iter_mut() {
            let (local, peer) = (&sides[lane.from].mr, &sides[lane.to()].mr);
            let remote = |off| Remote {
                addr: peer.addr() + off,
                rkey: peer.rkey(),
            };
            let wrs: Vec<SendWr> = (0..w)
                .map(|i| {
                    let src = vec![local.sge(l.pattern(), MAX_LEN)];
                    let op = match round {
                        0 => SendOp::Write(remote(l.recv_slot(lane.id, i))),
                        1 => SendOp::Write(remote(l.write_slot(lane.id, i))),
                        _ => SendOp::Read(remote(l.pattern())),
                    };
                    let sges = if round == 2 {
                        vec![local.sge(l.read_slot(lane.id, i), MAX_LEN)]
                    } else {
                        src
                    };
                    SendWr::new(i, op, sges)
                })
                .collect();
            lane.send_qp
                .post_send(&wrs)
                .map_err(|e| format!("lane {}: prefault post: {e}", lane.id))?;
            pending += wrs.len();
        }
        let mut last = Instant::now();
        while pending > 0 {
            let mut got = 0;
            for s in sides.iter_mut() {
                for wc in s.cq.poll(256).map_err(|e| e.to_string())? {
                    if wc.status != WcStatus::Success {
                        return Err(format!("prefault completion {wc:?}"));
                    }
                    got += 1;
                }
            }
            pending = pending.saturating_sub(got);
            if got > 0 {
                last = Instant::now();
            } else if last.elapsed() > stall {
                return Err(format!("prefault: {pending} requests did not complete"));
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    Ok(())
}
