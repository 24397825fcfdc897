//! The completer and requester under selective repeat (`qp/sr`): SACKs mark what the
//! responder holds, the holes below the highest PSN it holds are resent one packet each
//! (a READ's missing responses asked for again as one range), READ responses are taken in
//! any order, and completions stay in posting order. Timeouts, RNR NAKs and error NAKs
//! keep the in-order rules: a NAK's PSN acknowledges every PSN before it, as the
//! selective-repeat responder sends NAKs only at its expected PSN.

use core::time::Duration;

use rocex_wire::{Opcode, PacketRepr, Psn, RethRepr, SackRepr, SrEthRepr, Syndrome};

use super::scatter;
use crate::Ctx;
use crate::qp::requester::packets;
use crate::qp::sr::SPAN;
use crate::qp::{Qp, SendWqe};
use crate::time::Instant;
use crate::verbs::{QpState, SendOp, WcStatus};

/// Where the requester stood before it went back for one resend, to return to after it.
#[derive(Debug)]
pub(crate) struct Resume {
    psn: Psn,
    next: usize,
    offset: u64,
    /// A READ asked for again: the bytes of its missing range.
    read_len: Option<u64>,
    /// PSNs the resend covers.
    psns: u32,
}

impl Qp {
    /// A response on a QP with selective repeat.
    pub(super) fn sr_response(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) {
        let psn = pkt.bth.psn;
        match pkt.aeth.map(|a| a.syndrome) {
            Some(Syndrome::RnrNak { timer }) => self.on_rnr_nak(ctx, psn, timer),
            Some(Syndrome::Nak(code)) => self.on_nak(ctx, psn, code),
            Some(Syndrome::Reserved(_)) => ctx.counters.drop_unexpected_response += 1,
            _ => match (pkt.opcode(), pkt.sack) {
                (Opcode::SR_ACKNOWLEDGE, Some(sack)) => {
                    self.sr_note_cumulative(psn, ctx.now);
                    self.sr_on_sack(ctx, psn, &sack);
                }
                (Opcode::RC_ACKNOWLEDGE, _) => {
                    self.sr_note_cumulative(psn, ctx.now);
                    self.on_ack(ctx, psn);
                }
                _ => self.sr_data_response(ctx, pkt),
            },
        }
        if matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.sr_advance(ctx);
        }
    }

    /// Remembers the furthest cumulative acknowledgement: one that stopped at a READ or
    /// atomic still waiting for its response applies again once that response came
    /// ([`Qp::sr_advance`]), as the responder will not repeat it unasked.
    /// Its request packets past a READ or atomic that holds the oldest unacknowledged PSN
    /// back are held by the peer: never holes to resend.
    fn sr_note_cumulative(&mut self, psn: Psn, now: Instant) {
        if !psn.is_before(self.req.high_psn)
            || self.sr.send.cumulative.is_some_and(|c| !psn.is_after(c))
        {
            return;
        }
        self.sr.send.cumulative = Some(psn);
        self.sr.send.sync(self.comp.psn);
        let mut q = self.comp.psn;
        for w in self.sq.iter().filter(|w| w.started) {
            if w.first_psn.is_after(psn) {
                break;
            }
            if w.needs_response() {
                continue;
            }
            if q.is_before(w.first_psn) {
                q = w.first_psn;
            }
            while w.holds(q) && !q.is_after(psn) {
                self.sr.send.hold(q);
                self.comp.rtt.held(q, now);
                q = q.add(1);
            }
        }
    }

    /// A cumulative acknowledgement with the PSNs held past it.
    fn sr_on_sack(&mut self, ctx: &mut Ctx<'_>, cumulative: Psn, sack: &SackRepr) {
        if !cumulative.is_before(self.req.high_psn) {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        if !cumulative.is_before(self.comp.psn) {
            self.ack_through(ctx, cumulative);
        }
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let oldest = self.comp.psn;
        self.sr.send.sync(oldest);
        let high = self.req.high_psn;
        let mut highest = None;
        let mut latest = None;
        // The SACK's PSNs and the send queue both ascend: one pass over each.
        let mut wqes = self.sq.iter().filter(|w| w.started).peekable();
        for q in sack.psns(cumulative) {
            if q.is_before(oldest) || !q.is_before(high) {
                continue;
            }
            // The request at `q` arrived, and shows the requests missing before it lost
            // (a READ's too: a stream of READs has no other packets to show them).
            self.comp.rtt.held(q, ctx.now);
            highest = Some(q);
            latest = latest.max(self.sr_resend_answered(q, ctx.now));
            while wqes.next_if(|w| w.last_psn().is_before(q)).is_some() {}
            // A READ's or atomic's PSNs are marked by their responses, not here.
            if wqes
                .peek()
                .is_some_and(|w| w.holds(q) && w.needs_response())
            {
                continue;
            }
            self.sr.send.hold(q);
        }
        let Some(highest) = highest else { return };
        // Every packet before the highest held one and not held itself is lost (or, if
        // resent, lost again when the highest was sent after the resend).
        // Executed (or kept to execute) by the responder when the SACK left.
        let held = |p: Psn| {
            let d = p.diff(cumulative);
            d <= 0 || sack.get((d - 1) as u32)
        };
        let mut holes = Vec::new();
        for w in self.sq.iter().filter(|w| w.started) {
            if !w.first_psn.is_before(highest) {
                break;
            }
            if w.needs_response() {
                // Not executed when the SACK left (its first PSN not held): asked again.
                if !held(w.first_psn) && !w.first_psn.is_before(oldest) {
                    holes.push(w.first_psn);
                }
                continue;
            }
            let mut q = if w.first_psn.is_before(oldest) {
                oldest
            } else {
                w.first_psn
            };
            while w.holds(q) && q.is_before(highest) {
                holes.push(q);
                q = q.add(1);
            }
        }
        for q in holes {
            self.sr_hole(q, highest, latest, None);
        }
    }

    /// When `q` was last resent, if the answer at `now` that shows it arrived can be that
    /// resend's. A hole resent before then and still missing was lost again.
    fn sr_resend_answered(&self, q: Psn, now: Instant) -> Option<Instant> {
        let again = self.sr.send.resent_time(q)?;
        self.comp.rtt.may_answer(again, now).then_some(again)
    }

    /// Queues `q` for resending unless the peer holds it, or its last resend may still
    /// be answered: nothing sent after it is known to have arrived and, for a missing READ
    /// response (`now`), less than two retransmit timeouts have passed since. A READ range
    /// asked again is answered after whatever the responder had queued, which no later PSN
    /// reveals; request packets have their SACKs, and resending them on time alone cost
    /// goodput at 10% loss (queues, not loss, delayed the answers).
    ///
    /// "Sent after" is in time, as RACK has it (RFC 8985): a packet past `q` first sent
    /// after the resend (`highest` at or past the frontier then), or any packet resent
    /// after it (`latest`: the last resend of a packet the answer shows arrived, if the
    /// answer can be that resend's). By PSN alone a resend answered only by the answers to
    /// other resends, with nothing new sent, looked unanswered for ever.
    ///
    /// `rto` is the time now and the retransmit timeout then, for a missing READ response.
    fn sr_hole(
        &mut self,
        q: Psn,
        highest: Psn,
        latest: Option<Instant>,
        rto: Option<(Instant, Duration)>,
    ) {
        let Some(m) = self.sr.send.mark(q) else {
            return;
        };
        let overdue = m
            .resent_time
            .is_some_and(|t| rto.is_some_and(|(n, r)| n >= t + r * 2));
        let overtaken = m.resent_time.is_some_and(|t| latest.is_some_and(|l| t < l));
        if m.got || (m.resent_at.is_some_and(|at| highest.is_before(at)) && !overdue && !overtaken)
        {
            return;
        }
        self.sr.send.queue(q, false);
    }

    /// A READ response, atomic acknowledgement or empty READ response, in any order.
    fn sr_data_response(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) {
        let psn = pkt.bth.psn;
        if psn.is_before(self.comp.psn) {
            ctx.counters.drop_duplicate_ack += 1;
            return;
        }
        if !psn.is_before(self.req.high_psn) {
            ctx.counters.drop_ghost_ack += 1;
            return;
        }
        let Some(first) = self.sq.iter().find(|w| w.holds(psn)).map(|w| w.first_psn) else {
            ctx.counters.drop_unexpected_response += 1;
            return;
        };
        // Answered: the responder executed everything before the request (in order).
        if self.comp.psn.is_before(first) {
            self.ack_through(ctx, first.sub(1));
            if !matches!(self.state, QpState::Rts | QpState::Sqd) {
                return;
            }
        }
        let Some(i) = self.sq.iter().position(|w| w.holds(psn)) else {
            return;
        };
        if !matches!(self.sq[i].wr.op, SendOp::Read(_))
            || pkt.opcode() == Opcode::RC_ATOMIC_ACKNOWLEDGE
        {
            // One-packet answers complete as in order once they are the oldest; before
            // that, an atomic's original value waits with its mark.
            if i == 0 && psn == self.comp.psn {
                return self.on_data_response(ctx, pkt);
            }
            let orig = match (self.sq[i].wr.op, pkt.atomic_ack_eth) {
                (SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }, Some(a)) => a.orig,
                (SendOp::AtomicWrite { .. } | SendOp::Flush { .. }, None)
                    if pkt.opcode() == Opcode::RC_RDMA_READ_RESPONSE_ONLY
                        && pkt.payload.is_empty() =>
                {
                    0
                }
                _ => {
                    ctx.counters.drop_unexpected_response += 1;
                    return;
                }
            };
            self.sr.send.sync(self.comp.psn);
            if self.sr.send.got(psn) {
                ctx.counters.drop_duplicate_ack += 1;
                return;
            }
            self.sr.send.hold(psn);
            self.comp.rtt.held(psn, ctx.now);
            self.sr.send.early.push_back((psn, orig));
            return self.sr_response_holes(psn, ctx.now);
        }
        self.sr.send.sync(self.comp.psn);
        if self.sr.send.got(psn) {
            ctx.counters.drop_duplicate_ack += 1;
            return;
        }
        let mtu = self.mtu();
        let w = &self.sq[i];
        let idx = psn.diff(w.first_psn) as u32;
        let at = u64::from(idx) * u64::from(mtu);
        let expected = (w.len - at).min(u64::from(mtu));
        let info = pkt
            .bth
            .opcode
            .info()
            .expect("parsed opcodes are in the table");
        let shape_ok = info.position.starts() == (idx == 0)
            && info.position.ends() == (idx + 1 == w.npkts)
            && pkt.payload.len() as u64 == expected;
        let placed = if shape_ok {
            scatter(ctx, self.pd, &w.wr.data, at, pkt.payload)
        } else {
            Err(WcStatus::BadRespErr)
        };
        if let Err(status) = placed {
            ctx.counters.drop_unexpected_response += 1;
            if i == 0 {
                self.complete_head(ctx, status);
            }
            return;
        }
        self.sr.send.hold(psn);
        // The READ request was executed.
        let first = self.sq[i].first_psn;
        self.comp.rtt.held(first, ctx.now);
        self.sr_response_holes(psn, ctx.now);
    }

    /// A response at `psn` came: the responder answers in PSN order, so every response
    /// before it still missing (READ data, atomic results) is lost.
    /// Each response calls it, and a hole holds the oldest PSN back for the round trips its
    /// recovery takes, so it walks the queue by index, with no list to build, and reads
    /// the retransmit timeout once.
    fn sr_response_holes(&mut self, psn: Psn, now: Instant) {
        let latest = self.sr_resend_answered(psn, now);
        let rto = self.comp.rtt.deadline(now).map(|d| (now, d.since(now)));
        let oldest = self.comp.psn;
        for i in 0..self.sq.len() {
            let w = &self.sq[i];
            if !(w.started && w.needs_response()) {
                continue;
            }
            if !w.first_psn.is_before(psn) {
                break;
            }
            let (first, npkts) = (w.first_psn, w.npkts.max(1));
            let mut q = if first.is_before(oldest) {
                oldest
            } else {
                first
            };
            while q.in_window(first, npkts) && q.is_before(psn) {
                self.sr_hole(q, psn, latest, rto);
                q = q.add(1);
            }
        }
    }

    /// Completes the READs at the head of the send queue whose responses have all come,
    /// moving the oldest unacknowledged PSN over the responses received in order.
    fn sr_advance(&mut self, ctx: &mut Ctx<'_>) {
        let mut progressed = false;
        while let Some(w) = self.sq.front() {
            if !w.started || !w.needs_response() || !w.holds(self.comp.psn) {
                break;
            }
            if !matches!(w.wr.op, SendOp::Read(_)) {
                // A one-packet answer that came early.
                let psn = self.comp.psn;
                let Some(at) = self.sr.send.early.iter().position(|(p, _)| *p == psn) else {
                    break;
                };
                let (_, orig) = self.sr.send.early.remove(at).expect("found");
                if matches!(
                    w.wr.op,
                    SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
                ) && let Err(status) = scatter(ctx, self.pd, &w.wr.data, 0, &orig.to_ne_bytes())
                {
                    return self.complete_head(ctx, status);
                }
                self.comp.psn = psn.add(1);
                progressed = true;
                self.complete_head(ctx, WcStatus::Success);
                continue;
            }
            let last = w.last_psn();
            while self.comp.psn.is_before(last.add(1)) && self.sr.send.got(self.comp.psn) {
                self.comp.psn = self.comp.psn.add(1);
                progressed = true;
            }
            if self.comp.psn != last.add(1) {
                break;
            }
            self.complete_head(ctx, WcStatus::Success);
        }
        if progressed {
            self.sr.send.sync(self.comp.psn);
            let oldest = self.comp.psn;
            self.sr.send.early.retain(|(p, _)| !p.is_before(oldest));
            self.progress(ctx);
        }
        if let Some(c) = self.sr.send.cumulative
            && !c.is_before(self.comp.psn)
            && c.is_before(self.req.high_psn)
            && matches!(self.state, QpState::Rts | QpState::Sqd)
            && self.sq.front().is_some_and(|w| !w.needs_response())
        {
            self.ack_through(ctx, c);
            if self
                .sq
                .front()
                .is_some_and(|w| w.needs_response() && w.holds(self.comp.psn))
            {
                self.sr_advance(ctx);
            }
        }
    }

    /// Resends from `from` (the retransmit timer, a sequence NAK): under selective repeat
    /// `from` again whatever is known of it, and every later packet the peer is not known
    /// to hold (a READ: its missing ranges), else go-back-N, with the window back to rxe's.
    /// The timer runs from the last packet sent or response received, so when it runs out
    /// the responder has had time to acknowledge, with a SACK, anything it got past a
    /// hole: what it has not acknowledged is lost. Resending only the oldest cost a timeout
    /// per packet when a burst took the end of a window (a GSO burst dropped whole: 0.03 of
    /// lossless goodput at 10% loss in bench-loss).
    pub(super) fn resend_from(&mut self, from: Psn) {
        if !self.sr.on {
            self.window.went_back(self.comp.psn);
            return self.go_back(from);
        }
        self.sr.send.sync(self.comp.psn);
        self.sr.send.queue(from, true);
        let mut q = from.add(1);
        while q.is_before(self.req.high_psn) {
            if let Some(m) = self.sr.send.mark(q)
                && !m.got
            {
                m.resent_at = None;
                self.sr.send.queue(q, false);
            }
            q = q.add(1);
        }
    }

    /// Whether every response of `w` (a READ, atomic, ATOMIC_WRITE or FLUSH) has come,
    /// though it may wait for an older one to complete. It then no longer takes one of the
    /// `max_rd_atomic` READs and atomics in flight: the selective-repeat responder keeps
    /// what it needs to answer again for every request in its window, not only the last
    /// `max_dest_rd_atomic` (`Qp::resources_kept`). Counted until its completion, one lost
    /// response held all 16 READs of a stream back for the round trips its recovery
    /// took.
    pub(crate) fn sr_answered(&self, w: &SendWqe) -> bool {
        (0..w.npkts.max(1)).all(|k| {
            let q = w.first_psn.add(k);
            q.is_before(self.comp.psn) || self.sr.send.got(q)
        })
    }

    /// Whether the window lets a new packet go: fewer than `Config::window` packets in flight
    /// (sent, and neither acknowledged nor held by the peer: IRN's BDP cap), and the
    /// packet within the responder's [`SPAN`] of the first request it may not have
    /// (`Qp::sr_unarrived`). Capped by the distance from the oldest unacknowledged PSN
    /// instead, a hole there stopped the stream for the round trips its recovery took,
    /// with the packets past it already delivered; and a READ whose response was lost
    /// holds the oldest unacknowledged PSN back though the responder has long passed it.
    pub(crate) fn sr_window_open(&self) -> bool {
        self.sr.send.in_flight(self.comp.psn, self.req.high_psn) < self.sr.window
            && (self.req.psn.diff(self.comp.psn) < SPAN as i32
                || self.req.psn.diff(self.sr_unarrived()) < SPAN as i32)
    }

    /// The first PSN from the oldest unacknowledged one on whose request packet the
    /// responder is not known to have: a SEND or WRITE packet not SACKed, a READ or
    /// atomic none of whose responses came (a response shows its request executed). The
    /// responder's expected PSN is at or past it.
    fn sr_unarrived(&self) -> Psn {
        let mut q = self.comp.psn;
        for w in self.sq.iter().take_while(|w| w.started) {
            if w.last_psn().is_before(q) {
                continue;
            }
            if w.needs_response() {
                let answered = (0..w.npkts.max(1)).any(|k| self.sr.send.got(w.first_psn.add(k)));
                if !answered && !w.first_psn.is_before(q) {
                    return w.first_psn;
                }
                q = w.last_psn().add(1);
                continue;
            }
            while w.holds(q) {
                if !self.sr.send.got(q) {
                    return q;
                }
                q = q.add(1);
            }
        }
        q
    }

    /// The tail-loss probe (`Rtt::probe_at`): the highest PSN sent that the peer
    /// is not known to hold goes again (a READ: its missing responses from there), and
    /// the timer waits for the early deadline. So does the oldest resend still unanswered:
    /// two round trips after the last packet sent, it was lost too. Nothing else shows that
    /// when nothing new follows it (a lost resend of the oldest READ request, the
    /// application's queue waiting for that READ): the answer to a probe of the tail only
    /// restarted the timer, probe after probe, and the stream stood still for
    /// milliseconds.
    pub(super) fn sr_probe(&mut self, ctx: &Ctx<'_>) {
        self.comp.rtt.probed();
        self.sr.send.sync(self.comp.psn);
        if let Some(q) = self.sr.send.unanswered_resend() {
            self.sr.send.queue(q, false);
        }
        let mut q = self.req.high_psn;
        while q.is_after(self.comp.psn) {
            q = q.sub(1);
            if !self.sr.send.got(q) {
                break;
            }
        }
        self.sr.send.queue(q, false);
        self.comp.timer = self.next_deadline(ctx);
    }

    /// The PSN from which every request up to READ `i` is a READ: the first of the READs
    /// before it on the send queue, back to a request of another kind. Everything before
    /// the queue's head is acknowledged, so the run may start there. A responder that has
    /// every request before it may answer the READ past a hole, as in order: the hole
    /// holds only READs, which change nothing (`docs/wire.md`, "Selective repeat").
    fn sr_read_run(&self, i: usize) -> Psn {
        let reads = self.sq.iter().take(i + 1).rev();
        let run = reads.take_while(|w| matches!(w.wr.op, SendOp::Read(_)));
        run.last().map_or(self.sq[i].first_psn, |w| w.first_psn)
    }

    /// Whether a resend is waiting.
    pub(crate) fn sr_resend_pending(&self) -> bool {
        self.sr.on && !self.sr.send.resend.is_empty()
    }

    /// Points the requester at the next packet to resend, if any, and says where it
    /// stood before.
    pub(crate) fn sr_begin_resend(&mut self) -> Option<Resume> {
        if !self.sr.on
            || self.state != QpState::Rts
            || self.comp.rnr_until.is_some()
            || self.rate.paced_until.is_some()
        {
            return None;
        }
        self.sr.send.sync(self.comp.psn);
        let mtu = self.mtu();
        while let Some(q) = self.sr.send.resend.pop_front() {
            if q.is_before(self.comp.psn) || !q.is_before(self.req.high_psn) {
                continue;
            }
            let Some(m) = self.sr.send.mark(q) else {
                continue;
            };
            let fresh = m.queued && !m.got;
            m.queued = false;
            let Some(i) = self.sq.iter().position(|w| w.holds(q)) else {
                continue;
            };
            if !fresh {
                continue;
            }
            let w = &self.sq[i];
            let mut resume = Resume {
                psn: self.req.psn,
                next: self.req.next,
                offset: self.req.offset,
                read_len: None,
                psns: 1,
            };
            let idx = q.diff(w.first_psn) as u32;
            let offset = match w.wr.op {
                SendOp::CompareSwap { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::AtomicWrite { .. }
                | SendOp::Flush { .. } => 0,
                _ => u64::from(idx) * u64::from(mtu),
            };
            if matches!(w.wr.op, SendOp::Read(_)) {
                // The run of missing responses from `q`, asked for as one range.
                let mut n = 1;
                while idx + n < w.npkts && !self.sr.send.got(q.add(n)) {
                    n += 1;
                }
                let len = (w.len - offset).min(u64::from(n) * u64::from(mtu));
                resume.read_len = Some(len);
                resume.psns = packets(len, mtu);
                for k in 1..n {
                    if let Some(m) = self.sr.send.mark(q.add(k)) {
                        m.queued = false;
                    }
                }
            }
            self.req.next = i;
            self.req.psn = q;
            self.req.offset = offset;
            return Some(resume);
        }
        None
    }

    /// Back at the frontier after a resend that went out at the frontier `high`.
    pub(crate) fn sr_end_resend(&mut self, resume: Resume, sent: Psn, now: Instant) {
        for k in 0..resume.psns {
            let high = self.req.high_psn;
            if let Some(m) = self.sr.send.mark(sent.add(k)) {
                m.resent_at = Some(high);
                m.resent_time = Some(now);
            }
        }
        self.req.psn = resume.psn;
        self.req.next = resume.next;
        self.req.offset = resume.offset;
    }

    /// Gives a request packet of work request `i` its selective-repeat form: SEND and
    /// WRITE packets their SR opcode and placement, a READ its SR opcode, the start of its
    /// run of READs and the range it asks for, a resent packet AckReq.
    pub(crate) fn sr_shape(
        &self,
        p: &mut PacketRepr<'_>,
        i: usize,
        offset: u64,
        resume: Option<&Resume>,
    ) {
        let w = &self.sq[i];
        if resume.is_some() {
            p.bth.ack_req = true;
        }
        if let (Some(len), Some(reth)) = (resume.and_then(|r| r.read_len), p.reth.as_mut()) {
            reth.dma_len = len as u32;
        }
        let Some(op) = p.bth.opcode.selective() else {
            return;
        };
        let msg = if matches!(w.wr.op, SendOp::Read(_)) {
            self.sr_read_run(i).value()
        } else {
            let recv = self.sq.iter().take(i).filter(|w| w.consumes_recv()).count() as u32;
            self.sr.send.recv_done.wrapping_add(recv)
        };
        p.bth.opcode = op;
        p.sreth = Some(SrEthRepr {
            msg,
            offset: offset as u32,
        });
        if let SendOp::Write(r) | SendOp::WriteWithImm(r, _) = w.wr.op {
            p.reth = Some(RethRepr {
                va: r.addr,
                rkey: r.rkey,
                dma_len: w.len as u32,
            });
        }
    }
}
