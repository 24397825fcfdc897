//! The responder under selective repeat (`qp/sr`): SEND and WRITE packets placed as they
//! come within [`SPAN`] PSNs of the expected one, messages completed in PSN order once the
//! expected PSN passes their last packet, READ and atomic requests executed in order, and
//! acknowledgements that carry the PSNs held past the cumulative one. A READ whose
//! requester says that only READs come between the expected PSN and it is answered at
//! once, past the hole.
//!
//! A packet is checked for itself before it is placed: its SRETH offset against the path
//! MTU and its place in the message, a WRITE's RETH (rkey, bounds) for the whole message, a
//! SEND's message number against the receive queue. A refusal is answered with the NAK the
//! in-order responder gives (and the QP goes to ERROR) when the expected PSN reaches the
//! packet, so that the NAK's PSN still acknowledges everything before it. A packet past the
//! window gets one PSN sequence NAK per gap, as a gap does in order.

use rocex_mem::{Access, MemError};
use rocex_wire::opcode::{Operation, Position};
use rocex_wire::{OpcodeInfo, PacketRepr, Psn, Syndrome};

use super::{ACCESS, INVALID, LENGTH, Refusal, Reply, Stop, place};
use crate::Ctx;
use crate::qp::Qp;
use crate::qp::requester::packets;
use crate::qp::sr::{Deferred, EndKind, MsgEnd, SPAN, Slot};
use crate::verbs::{QpState, WcOpcode, WcStatus};

/// Why a SEND or WRITE packet is not placed.
enum Unplaced {
    /// Its receive WQE is not posted yet: RNR NAK if it is the expected PSN, else dropped
    /// (it comes again with the holes).
    NoRecv,
    Refused(Refusal),
}

impl From<Refusal> for Unplaced {
    fn from(r: Refusal) -> Self {
        Self::Refused(r)
    }
}

impl Qp {
    /// An RC request on a QP with selective repeat.
    pub(super) fn sr_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) {
        let psn = pkt.bth.psn;
        let d = psn.diff(self.resp.psn);
        let data = matches!(info.operation, Operation::Send | Operation::Write);
        if data && !pkt.opcode().is_selective() {
            // The peer does not speak selective repeat: refused, never placed in order by
            // rules the peer did not agree to (`docs/wire.md`, "Selective repeat").
            if d == 0 {
                return self.refuse(ctx, psn, INVALID);
            }
            ctx.counters.drop_out_of_seq += 1;
            return;
        }
        if d < 0 {
            ctx.counters.duplicate_request += 1;
            self.counters.duplicate_request += 1;
            // Answered, as in order: the requester may have missed the acknowledgement.
            if data {
                return self.sr_acknowledge(true);
            }
            self.duplicate(ctx, pkt, info);
            return self.sr_replay_first(psn);
        }
        if !data {
            return self.sr_in_order(ctx, pkt, info, d);
        }
        let d = d as u32;
        if d >= SPAN {
            return self.sequence_gap(ctx);
        }
        if !matches!(self.sr.resp.get(d), Slot::Missing) {
            ctx.counters.duplicate_request += 1;
            self.counters.duplicate_request += 1;
            return self.sr_acknowledge(true);
        }
        if d > 0 {
            ctx.counters.out_of_seq_request += 1;
        }
        let slot = match self.sr_place(ctx, pkt, info) {
            Ok(slot) => slot,
            Err(Unplaced::NoRecv) if d == 0 => {
                ctx.counters.send_rnr_err += 1;
                self.counters.send_rnr_err += 1;
                let timer = self.attr.min_rnr_timer;
                self.resp.queue_ack(psn, Syndrome::RnrNak { timer }, false);
                return;
            }
            Err(Unplaced::NoRecv) => {
                ctx.counters.drop_out_of_seq += 1;
                return self.sr_acknowledge(false);
            }
            Err(Unplaced::Refused(r)) => Slot::Refused {
                nak: r.nak,
                status: r.recv_status,
            },
        };
        self.sr.resp.set(d, slot);
        self.resp.sent_psn_nak = false;
        if self.sr_drain(ctx) {
            self.sr_acknowledge(pkt.bth.ack_req || d > 0);
        }
    }

    /// A READ asked again at `psn` for a range its requester lost goes out next, after
    /// the reply already going out, ahead of the responses of later READs queued before
    /// it: the requester's window waits for that range. Queued last, it waited for
    /// everything queued (up to a window of responses, a round trip at full rate). The
    /// requester takes responses in any order, and sees a response missing before one
    /// sent after its own request asked again, not before one of these (`docs/wire.md`).
    fn sr_replay_first(&mut self, psn: Psn) {
        let out = &mut self.resp.out;
        if out.len() > 2
            && matches!(out.back(), Some(Reply::Read(job)) if job.request == psn)
            && let Some(replay) = out.pop_back()
        {
            out.insert(1, replay);
        }
    }

    /// How many READ and atomic requests the responder keeps to answer again: the last
    /// `max_dest_rd_atomic`, as rxe keeps them, or under selective repeat one per PSN of
    /// its window, since a requester there counts a READ whose responses have all come
    /// out of its `max_rd_atomic` while an older one may still ask again for a lost
    /// range (`Qp::sr_answered`).
    pub(super) fn resources_kept(&self) -> usize {
        if self.sr.on {
            SPAN as usize
        } else {
            usize::from(self.attr.max_dest_rd_atomic)
        }
    }

    /// A selective-repeat packet on a QP without it: the peer assumes rules this QP did
    /// not agree to. Refused as an invalid request (NAK, QP to ERROR) when it is the
    /// expected PSN, so the sender's work request fails with REM_INV_REQ_ERR rather than
    /// its data being placed by guesswork; dropped before that.
    pub(super) fn sr_unexpected(&mut self, ctx: &mut Ctx<'_>, psn: Psn) {
        if psn == self.resp.psn {
            self.refuse(ctx, psn, INVALID);
        } else {
            ctx.counters.drop_out_of_seq += 1;
        }
    }

    /// A READ, atomic, ATOMIC_WRITE or FLUSH: executed when it is the expected PSN, as the
    /// in-order responder executes it; past a hole a READ whose hole holds only READs is
    /// answered at once, and the others are kept and executed when the hole fills (the
    /// SACK shows them held).
    fn sr_in_order(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>, info: &OpcodeInfo, d: i32) {
        if d > 0 {
            ctx.counters.out_of_seq_request += 1;
            let d = d as u32;
            let read = info.operation == Operation::ReadRequest;
            match self.sr.resp.get(d) {
                _ if d >= SPAN => ctx.counters.drop_out_of_seq += 1,
                Slot::Missing if read && self.sr_read_runs_from(pkt, d) => {
                    self.sr_read_early(ctx, pkt, info, d);
                }
                Slot::Missing => match Deferred::keep(pkt) {
                    Some(kept) => self.sr.resp.set(d, Slot::Deferred(kept)),
                    None => ctx.counters.drop_out_of_seq += 1,
                },
                // A range of a READ answered early, asked again.
                Slot::Answered | Slot::Got if read => {
                    ctx.counters.duplicate_request += 1;
                    self.counters.duplicate_request += 1;
                    self.duplicate(ctx, pkt, info);
                    return self.sr_replay_first(pkt.bth.psn);
                }
                _ => ctx.counters.drop_out_of_seq += 1,
            }
            return self.sr_acknowledge(true);
        }
        if self.sr_execute(ctx, pkt, info, false)
            && self.sr_drain(ctx)
            && self.sr.resp.holds_beyond()
        {
            self.sr_acknowledge(false);
        }
    }

    /// Whether READ request `pkt`, `d` PSNs past the expected one, may be answered now: it
    /// is in rocex's form, asks for its READ from the start (a range asked again, offset
    /// past 0, is part of a READ this responder may not have seen: answered as a READ of
    /// its own, its responses would not be shaped as the requester's READ expects them),
    /// every request before the expected PSN up to it is a READ (its run of READs starts
    /// at or before the expected PSN: the hole holds only READs, and answering it first
    /// reads what answering in order would), and its PSNs fit in the window, none of them
    /// held. A hole holding a WRITE keeps it for the hole, so that a READ after a WRITE
    /// still reads what the WRITE wrote.
    fn sr_read_runs_from(&self, pkt: &PacketRepr<'_>, d: u32) -> bool {
        let (Some(e), Some(reth)) = (pkt.sreth, pkt.reth) else {
            return false;
        };
        let npkts = packets(u64::from(reth.dma_len), self.mtu());
        pkt.opcode().is_selective()
            && e.offset == 0
            && !Psn::new(e.msg).is_after(self.resp.psn)
            && d + npkts <= SPAN
            && (d..d + npkts).all(|k| matches!(self.sr.resp.get(k), Slot::Missing))
    }

    /// Answers READ `pkt` past a hole of READs: checked as in order, its responses queued
    /// now, its PSNs marked held (the first [`Slot::Answered`], so that the MSN counts it
    /// when the expected PSN passes). A refusal waits for the expected PSN, as a refused
    /// WRITE packet does.
    fn sr_read_early(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
        d: u32,
    ) {
        let msn = self.resp.msn;
        let answered = self
            .check_access(pkt, info)
            .and_then(|()| self.check_rd_atomic(info))
            .and_then(|()| self.check_length(pkt, info))
            .and_then(|()| self.answer_read(ctx, pkt, msn));
        match answered {
            Ok(npkts) => {
                ctx.counters.sr_reads_early += 1;
                self.sr.resp.set(d, Slot::Answered);
                for k in 1..npkts {
                    self.sr.resp.set(d + k, Slot::Got);
                }
            }
            Err(r) => self.sr.resp.set(
                d,
                Slot::Refused {
                    nak: r.nak,
                    status: r.recv_status,
                },
            ),
        }
    }

    /// Executes a READ, atomic, ATOMIC_WRITE or FLUSH at the expected PSN, moving the
    /// window past the PSNs it takes (`popped`: its own slot is gone already); false when
    /// it ended the QP.
    fn sr_execute(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
        popped: bool,
    ) -> bool {
        let before = self.resp.psn;
        match self.rc_execute(ctx, pkt, info) {
            Ok(()) | Err(Stop::Answered) => {}
            Err(Stop::Refused(r)) => {
                self.refuse(ctx, before, r);
                return false;
            }
        }
        let moved = self.resp.psn.diff(before);
        if moved > 0 {
            self.sr.resp.skip(moved as u32 - u32::from(popped));
        }
        matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
    }

    /// Checks a SEND or WRITE packet and places its payload; the slot it fills.
    fn sr_place(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<Slot, Unplaced> {
        let e = pkt.sreth.ok_or(INVALID)?;
        self.check_access(pkt, info)?;
        let mtu = u64::from(self.mtu());
        let n = pkt.payload.len() as u64;
        let offset = u64::from(e.offset);
        let shape = match info.position {
            Position::First => offset == 0 && n == mtu,
            Position::Middle => n == mtu,
            Position::Last => n > 0 && n <= mtu,
            Position::Only => offset == 0 && n <= mtu,
        };
        if !shape || offset % mtu != 0 {
            return Err(INVALID.into());
        }
        let ends = info.position.ends();
        // The receive WQE of a SEND or WRITE with immediate, by its message number.
        let recv = if info.operation == Operation::Send || info.immediate {
            let k = e.msg.wrapping_sub(self.sr.resp.recv_base);
            if k >= SPAN {
                return Err(INVALID.into());
            }
            if k as usize >= self.rq.len() {
                return Err(Unplaced::NoRecv);
            }
            Some(k as usize)
        } else {
            None
        };
        let end = |kind, len| {
            Slot::End(MsgEnd {
                kind,
                len,
                imm: pkt.immdt.map(|i| i.data),
                inv: pkt.ieth.map(|i| i.rkey),
                solicited: pkt.bth.solicited,
            })
        };
        if info.operation == Operation::Send {
            let wr = &self.rq[recv.expect("a SEND has its receive")];
            place(ctx, self.pd, wr, offset, pkt.payload)?;
            return Ok(if ends {
                end(EndKind::Send, offset + n)
            } else {
                Slot::Got
            });
        }
        let reth = pkt.reth.ok_or(INVALID)?;
        let total = u64::from(reth.dma_len);
        if offset + n > total || (ends && offset + n != total) {
            return Err(INVALID.into());
        }
        let target = self.remote_rw(ctx, reth, Access::REMOTE_WRITE)?;
        target.write_at(offset, pkt.payload).map_err(|e| match e {
            MemError::Fault(_) => ACCESS,
            _ => LENGTH,
        })?;
        Ok(match (ends, info.immediate) {
            (false, _) => Slot::Got,
            (true, false) => end(EndKind::Write, total),
            (true, true) => end(EndKind::WriteImm, total),
        })
    }

    /// Moves the expected PSN over the packets held from it on, completing each message
    /// whose last packet it passes. False when a refusal ended the QP.
    fn sr_drain(&mut self, ctx: &mut Ctx<'_>) -> bool {
        while let Some(slot) = self.sr.resp.pop_ready() {
            let psn = self.resp.psn;
            self.resp.psn = psn.add(1);
            match slot {
                Slot::Missing | Slot::Got => {}
                Slot::Answered => self.resp.count_message(),
                Slot::Deferred(kept) => {
                    self.resp.psn = psn;
                    let pkt = kept.packet();
                    let info = pkt.bth.opcode.info().expect("kept after parsing");
                    if !self.sr_execute(ctx, &pkt, info, true) {
                        self.sr.resp.clear();
                        return false;
                    }
                }
                Slot::End(end) => {
                    if !self.sr_complete(ctx, psn, end) {
                        return false;
                    }
                }
                Slot::Refused { nak, status } => {
                    self.resp.psn = psn;
                    self.refuse(
                        ctx,
                        psn,
                        Refusal {
                            nak,
                            recv_status: status,
                        },
                    );
                    self.sr.resp.clear();
                    return false;
                }
            }
        }
        true
    }

    /// Completes a message whose packets have all arrived, in order; false when it ended
    /// the QP (an rkey that could not be invalidated, as in order: rxe `execute`).
    fn sr_complete(&mut self, ctx: &mut Ctx<'_>, psn: Psn, end: MsgEnd) -> bool {
        let opcode = match end.kind {
            EndKind::Write => {
                self.resp.count_message();
                return true;
            }
            EndKind::Send => WcOpcode::Recv,
            EndKind::WriteImm => WcOpcode::RecvRdmaWithImm,
        };
        let Some(wr) = self.rq.pop_front() else {
            // Placement checked the receive queue; only ERROR empties it.
            return false;
        };
        self.sr.resp.recv_base = self.sr.resp.recv_base.wrapping_add(1);
        let mut wc = self.recv_wc(wr.wr_id, opcode, end.len);
        wc.imm_data = end.imm;
        if let Some(rkey) = end.inv {
            if ctx.mem.invalidate(self.pd, rkey).is_err() {
                wc.status = WcStatus::RemInvReqErr;
                ctx.complete(self.recv_cq, wc, end.solicited);
                self.resp.queue_ack(psn, Syndrome::ACK, false);
                self.enter_error(ctx);
                self.sr.resp.clear();
                return false;
            }
            wc.invalidated_rkey = Some(rkey);
        }
        self.resp.count_message();
        if end.kind == EndKind::Send {
            ctx.counters.rdma_recvs += 1;
        }
        ctx.complete(self.recv_cq, wc, end.solicited);
        true
    }

    /// Acknowledges what the responder holds: with a SACK while anything past the
    /// expected PSN is held, else a plain ACK when `asked` (AckReq, or a packet past a
    /// hole). The acknowledgement's bitmap is taken when it is sent; one still queued last
    /// is brought up to date instead of queueing another.
    pub(super) fn sr_acknowledge(&mut self, asked: bool) {
        if !asked && !self.sr.resp.holds_beyond() {
            return;
        }
        let cumulative = self.resp.psn.sub(1);
        let msn = self.resp.msn;
        if let Some(Reply::Sack { psn, msn: m }) = self.resp.out.back_mut() {
            (*psn, *m) = (cumulative, msn);
            return;
        }
        self.resp.out.push_back(Reply::Sack {
            psn: cumulative,
            msn,
        });
    }
}
