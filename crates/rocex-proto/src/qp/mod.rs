//! Queue pairs: state, queues, and the three engines that work on them, as rxe divides
//! them: the requester turns send work requests into packets, the completer turns
//! acknowledgements into completions and retries, the responder answers requests.

mod completer;
pub(crate) mod dcqcn;
mod requester;
mod responder;
mod sge;
pub(crate) mod sr;
pub(crate) mod state;
mod window;

use std::collections::VecDeque;

use rocex_mem::PdId;
use rocex_wire::Psn;
use rocex_wire::bth::QPN_MASK;

use crate::Ctx;
use crate::counters::QpCounters;
use crate::time::Instant;
use crate::verbs::{
    QpAttr, QpCap, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
};

pub(crate) use completer::Completer;
pub use dcqcn::{Congestion, DcqcnParamError, DcqcnParams, RateState};
use dcqcn::{Notifier, RateLimiter};
pub(crate) use requester::Requester;
pub(crate) use responder::Responder;
pub use window::MAX_WINDOW;
pub(crate) use window::Window;

/// The most PSNs rxe's requester sends beyond the oldest unacknowledged one
/// (`RXE_MAX_UNACKED_PSNS`): rocex's go-back-N window by default, and where a wider one
/// (`Config::window`) starts and falls back to after a loss.
pub const MAX_UNACKED_PSNS: u32 = 128;
/// A requester sets AckReq at least every this many packets (rxe `RXE_MAX_PKT_PER_ACK`).
pub const MAX_PKT_PER_ACK: u32 = 64;

/// A send work request on the send queue, with what the requester and completer know of it.
#[derive(Debug)]
pub(crate) struct SendWqe {
    pub(crate) wr: SendWr,
    /// Bytes the message carries (READ: bytes asked for; atomics: 8).
    pub(crate) len: u64,
    /// PSN of the first packet, once sent.
    pub(crate) first_psn: Psn,
    /// Packets (request packets, or READ response packets) the message spans.
    pub(crate) npkts: u32,
    /// Whether the first packet has been sent.
    pub(crate) started: bool,
    /// A sampled request's post time, until its first packet is built.
    pub(crate) posted_at: Option<Instant>,
}

impl SendWqe {
    pub(crate) fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npkts.max(1) - 1)
    }

    /// READ, atomics, ATOMIC_WRITE and FLUSH complete only on their response.
    pub(crate) fn needs_response(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::Read(_)
                | SendOp::CompareSwap { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::AtomicWrite { .. }
                | SendOp::Flush { .. }
        )
    }

    /// Whether it counts against `max_rd_atomic`.
    pub(crate) fn is_rd_atomic(&self) -> bool {
        self.needs_response()
    }

    /// Whether the message takes a receive WQE at the responder.
    pub(crate) fn consumes_recv(&self) -> bool {
        matches!(
            self.wr.op,
            SendOp::Send
                | SendOp::SendWithImm(_)
                | SendOp::SendWithInv(_)
                | SendOp::WriteWithImm(..)
        )
    }

    /// Whether `psn` lies in this message's PSNs.
    pub(crate) fn holds(&self, psn: Psn) -> bool {
        self.started && psn.in_window(self.first_psn, self.npkts.max(1))
    }
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) pd: PdId,
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) cap: QpCap,
    pub(crate) state: QpState,
    pub(crate) attr: QpAttr,
    pub(crate) sq: VecDeque<SendWqe>,
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) req: Requester,
    pub(crate) comp: Completer,
    pub(crate) resp: Responder,
    /// How the engine schedules this QP (kept here, so that a packet costs no lookups).
    pub(crate) scheduling: Scheduling,
    /// Its share of the device's transport counters, kept for its whole life.
    pub(crate) counters: QpCounters,
    /// DCQCN's notification point: CNPs for CE-marked packets received.
    pub(crate) notify: Notifier,
    /// DCQCN's reaction point: the rate CNPs received allow.
    pub(crate) rate: RateLimiter,
    /// Selective repeat (off unless the peer speaks it).
    pub(crate) sr: sr::Sr,
    /// How many PSNs the requester keeps unacknowledged under go-back-N.
    pub(crate) window: Window,
}

/// The engine's bookkeeping of one QP: whether it waits in the engine's ready queue,
/// whether it has a deadline, and the time of its entry in the engine's timer set.
#[derive(Debug, Default)]
pub(crate) struct Scheduling {
    pub(crate) queued: bool,
    pub(crate) armed: bool,
    pub(crate) timer_entry: Option<Instant>,
}

impl Qp {
    pub(crate) fn new(
        qpn: u32,
        qp_type: QpType,
        pd: PdId,
        send_cq: u32,
        recv_cq: u32,
        cap: QpCap,
    ) -> Self {
        Self {
            qpn,
            qp_type,
            pd,
            send_cq,
            recv_cq,
            cap,
            state: QpState::Reset,
            attr: QpAttr::default(),
            sq: VecDeque::new(),
            rq: VecDeque::new(),
            req: Requester::default(),
            comp: Completer::default(),
            resp: Responder::default(),
            scheduling: Scheduling::default(),
            counters: QpCounters::default(),
            notify: Notifier::default(),
            rate: RateLimiter::default(),
            sr: sr::Sr::default(),
            window: Window::default(),
        }
    }

    pub(crate) fn mtu(&self) -> u32 {
        self.attr.path_mtu.bytes()
    }

    /// Applies a checked modify.
    pub(crate) fn apply(&mut self, attr: &QpAttr, mask: crate::verbs::AttrMask, ctx: &mut Ctx<'_>) {
        use crate::verbs::AttrMask as A;
        let a = &mut self.attr;
        if mask.contains(A::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if mask.contains(A::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if mask.contains(A::PORT) {
            a.port_num = attr.port_num;
        }
        if mask.contains(A::QKEY) {
            a.qkey = attr.qkey;
        }
        if mask.contains(A::AV) {
            a.ah_attr = attr.ah_attr;
            a.traffic_class = attr.traffic_class;
        }
        if mask.contains(A::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if mask.contains(A::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if mask.contains(A::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt & 7;
            self.comp.retry_left = a.retry_cnt;
        }
        if mask.contains(A::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry & 7;
            self.comp.rnr_left = a.rnr_retry;
        }
        if mask.contains(A::RQ_PSN) {
            a.rq_psn = attr.rq_psn & Psn::MASK;
            self.resp.psn = Psn::new(a.rq_psn);
        }
        if mask.contains(A::SQ_PSN) {
            a.sq_psn = attr.sq_psn & Psn::MASK;
            self.req.psn = Psn::new(a.sq_psn);
            self.req.high_psn = self.req.psn;
            self.comp.psn = self.req.psn;
        }
        if mask.contains(A::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask.contains(A::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask.contains(A::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer & 0x1f;
        }
        if mask.contains(A::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num & QPN_MASK;
        }
        if mask.contains(A::STATE) {
            let to = attr.qp_state;
            a.qp_state = to;
            match to {
                QpState::Reset => self.reset(),
                QpState::Err => self.enter_error(ctx),
                _ => self.state = to,
            }
        }
    }

    /// Back to RESET: queues emptied without completions, all state forgotten.
    fn reset(&mut self) {
        self.state = QpState::Reset;
        self.sq.clear();
        self.rq.clear();
        self.req = Requester::default();
        self.comp = Completer::default();
        self.resp = Responder::default();
        self.notify = Notifier::default();
        self.rate = RateLimiter::default();
        self.sr.clear();
        self.window.clear();
    }

    /// Moves the QP to ERROR: every outstanding work request completes with WR_FLUSH_ERR.
    pub(crate) fn enter_error(&mut self, ctx: &mut Ctx<'_>) {
        self.state = QpState::Err;
        self.comp.timer = None;
        self.comp.rnr_until = None;
        self.resp.clear_in_progress();
        self.sr.clear();
        while let Some(wqe) = self.sq.pop_front() {
            self.push_send_completion(ctx, &wqe, WcStatus::WrFlushErr, 0);
        }
        self.req.next = 0;
        self.req.offset = 0;
        if let Some(recv) = self.resp.take_recv() {
            self.push_recv_flush(ctx, recv.wr_id);
        }
        while let Some(wr) = self.rq.pop_front() {
            self.push_recv_flush(ctx, wr.wr_id);
        }
    }

    fn push_recv_flush(&self, ctx: &mut Ctx<'_>, wr_id: u64) {
        let wc = WorkCompletion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode: WcOpcode::Recv,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.qpn,
            src_qp: 0,
        };
        ctx.complete(self.recv_cq, wc, false);
    }

    /// Reports a send work request's outcome: always on error, on success only if signaled.
    pub(crate) fn push_send_completion(
        &self,
        ctx: &mut Ctx<'_>,
        wqe: &SendWqe,
        status: WcStatus,
        byte_len: u32,
    ) {
        if status != WcStatus::Success {
            ctx.counters.send_err += 1;
        } else if !wqe.wr.flags.signaled {
            return;
        }
        let wc = WorkCompletion {
            wr_id: wqe.wr.wr_id,
            status,
            opcode: WcOpcode::of(&wqe.wr.op),
            byte_len,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.qpn,
            src_qp: 0,
        };
        ctx.complete(self.send_cq, wc, false);
    }

    /// Completes the head of the send queue with `status`; on error the QP moves to ERROR.
    pub(crate) fn complete_head(&mut self, ctx: &mut Ctx<'_>, status: WcStatus) {
        let Some(wqe) = self.sq.pop_front() else {
            return;
        };
        if self.sr.on && wqe.consumes_recv() {
            self.sr.send.recv_done = self.sr.send.recv_done.wrapping_add(1);
        }
        if self.req.next == 0 {
            self.req.offset = 0;
        } else {
            self.req.next -= 1;
        }
        let byte_len = match wqe.wr.op {
            SendOp::Read(_) => wqe.len as u32,
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => 8,
            // rxe reports the flushed length.
            SendOp::Flush { len, .. } => len,
            _ => wqe.len as u32,
        };
        self.push_send_completion(ctx, &wqe, status, byte_len);
        if status != WcStatus::Success {
            self.enter_error(ctx);
        }
    }

    /// The next time this QP needs `handle_timeout`.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        [self.comp.timer, self.comp.rnr_until, self.rate.deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether `poll_transmit` has something to send for this QP.
    pub(crate) fn wants_to_send(&self) -> bool {
        self.notify.pending || self.resp.has_output() || self.requester_ready()
    }
}
