//! The completer: acknowledgements, NAKs and responses to completions, retries and
//! timers (IBTA §9.7.5; rxe `rxe_comp.c`).
//!
//! One ACK acknowledges every PSN up to its own. A READ or atomic that such an ACK covers
//! before its response came lost that response: an implied NAK, retried like a sequence
//! NAK. Retries go back to the oldest unacknowledged PSN (go-back-N), resuming a message
//! at that packet, a READ at the bytes already received. `retry_cnt` counts retries after
//! timeouts and sequence NAKs, `rnr_retry` after RNR NAKs; both are restored by progress,
//! and 7 means "forever" for both, as in rxe. A READ response after a gap inside its own
//! READ is dropped and left to the timer, as rxe does; one past the oldest unanswered READ
//! or atomic is an implied NAK, as an ACK there is. The retransmit timer runs from the
//! last response of any kind, as rxe's does: a timeout, and the retry it counts, means the
//! responder has been silent for the whole timeout, not merely that nothing new was
//! acknowledged.
//!
//! Two things rocex does sooner than rxe, with the packets rxe would send (unless
//! `Config::rxe_recovery`): a READ response after a gap starts the retry from the first
//! missing response at once, as a sequence NAK would, and the timer has an early deadline
//! a measured round trip after the last packet sent or response received ([`rtt`]), at
//! which it resends without counting a retry.
//!
//! rxe's `rxe_completer` is a loop over the states of `enum comp_state`; here they are:
//!
//! | rxe (`rxe_comp.c`) | rocex |
//! |---|---|
//! | `COMPST_GET_ACK` (take a response from `resp_pkts`) | the engine hands each response to `Qp::handle_response` |
//! | `COMPST_GET_WQE` (`get_wqe`: the oldest WQE) | `sq.front()` in `ack_through` and `on_data_response` |
//! | `COMPST_CHECK_PSN` (`check_psn`: duplicate, past the oldest WQE, or a gap) | `on_ack`, `outstanding` (for NAKs) and the PSN tests at the top of `on_data_response` |
//! | `COMPST_CHECK_ACK` (`check_ack`: opcode and syndrome) | `judge_response`; in `on_data_response`, the response's opcode and position against the request (else `BadRespErr`) |
//! | `COMPST_READ` (`do_read`) | `on_data_response`: `scatter` of the READ's bytes |
//! | `COMPST_ATOMIC` (`do_atomic`) | `on_data_response`: `scatter` of the AtomicAckETH's original value |
//! | `COMPST_WRITE_SEND` (an ACK) | `on_ack`, then `ack_through` |
//! | `COMPST_COMP_ACK`, `COMPST_COMP_WQE` (`complete_ack`, `complete_wqe`, `do_complete`) | `Qp::complete_head` (`qp/mod.rs`), from `ack_through` and `on_data_response` |
//! | `COMPST_UPDATE_COMP` (`comp.psn` forward) and `reset_retry_counters` | `ack_through`, `on_data_response`, then `progress` |
//! | `COMPST_ERROR_RETRY` (sequence NAK, implied NAK, timeout; `started_retry`) | `retry`, from `on_nak`, `ack_through`, `on_data_response` and `handle_timer` |
//! | `COMPST_RNR_RETRY` (and `rnr_nak_timer`) | `on_rnr_nak`: `rnr_left`, `rnr_until`; `handle_timer` lets the requester go |
//! | `COMPST_ERROR` (`wqe->status` from the NAK code, then `rxe_qp_error`) | `on_nak`'s status, `Qp::complete_head` with it, which calls `Qp::enter_error` |
//! | `COMPST_EXIT` (`mod_timer` while PSNs are unacknowledged) | `kick_timer` |
//! | `retransmit_timer` | `handle_timer` (and, before the timeout, `resend_early`) |
//! | `rxe_drain_resp_pkts` (QP in error: flush the send queue) | `Qp::enter_error` |
//!
//! Selective repeat (rocex's own) has no rxe counterpart: SACKs and the holes they show are
//! `selective.rs`'s, and `retry` resends through `resend_from`, which is go-back-N without it.

mod rtt;
mod selective;

use rocex_mem::Access;
use rocex_wire::{NakCode, PacketRepr, Psn, Syndrome};

use super::Qp;
use crate::Ctx;
use crate::time::{Instant, ack_timeout, rnr_delay};
use crate::verbs::{SendData, SendOp, WcStatus};
use rtt::Rtt;

/// Completer state of a QP.
#[derive(Debug, Default)]
pub(crate) struct Completer {
    /// The oldest PSN not yet acknowledged (or answered).
    pub(crate) psn: Psn,
    /// Retries left after timeouts and sequence NAKs.
    pub(crate) retry_left: u8,
    /// Retries left after RNR NAKs.
    pub(crate) rnr_left: u8,
    /// When the retransmit timer fires next: the early deadline or the ACK timeout.
    pub(crate) timer: Option<Instant>,
    /// When the ACK timeout runs out, counted from the last response (or the first packet).
    silent_until: Option<Instant>,
    /// Round trips measured, for the early deadline.
    rtt: Rtt,
    /// Until when an RNR NAK holds the requester back.
    pub(crate) rnr_until: Option<Instant>,
    /// A retry has started and no progress followed: until it does, only a timeout
    /// starts another (rxe `started_retry`), so one loss does not set off a retry for
    /// every sign of it (repeated ACKs and NAKs).
    started_retry: bool,
}

/// Retry counts of 7 never run out.
const INFINITE: u8 = 7;

impl Qp {
    /// Handles a response packet (ACK, NAK, READ response, atomic ACK) on an RC QP.
    pub(crate) fn handle_response(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) {
        self.judge_response(ctx, pkt);
        self.kick_timer(ctx);
    }

    /// Restarts an armed retransmit timer: any response, even a duplicate or one after a
    /// gap, shows the responder alive (rxe `rxe_comp.c`: every completer run that ends in
    /// COMPST_EXIT with PSNs sent and unacknowledged calls `mod_timer`; "we do not reset
    /// the timer but kick it down the road"). Restarted only on progress, the timer fired
    /// every timeout while responses delayed past it kept streaming in, each firing spent
    /// a retry, and READs and atomics in flight failed with RETRY_EXC_ERR while their
    /// answers were on the way.
    fn kick_timer(&mut self, ctx: &Ctx<'_>) {
        if self.comp.timer.is_some() {
            self.arm_timer(ctx);
        }
    }

    /// Starts the retransmit timer at `now`: the ACK timeout, and before it the early
    /// deadline. A QP with timeout 0 waits forever, as in rxe.
    fn arm_timer(&mut self, ctx: &Ctx<'_>) {
        self.comp.silent_until = ack_timeout(self.attr.timeout).map(|t| ctx.now + t);
        self.comp.timer = self.next_deadline(ctx);
    }

    /// The earlier of the ACK timeout and the early deadline counted from `now`.
    fn next_deadline(&self, ctx: &Ctx<'_>) -> Option<Instant> {
        let full = self.comp.silent_until?;
        let early = (!ctx.rxe_recovery)
            .then(|| {
                let probe = self.sr.on.then(|| self.comp.rtt.probe_at(ctx.now));
                probe.flatten().or_else(|| self.comp.rtt.deadline(ctx.now))
            })
            .flatten();
        Some(early.map_or(full, |e| e.min(full)))
    }

    /// A request packet has gone out (`resent`: again): timed if none is, and the early
    /// deadline moves past it.
    pub(crate) fn request_sent(&mut self, ctx: &Ctx<'_>, psn: Psn, resent: bool) {
        if resent {
            self.comp.rtt.resent(psn, ctx.now, self.sr.on);
        } else {
            self.comp.rtt.sent(psn, ctx.now);
        }
        if self.comp.timer.is_none() {
            self.arm_timer(ctx);
        } else {
            self.comp.timer = self.next_deadline(ctx);
        }
    }

    /// Acts on what the response says: acknowledgement, NAK, READ data or atomic result.
    fn judge_response(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) {
        if self.sr.on {
            return self.sr_response(ctx, pkt);
        }
        if pkt.opcode().is_selective() {
            ctx.counters.drop_unexpected_response += 1;
            return;
        }
        let psn = pkt.bth.psn;
        let aeth = pkt.aeth;
        match aeth.map(|a| a.syndrome) {
            Some(Syndrome::RnrNak { timer }) => return self.on_rnr_nak(ctx, psn, timer),
            Some(Syndrome::Nak(code)) => return self.on_nak(ctx, psn, code),
            Some(Syndrome::Reserved(_)) => {
                ctx.counters.drop_unexpected_response += 1;
                return;
            }
            _ => {}
        }
        if pkt.opcode() == rocex_wire::Opcode::RC_ACKNOWLEDGE {
            return self.on_ack(ctx, psn);
        }
        self.on_data_response(ctx, pkt);
    }

    /// Whether `psn` names a PSN sent and not yet acknowledged.
    fn outstanding(&self, psn: Psn) -> bool {
        psn.diff(self.comp.psn) >= 0 && psn.is_before(self.req.high_psn)
    }

    fn on_ack(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if psn.is_before(self.comp.psn) {
            ctx.counters.drop_duplicate_ack += 1;
            return;
        }
        if !psn.is_before(self.req.high_psn) {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        self.ack_through(ctx, psn);
    }

    /// Acknowledges every PSN up to and including `psn`.
    fn ack_through(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        let mut progressed = false;
        while let Some(w) = self.sq.front() {
            if !w.started || w.last_psn().is_after(psn) {
                break;
            }
            if w.needs_response() {
                // Selective repeat: its responses may have come already, out of order
                // (`selective`), and the ones missing are resent as holes.
                if self.sr.on {
                    if progressed {
                        self.progress(ctx);
                    }
                    return;
                }
                // Acknowledged past a READ or atomic whose response never came.
                if progressed {
                    self.progress(ctx);
                }
                return self.retry(ctx, self.comp.psn);
            }
            self.comp.psn = w.last_psn().add(1);
            self.complete_head(ctx, WcStatus::Success);
            progressed = true;
        }
        if psn.add(1).is_after(self.comp.psn) {
            self.comp.psn = psn.add(1);
            progressed = true;
        }
        if progressed {
            self.progress(ctx);
        }
    }

    /// Forward progress: retry counts restored, the timer restarted or stopped, and the
    /// requester moved past anything acknowledged while it was going back.
    fn progress(&mut self, ctx: &mut Ctx<'_>) {
        self.comp.started_retry = false;
        self.comp.retry_left = self.attr.retry_cnt;
        self.comp.rnr_left = self.attr.rnr_retry;
        self.comp.rtt.progress(self.comp.psn, ctx.now);
        if !ctx.rxe_recovery {
            self.window.acked(self.comp.psn);
        }
        if self.comp.psn.is_before(self.req.high_psn) {
            self.arm_timer(ctx);
        } else {
            self.comp.timer = None;
        }
        if self.req.psn.is_before(self.comp.psn) {
            self.go_back(self.comp.psn);
        }
    }

    fn on_rnr_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn, timer: u8) {
        if !self.outstanding(psn) {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        ctx.counters.rcvd_rnr_err += 1;
        self.counters.rcvd_rnr_err += 1;
        if psn != self.comp.psn {
            self.ack_through(ctx, psn.sub(1));
            if self.comp.psn != psn {
                return; // an implied NAK took over
            }
        }
        if self.comp.rnr_left == 0 {
            ctx.counters.retry_rnr_exceeded_err += 1;
            return self.complete_head(ctx, WcStatus::RnrRetryExcErr);
        }
        if self.comp.rnr_left != INFINITE {
            self.comp.rnr_left -= 1;
        }
        self.comp.timer = None;
        self.comp.rnr_until = Some(ctx.now + rnr_delay(timer));
        self.go_back(psn);
    }

    fn on_nak(&mut self, ctx: &mut Ctx<'_>, psn: Psn, code: NakCode) {
        let in_range = self.outstanding(psn)
            || (code == NakCode::PsnSequenceError && psn == self.req.high_psn);
        if !in_range {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        if psn != self.comp.psn {
            self.ack_through(ctx, psn.sub(1));
            if self.comp.psn != psn {
                return;
            }
        }
        let status = match code {
            NakCode::PsnSequenceError => {
                ctx.counters.rcvd_seq_err += 1;
                self.counters.rcvd_seq_err += 1;
                return self.retry(ctx, psn);
            }
            NakCode::InvalidRequest => WcStatus::RemInvReqErr,
            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
            NakCode::RemoteOperationalError | NakCode::Reserved(_) => WcStatus::RemOpErr,
            NakCode::InvalidRdRequest => WcStatus::RemInvRdReqErr,
        };
        self.complete_head(ctx, status);
    }

    /// A READ response, an atomic ACK, or the empty READ response that answers ATOMIC_WRITE
    /// and FLUSH.
    fn on_data_response(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) {
        let psn = pkt.bth.psn;
        if psn.is_before(self.comp.psn) {
            ctx.counters.drop_duplicate_ack += 1;
            return;
        }
        if !psn.is_before(self.req.high_psn) {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        if psn != self.comp.psn
            && self
                .sq
                .front()
                .is_some_and(|w| w.started && w.last_psn().is_before(psn))
            && let Some(first) = self.sq.iter().find(|w| w.holds(psn)).map(|w| w.first_psn)
        {
            // Past the oldest request, as an ACK would be: it acknowledges the SENDs and
            // WRITEs before its own request and shows a READ's or atomic's response there
            // lost, an implied NAK (rxe `check_psn`: COMPST_COMP_ACK, COMPST_ERROR_RETRY).
            self.ack_through(ctx, first.sub(1));
        }
        if psn != self.comp.psn {
            // Responses before this one within its own request were lost. rxe waits for
            // its timer, which resends from the first missing one (`check_psn`:
            // COMPST_DONE); rocex resends from there at once, as after a sequence NAK,
            // once per loss (`started_retry`).
            ctx.counters.drop_out_of_seq += 1;
            if !ctx.rxe_recovery {
                self.retry(ctx, self.comp.psn);
            }
            return;
        }
        // Everything before the response's request is acknowledged by it.
        while let Some(w) = self.sq.front() {
            if !w.started || w.holds(psn) || !w.last_psn().is_before(psn) || w.needs_response() {
                break;
            }
            self.complete_head(ctx, WcStatus::Success);
        }
        let mtu = self.mtu();
        let Some(w) = self
            .sq
            .front()
            .filter(|w| w.holds(psn) && w.needs_response())
        else {
            ctx.counters.drop_unexpected_response += 1;
            return;
        };
        let idx = psn.diff(w.first_psn) as u32;
        let info = pkt
            .bth
            .opcode
            .info()
            .expect("parsed opcodes are in the table");
        let op = pkt.opcode();
        use rocex_wire::Opcode as O;
        let result = match w.wr.op {
            SendOp::Read(_) if op != O::RC_ATOMIC_ACKNOWLEDGE => {
                let last = idx + 1 == w.npkts;
                let at = u64::from(idx) * u64::from(mtu);
                let expected = (w.len - at).min(u64::from(mtu));
                if info.position.starts() != (idx == 0)
                    || info.position.ends() != last
                    || pkt.payload.len() as u64 != expected
                {
                    Err(WcStatus::BadRespErr)
                } else {
                    scatter(ctx, self.pd, &w.wr.data, at, pkt.payload).map(|()| last)
                }
            }
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
                if op == O::RC_ATOMIC_ACKNOWLEDGE =>
            {
                // The original value comes from the AtomicAckETH, never a stand-in.
                match pkt.atomic_ack_eth {
                    Some(a) => {
                        scatter(ctx, self.pd, &w.wr.data, 0, &a.orig.to_ne_bytes()).map(|()| true)
                    }
                    None => Err(WcStatus::BadRespErr),
                }
            }
            SendOp::AtomicWrite { .. } | SendOp::Flush { .. }
                if op == O::RC_RDMA_READ_RESPONSE_ONLY && pkt.payload.is_empty() =>
            {
                Ok(true)
            }
            _ => Err(WcStatus::BadRespErr),
        };
        match result {
            Err(status) => {
                if status == WcStatus::BadRespErr {
                    ctx.counters.drop_unexpected_response += 1;
                }
                self.complete_head(ctx, status);
            }
            Ok(done) => {
                self.comp.psn = psn.add(1);
                if done {
                    self.complete_head(ctx, WcStatus::Success);
                }
                self.progress(ctx);
            }
        }
    }

    /// The retransmit timer or the RNR wait has run out.
    pub(crate) fn handle_timer(&mut self, ctx: &mut Ctx<'_>) {
        if self.comp.rnr_until.is_some_and(|t| t <= ctx.now) {
            self.comp.rnr_until = None;
            self.arm_timer(ctx);
        }
        if self.comp.timer.is_some_and(|t| t <= ctx.now) {
            self.comp.timer = None;
            if !self.comp.psn.is_before(self.req.high_psn) {
                return;
            }
            if self.comp.silent_until.is_some_and(|t| t <= ctx.now) {
                self.comp.started_retry = false;
                self.retry(ctx, self.comp.psn);
            } else if self.sr.on && self.comp.rtt.probe_at(ctx.now).is_some() {
                self.sr_probe(ctx);
            } else {
                self.resend_early(ctx);
            }
        }
    }

    /// The early deadline ran out before the ACK timeout: go back to the oldest
    /// unacknowledged PSN, as the timeout would, without counting a retry, and wait twice
    /// as long for the next. The ACK timeout keeps running from the last response.
    fn resend_early(&mut self, ctx: &mut Ctx<'_>) {
        self.comp.started_retry = true;
        self.comp.rtt.back_off();
        self.resend_from(self.comp.psn);
        self.comp.timer = self.next_deadline(ctx);
    }

    /// Counts a retry and goes back to `from`, or fails the oldest request when none is left.
    fn retry(&mut self, ctx: &mut Ctx<'_>, from: Psn) {
        if self.comp.started_retry {
            return;
        }
        self.comp.started_retry = true;
        if self.comp.retry_left == 0 {
            ctx.counters.retry_exceeded_err += 1;
            return self.complete_head(ctx, WcStatus::RetryExcErr);
        }
        ctx.counters.completer_retry_err += 1;
        if self.comp.retry_left != INFINITE {
            self.comp.retry_left -= 1;
        }
        self.resend_from(from);
        self.arm_timer(ctx);
    }

    /// Points the requester at `from`: the request holding it, at the packet it starts.
    /// Requests keep the PSNs they were first given, so a resent packet has its old PSN.
    pub(crate) fn go_back(&mut self, from: Psn) {
        let mtu = u64::from(self.mtu());
        let i = self
            .sq
            .iter()
            .position(|w| !w.started || !w.last_psn().is_before(from))
            .unwrap_or(self.sq.len());
        self.req.next = i;
        self.req.psn = from;
        self.req.offset = 0;
        if let Some(w) = self.sq.get(i).filter(|w| w.started) {
            if w.holds(from) {
                if !matches!(
                    w.wr.op,
                    SendOp::CompareSwap { .. }
                        | SendOp::FetchAdd { .. }
                        | SendOp::AtomicWrite { .. }
                        | SendOp::Flush { .. }
                ) {
                    self.req.offset = u64::from(from.diff(w.first_psn) as u32) * mtu;
                }
            } else {
                self.req.psn = w.first_psn;
            }
        }
    }
}

/// Copies response data into the request's local buffers at `offset`.
fn scatter(
    ctx: &mut Ctx<'_>,
    pd: rocex_mem::PdId,
    data: &SendData,
    offset: u64,
    bytes: &[u8],
) -> Result<(), WcStatus> {
    let SendData::Sges(sges) = data else {
        return Err(WcStatus::LocProtErr);
    };
    super::sge::walk(
        ctx.mem,
        pd,
        sges,
        offset,
        bytes.len(),
        Access::LOCAL_WRITE,
        |t, r| t.write_at(0, &bytes[r]),
    )
    .map_err(|e| match e {
        super::sge::SgeError::Key => WcStatus::LocProtErr,
        super::sge::SgeError::Short => WcStatus::LocLenErr,
    })
}
