//! Driving a fresh rocex requester with a connection's inferred work requests and rxe's
//! captured responses, on a virtual clock set from the capture, and pairing each request
//! it sends with the next one rxe sent.
//!
//! The capture is walked in time order. A captured response is handed to the engine
//! [`RACE`] after the capture point saw it (rxe's requester took at least 180 µs to act
//! on a NAK in every lab capture), never before a request captured ahead of it, a sequence
//! NAK no sooner than the go-back that shows rxe acting on it, and none in the middle of a
//! go-back run, which rxe sends without looking at what arrives meanwhile. At each captured
//! request the engine is asked for one packet, which must equal it. The engine's timers
//! (the retransmit timer, the end of an RNR wait) run on the same clock, except that one
//! due within [`SLACK`] of the next captured request waits for it: TCG guests and the
//! kernel's jiffies make rxe's timers late by milliseconds. When rxe resent after a
//! timeout and rocex's timer is not yet due, the clock moves forward to rocex's deadline,
//! so the restart point is compared exactly and the time only loosely.
//!
//! A request rocex sends that has no captured counterpart is inferred lost before the
//! capture point (the lab drops frames on the guests' egress, before the bridge) when the
//! capture shows loss and the packet lies in a gap of the captured stream or rxe sent its
//! PSN again later; every other difference is a mismatch. The rules are in
//! docs/interop.md ("Replaying the requester").

use core::net::SocketAddr;
use core::time::Duration;
use std::sync::Arc;

use rocex_proto::verbs::{AddressVector, Mtu, QpAttr, QpCap, SendFlags, SendWr, Sge};
use rocex_proto::{Access, Engine, IcrcStatus, Instant, Keys, Region, VecRegion};
use rocex_wire::{Opcode, PacketRepr};

use super::plan::{ReqPlan, acked_before, goes_back_at};
use crate::ConformError;
use crate::Report;
use crate::connection::Connection;
use crate::infer::InferenceKind;
use crate::request::Request;
use crate::setup::{self, MAX_MSG, RXE_MAX_QP_RD_ATOM, Side};

/// How long after the capture point saw a response rxe's requester is taken to act on it.
pub const RACE: Duration = Duration::from_micros(150);
/// How much later than rocex's timer rxe's may fire before rocex's fires on its own.
pub const SLACK: Duration = Duration::from_millis(5);

struct Requester {
    engine: Engine,
    cq: u32,
    qpn: u32,
    keys: Keys,
    base: u64,
}

impl Requester {
    fn new(conn: &Connection, plan: &ReqPlan, rxe_recovery: bool) -> Result<Self, ConformError> {
        let cap = QpCap {
            max_send_wr: 0x4000,
            max_recv_wr: 1,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let attr = QpAttr {
            qp_access_flags: Access::empty(),
            port_num: 1,
            ah_attr: Some(AddressVector {
                dest: conn.responder,
            }),
            path_mtu: plan.mtu,
            timeout: plan.timeout,
            retry_cnt: plan.retry_cnt,
            rnr_retry: plan.rnr_retry,
            sq_psn: plan.start_psn.value(),
            max_rd_atomic: RXE_MAX_QP_RD_ATOM,
            max_dest_rd_atomic: 0,
            dest_qp_num: conn.resp_qpn,
            ..QpAttr::default()
        };
        let Side {
            mut engine,
            pd,
            cq,
            qpn,
        } = setup::rc_side(
            conn,
            conn.requester,
            0xa5,
            plan.qpn,
            cap,
            &attr,
            rxe_recovery,
        )?;
        let len = plan
            .wrs
            .iter()
            .map(|w| w.len)
            .max()
            .unwrap_or(8)
            .clamp(8, MAX_MSG);
        let region: Arc<dyn Region> = Arc::new(VecRegion::new(len as usize));
        let base = 0x1000;
        let keys = engine
            .reg_mr(pd, base, len, Access::LOCAL_WRITE, region)
            .map_err(ConformError::setup(conn, "reg_mr"))?;
        Ok(Self {
            engine,
            cq,
            qpn,
            keys,
            base,
        })
    }

    fn post(
        &mut self,
        conn: &Connection,
        now: Instant,
        k: usize,
        plan: &ReqPlan,
    ) -> Result<(), ConformError> {
        let w = &plan.wrs[k];
        let sge = Sge {
            addr: self.base,
            length: w.len.min(MAX_MSG) as u32,
            lkey: self.keys.lkey,
        };
        let mut wr = SendWr::new(k as u64, w.op, (w.len > 0).then_some(sge));
        wr.flags = SendFlags {
            signaled: true,
            solicited: w.solicited,
            fence: false,
        };
        self.engine
            .post_send(now, self.qpn, wr)
            .map_err(ConformError::setup(conn, "post_send"))
    }

    fn drain_cq(&mut self) {
        while self.engine.poll_cq(self.cq).is_some() {}
    }

    /// Runs the timers due at or before `t`.
    fn run_timers(&mut self, t: Instant) {
        for _ in 0..64 {
            match self.engine.poll_timeout() {
                Some(d) if d <= t => self.engine.handle_timeout(d),
                _ => break,
            }
        }
    }
}

/// A replay in progress: the engine, its clock, and how far the capture has been fed.
struct Replay<'a> {
    conn: &'a Connection,
    r: Requester,
    now: Instant,
    /// Capture time of the connection's first frame.
    t0: f64,
    /// The next response to hand over, in capture order.
    next_resp: usize,
    /// When each response reaches rxe's requester, on the replay clock.
    arrives: Vec<Instant>,
    loss_seen: bool,
    mtu: Mtu,
    buf: Vec<u8>,
}

/// Replays the connection's work requests into a fresh requester (retransmitting when rxe
/// would with `rxe_recovery`, else with rocex's recovery) and records, in `report`, how
/// its requests compare with rxe's.
pub fn run(
    conn: &Connection,
    plan: &ReqPlan,
    loss_seen: bool,
    rxe_recovery: bool,
    report: &mut Report,
) -> Result<(), ConformError> {
    let t0 = conn
        .requests
        .iter()
        .chain(&conn.responses)
        .map(|p| p.ts)
        .fold(f64::INFINITY, f64::min);
    let mut x = Replay {
        conn,
        r: Requester::new(conn, plan, rxe_recovery)?,
        now: Instant::ZERO,
        t0,
        next_resp: 0,
        arrives: Vec::new(),
        loss_seen,
        mtu: plan.mtu,
        buf: vec![0u8; 4096 + 128],
    };
    x.arrives = x.arrivals();
    report.totals.requests += conn.requests.len() as u64;
    report.totals.responses += conn.responses.len() as u64;
    let mut posted = 0;
    for i in 0..conn.requests.len() {
        // Responses go by capture time: a clock moved forward past a captured request
        // must not hand over, before it, responses captured after it.
        x.deliver_until(x.at(conn.requests[i].ts));
        let t = x.at(conn.requests[i].ts).max(x.now);
        x.timers_until(t);
        x.now = t;
        while posted < plan.wrs.len() && plan.wrs[posted].post_before <= i {
            x.r.post(conn, x.now, posted, plan)?;
            posted += 1;
        }
        x.pair(i, report);
        x.r.drain_cq();
    }
    Ok(())
}

impl Replay<'_> {
    /// The replay clock at capture time `ts`.
    fn at(&self, ts: f64) -> Instant {
        setup::clock(self.t0, ts)
    }

    /// When each response reaches rxe's requester: [`RACE`] after the capture point saw
    /// it, a sequence NAK no sooner than the go-back to its PSN that shows rxe acting on
    /// it (TCG guests took up to milliseconds to, sending new packets meanwhile), and none
    /// in the middle of a go-back: rxe resends the run without acting on what arrives
    /// meanwhile (`interop-rc_pingpong-rxe_client-3000-mtu256-loss5.pcap`, frames
    /// 1392-1413: MIDDLE 911, 912 and LAST 913 resent after ACKs of 912). A response never
    /// overtakes the one before it.
    fn arrivals(&self) -> Vec<Instant> {
        let conn = self.conn;
        let mut last = Instant::ZERO;
        conn.responses
            .iter()
            .map(|p| {
                let mut t = self.at(p.ts) + RACE;
                if is_seq_nak(p) {
                    let back = conn.requests.iter().enumerate().find(|&(i, q)| {
                        q.frame > p.frame && q.psn == p.psn && i > 0 && goes_back_at(conn, i)
                    });
                    if let Some((_, q)) = back {
                        t = t.max(self.at(q.ts));
                    }
                }
                if let Some(end) = run_end_after(conn, p.frame) {
                    t = t.max(self.at(end) + Duration::from_nanos(1));
                }
                last = last.max(t);
                last
            })
            .collect()
    }

    /// Hands over the next response at its time (or now, if that has passed).
    fn deliver_next(&mut self) {
        let p = &self.conn.responses[self.next_resp];
        let t = self.arrives[self.next_resp].max(self.now);
        self.next_resp += 1;
        self.timers_until(t);
        self.now = t;
        let src = SocketAddr::new(self.conn.responder, p.sport);
        self.r.engine.handle_packet(
            self.now,
            src,
            self.conn.requester,
            &p.udp,
            IcrcStatus::Valid,
        );
        self.r.drain_cq();
    }

    /// Hands over every response that reaches rxe's requester by `t`.
    fn deliver_until(&mut self, t: Instant) {
        while self.arrives.get(self.next_resp).is_some_and(|&a| a <= t) {
            self.deliver_next();
        }
    }

    /// Runs the engine's timers due more than [`SLACK`] before `t`.
    fn timers_until(&mut self, t: Instant) {
        let until = Instant::from_nanos(t.nanos().saturating_sub(SLACK.as_nanos() as u64));
        self.r.run_timers(until);
    }

    /// Pairs captured request `i` with what the engine sends next. When the engine has
    /// nothing to send, the responses captured before the request are handed over early
    /// (rxe may have acted on them sooner than [`RACE`]), then the clock moves forward to
    /// the engine's next deadline (rxe's timer ran out first).
    fn pair(&mut self, i: usize, report: &mut Report) {
        let conn = self.conn;
        let cap = &conn.requests[i];
        let Some(want) = cap.packet().map(|p| Request::of(&p)) else {
            return;
        };
        let mut lost_psns = Vec::new();
        for _ in 0..4096 {
            let Some(got) = self.poll() else {
                if conn
                    .responses
                    .get(self.next_resp)
                    .is_some_and(|p| p.ts <= cap.ts)
                {
                    self.deliver_next();
                    continue;
                }
                if let Some(d) = self.r.engine.poll_timeout() {
                    self.now = self.now.max(d);
                    self.r.engine.handle_timeout(self.now);
                    continue;
                }
                let idle = self
                    .r
                    .engine
                    .qp_status(self.r.qpn)
                    .is_ok_and(|st| st.sq_wqes == 0);
                if let Some(a) = acked_before(conn, i, self.mtu).filter(|_| idle) {
                    let text = format!(
                        "rxe resent PSN {} though the response at frame {a} had acknowledged it and nothing was lost; rocex, with nothing unacknowledged, sends nothing",
                        want.psn.value()
                    );
                    report.infer(conn, cap.frame, InferenceKind::RxeResentAcked, &text);
                    return;
                }
                report.differ(conn, cap.frame, &want.to_string(), "nothing");
                return;
            };
            if got == want {
                report.matched(conn, cap.frame, &got);
                return;
            }
            if goes_back_at(conn, i) && address_lost(&got, &want) {
                let text = format!(
                    "rxe resent the ATOMIC_WRITE at PSN {} with RETH va 0; rocex resends the address it was given",
                    got.psn.value()
                );
                report.infer(conn, cap.frame, InferenceKind::RxeAtomicWriteVa, &text);
                return;
            }
            // rxe sent it, and it never reached the capture point: it lies in a gap of the
            // captured stream (rxe sends in PSN order), or rxe sent its PSN again later and
            // either it comes before the captured one or the captured one goes back (rxe
            // gave up on what followed it).
            let in_gap =
                i > 0 && conn.requests[i - 1].psn.is_before(got.psn) && got.psn.is_before(want.psn);
            let resent_later = conn.requests[i..].iter().any(|q| q.psn == got.psn);
            let lost = in_gap
                || (resent_later
                    && got.psn != want.psn
                    && (got.psn.is_before(want.psn) || goes_back_at(conn, i)));
            if self.loss_seen && lost && !lost_psns.contains(&got.psn) {
                lost_psns.push(got.psn);
                let text = format!(
                    "rxe's {got} was lost before the capture point: {}",
                    if in_gap {
                        format!(
                            "rxe sent PSNs {} and {} around it",
                            conn.requests[i - 1].psn.value(),
                            want.psn.value()
                        )
                    } else {
                        format!("rxe sent PSN {} again later", got.psn.value())
                    }
                );
                report.infer(conn, cap.frame, InferenceKind::RequestLost, &text);
                continue;
            }
            report.differ(conn, cap.frame, &want.to_string(), &got.to_string());
            return;
        }
    }

    /// The next request packet the engine sends now, in compared form.
    fn poll(&mut self) -> Option<Request> {
        let t = self.r.engine.poll_transmit(self.now, &mut self.buf)?;
        PacketRepr::parse(&self.buf[..t.len])
            .ok()
            .map(|(p, _)| Request::of(&p))
    }
}

/// Whether a response is a PSN-sequence NAK.
fn is_seq_nak(p: &crate::connection::Pkt) -> bool {
    p.packet()
        .and_then(|r| r.aeth)
        .is_some_and(|a| a.syndrome.to_byte() & 0xe0 == 0x60)
}

/// rxe 6.12 resends an ATOMIC_WRITE with RETH va 0 (`probe_atomic_write-loss5.pcap`);
/// everything else it resends as first sent.
fn address_lost(got: &Request, want: &Request) -> bool {
    let zeroed = Request {
        reth: got.reth.map(|(_, rkey, len)| (0, rkey, len)),
        ..*got
    };
    want.opcode == Opcode::RC_ATOMIC_WRITE && zeroed == *want
}

/// The capture time of the last request of the go-back run a response at `frame` falls
/// inside: the run starts with a request resending a PSN and goes on with consecutive
/// PSNs sent before; `None` when the response falls outside any run.
fn run_end_after(conn: &Connection, frame: u64) -> Option<f64> {
    let k = conn.requests.iter().position(|q| q.frame > frame)?;
    if k == 0 || conn.requests[k].psn != conn.requests[k - 1].psn.add(1) || !goes_back_at(conn, k) {
        return None;
    }
    let start = (1..=k)
        .rev()
        .find(|&j| conn.requests[j].psn != conn.requests[j - 1].psn.add(1))
        .unwrap_or(0);
    if start == 0 || !goes_back_at(conn, start) {
        return None;
    }
    let end = (k..conn.requests.len())
        .take_while(|&j| {
            j == k
                || (conn.requests[j].psn == conn.requests[j - 1].psn.add(1)
                    && goes_back_at(conn, j))
        })
        .last()?;
    Some(conn.requests[end].ts)
}
