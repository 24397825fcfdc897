//! The responder: requests to execution, acknowledgements and READ responses (IBTA §9.7.4
//! and §9.7.5.1; rxe `rxe_resp.c`), with rxe's choices where the spec leaves room:
//!
//! * an ACK only for a request with AckReq set, carrying that request's PSN and the MSN;
//! * one PSN-sequence NAK per gap, then silence until the expected PSN comes;
//! * a duplicate SEND or WRITE is answered with an ACK of the last PSN accepted;
//! * a duplicate READ is replayed from the PSN it asks for, from a ring of
//!   `max_dest_rd_atomic` saved requests; a duplicate atomic gets its saved original value
//!   and is never executed twice;
//! * invalid request, remote access and remote operational errors are NAKed with the
//!   request's PSN, and move the QP to ERROR (class C errors, §9.9.3.1.2).
//!
//! UC drops instead of NAKing and resynchronizes at the next first packet; UD takes single
//! packet SENDs whose Q_Key matches.
//!
//! `docs/rxe-behaviour.md` lists these rules, and the rest this module follows, with the rxe
//! function that decides each.
//!
//! rxe's `rxe_responder` is a loop over the states of `enum resp_states`; here they are:
//!
//! | rxe (`rxe_resp.c`) | rocex |
//! |---|---|
//! | `RESPST_GET_REQ` (`get_req`) | the engine hands each request to `Qp::handle_request`, which drops it unless the QP is in RTR, RTS or SQD |
//! | `RESPST_CHK_PSN` (`check_psn`) | `rc_request`: the PSN against `resp.psn`; UC: `uc_request` (`uc.rs`) |
//! | `RESPST_ERR_PSN_OUT_OF_SEQ` (one NAK per gap, `sent_psn_nak`) | `rc_request`: `sent_psn_nak` and a PSN-sequence NAK |
//! | `RESPST_DUPLICATE_REQUEST` (`duplicate_request`, `find_resource`) | `duplicate` (`duplicate.rs`) |
//! | `RESPST_CHK_OP_SEQ` (`check_op_seq`) | `check_sequence` (`check.rs`) |
//! | `RESPST_CHK_OP_VALID` (`check_op_valid`, `check_qp_attr_access`) | `check_access` (`check.rs`) |
//! | `RESPST_CHK_RESOURCE` (`check_resource`) and `RESPST_ERR_RNR` | `rc_execute`: no `max_dest_rd_atomic` for a READ or atomic; no receive WQE: an RNR NAK |
//! | `RESPST_CHK_LENGTH` (`rxe_resp_check_length`) | `check_length` (`check.rs`) |
//! | `RESPST_CHK_RKEY` (`check_rkey`) | `remote`, `remote_rw` and `MemTable::check_rkey_whole`, from the `exec_*` of requests with an rkey |
//! | `RESPST_EXECUTE` (`execute`, `send_data_in`, `write_data_in`) | `rc_execute`: `exec_send` (through `place`), `exec_write`, `exec_read` |
//! | `RESPST_READ_REPLY` (`read_reply`) | `exec_read` queues a `ReadJob`; `next_reply` (`reply.rs`) builds each response; `read_fault` |
//! | `RESPST_ATOMIC_REPLY` (`atomic_reply`) | `exec_atomic`, `executed_once` |
//! | `RESPST_ATOMIC_WRITE_REPLY`, `RESPST_PROCESS_FLUSH` | `exec_atomic_write_or_flush`, answered by `queue_empty_read_response` (`send_read_response_ack`) |
//! | `RESPST_COMPLETE` (`do_complete`: the receive completion, the MSN) | the end of `exec_send` and `exec_write` |
//! | `RESPST_ACKNOWLEDGE` (`acknowledge`, `send_ack`) | `queue_ack` when AckReq is set; `next_reply` sends the queue in order |
//! | `RESPST_CLEANUP` | nothing to free: the packet is the caller's |
//! | `RESPST_ERR_MISSING_OPCODE_FIRST`, `_LAST_C`, `RESPST_ERR_UNSUPPORTED_OPCODE`, `RESPST_ERR_MISALIGNED_ATOMIC`, `RESPST_ERR_TOO_MANY_RDMA_ATM_REQ`, `RESPST_ERR_LENGTH` (class C: `do_class_ac_error`, NAK 0x61) | a `Refusal` (`INVALID`, `LENGTH`) to `refuse` |
//! | `RESPST_ERR_RKEY_VIOLATION` (NAK 0x62) | `ACCESS` to `refuse` |
//! | `RESPST_ERR_MALFORMED_WQE` (NAK 0x63) | `MALFORMED_WQE` to `refuse` |
//! | `RESPST_ERR_INVALIDATE_RKEY` | `exec_send`: `Stop::Answered` (an ACK, the receive in error, the QP to ERROR) |
//! | `RESPST_ERR_MISSING_OPCODE_LAST_D1E` (UC: drop the message) | `uc_request`: `uc_resync` |
//! | `RESPST_ERR_CQ_OVERFLOW` | `Ctx::complete` raises `Event::CqOverrun` |
//! | `RESPST_ERROR` (`rxe_qp_error`) | `Qp::enter_error` |
//!
//! Selective repeat (rocex's own) has no rxe counterpart: `selective.rs` places its packets in
//! any order and answers with SACKs.

use core::net::IpAddr;
use std::collections::VecDeque;

use rocex_mem::{Access, MemError, Target};
use rocex_wire::opcode::Operation;
use rocex_wire::{NakCode, OpcodeInfo, PacketRepr, Psn, RethRepr, Syndrome};

use super::Qp;
use super::requester::packets;
use crate::Ctx;
use crate::verbs::{QpState, QpType, RecvWr, WcOpcode, WcStatus, WorkCompletion, flush_access};

mod check;
mod duplicate;
mod reply;
mod selective;
mod uc;
mod ud;

/// The MSN's bits in the AETH.
const MSN_MASK: u32 = 0x00ff_ffff;

/// What the responder has to send.
#[derive(Debug)]
enum Reply {
    /// ACK, RNR NAK or NAK.
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    /// Atomic acknowledge with the original value.
    AtomicAck { psn: Psn, msn: u32, orig: u64 },
    /// Selective repeat's cumulative acknowledgement of `psn`, with the bitmap of what is
    /// held past it when it is sent (a plain ACK if nothing is).
    Sack { psn: Psn, msn: u32 },
    /// READ responses, from packet `next` of a READ of `npkts` packets.
    Read(ReadJob),
}

#[derive(Debug)]
struct ReadJob {
    /// PSN of the request being answered (the READ, or the duplicate that replays it).
    request: Psn,
    /// PSN of the READ's first response packet.
    first: Psn,
    npkts: u32,
    next: u32,
    /// The packet to stop before: `npkts`, or less for a selective-repeat requester's
    /// request for a missing range.
    end: u32,
    /// The bytes read, from the READ's first byte.
    target: Target,
    msn: u32,
}

/// A saved READ or atomic, for answering its duplicates.
#[derive(Debug, Clone)]
struct Resource {
    first: Psn,
    npkts: u32,
    kind: ResourceKind,
}

#[derive(Debug, Clone)]
enum ResourceKind {
    /// The READ's RETH.
    Read(RethRepr),
    Atomic {
        orig: u64,
    },
    /// ATOMIC_WRITE and FLUSH, answered by an empty READ response.
    Empty,
}

/// A SEND or WRITE message being received.
#[derive(Debug)]
enum InMsg {
    Send {
        wr: RecvWr,
        offset: u64,
    },
    Write {
        target: Target,
        offset: u64,
        recv: Option<RecvWr>,
    },
}

/// Responder state of a QP.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// The expected PSN.
    pub(crate) psn: Psn,
    /// Messages completed (24 bits on the wire).
    pub(crate) msn: u32,
    sent_psn_nak: bool,
    msg: Option<InMsg>,
    resources: VecDeque<Resource>,
    out: VecDeque<Reply>,
    /// The ACK at the front of `out` has already let one request packet go first.
    ack_waited: bool,
    /// UC: a packet was lost; drop until the next first packet.
    uc_resync: bool,
}

impl Responder {
    pub(crate) fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether a SEND or WRITE message is partly received: its first packet in, its last
    /// not yet.
    pub(crate) fn receiving(&self) -> bool {
        self.msg.is_some()
    }

    /// Drops the message in progress (the QP is going to ERROR); returns its receive WQE.
    pub(crate) fn clear_in_progress(&mut self) {
        if let Some(InMsg::Write { recv: None, .. }) = &self.msg {
            self.msg = None;
        }
    }

    /// Takes the receive WQE of the message in progress, if any.
    pub(crate) fn take_recv(&mut self) -> Option<RecvWr> {
        match self.msg.take() {
            Some(InMsg::Send { wr, .. }) | Some(InMsg::Write { recv: Some(wr), .. }) => Some(wr),
            _ => None,
        }
    }

    /// Queues an acknowledgement. With `coalesce`, a positive ACK behind a positive ACK for
    /// an earlier PSN replaces it: ACKs are cumulative, so the later one covers both (the
    /// IBA lets a responder coalesce acknowledgements; rxe sends each, which is the default).
    fn queue_ack(&mut self, psn: Psn, syndrome: Syndrome, coalesce: bool) {
        if let (
            Syndrome::Ack { .. },
            Some(Reply::Ack {
                psn: p,
                syndrome: s,
                msn,
            }),
        ) = (syndrome, self.out.back_mut())
            && coalesce
            && matches!(s, Syndrome::Ack { .. })
            && psn.is_after(*p)
        {
            (*p, *s, *msn) = (psn, syndrome, self.msn);
            return;
        }
        self.out.push_back(Reply::Ack {
            psn,
            syndrome,
            msn: self.msn,
        });
    }

    /// Whether a request packet (one is `request_ready`) may go before the next reply: it
    /// is a positive ACK that has not yet waited. An ACK waits for one packet at most, so
    /// a stream of requests cannot hold it back.
    pub(crate) fn ack_can_wait(&mut self, request_ready: bool) -> bool {
        let positive = matches!(
            self.out.front(),
            Some(Reply::Ack {
                syndrome: Syndrome::Ack { .. },
                ..
            })
        );
        self.ack_waited = positive && request_ready && !self.ack_waited;
        self.ack_waited
    }

    /// Counts a message completed: the MSN goes on, modulo its 24 bits on the wire.
    fn count_message(&mut self) {
        self.msn = (self.msn + 1) & MSN_MASK;
    }

    fn save(&mut self, limit: usize, r: Resource) {
        while self.resources.len() >= limit.max(1) {
            self.resources.pop_front();
        }
        self.resources.push_back(r);
    }
}

/// Why a request is refused, with the NAK it gets (RC) and the receive status (if a
/// receive WQE is involved).
#[derive(Debug, Clone, Copy)]
struct Refusal {
    nak: NakCode,
    recv_status: WcStatus,
}

const INVALID: Refusal = Refusal {
    nak: NakCode::InvalidRequest,
    recv_status: WcStatus::RemInvReqErr,
};
const ACCESS: Refusal = Refusal {
    nak: NakCode::RemoteAccessError,
    recv_status: WcStatus::RemAccessErr,
};
const LENGTH: Refusal = Refusal {
    nak: NakCode::InvalidRequest,
    recv_status: WcStatus::LocLenErr,
};
const MALFORMED_WQE: Refusal = Refusal {
    nak: NakCode::RemoteOperationalError,
    recv_status: WcStatus::LocQpOpErr,
};

/// How an in-sequence RC request that was not simply executed ends.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Refused: NAKed with its PSN, the receive in progress completed in error, the QP
    /// to ERROR ([`Qp::refuse`]).
    Refused(Refusal),
    /// Answered already, and the QP already in ERROR: rxe acknowledges a SEND_WITH_INV
    /// whose rkey it cannot invalidate with an ACK, not a NAK (rxe `execute`).
    Answered,
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Self::Refused(r)
    }
}

impl Qp {
    /// Handles a request packet from `src` to `dst`.
    pub(crate) fn handle_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        src: IpAddr,
        dst: IpAddr,
    ) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            ctx.counters.drop_qp_state += 1;
            return;
        }
        let info = pkt
            .bth
            .opcode
            .info()
            .expect("parsed opcodes are in the table");
        match self.qp_type {
            QpType::Rc => self.rc_request(ctx, pkt, info),
            QpType::Uc => self.uc_request(ctx, pkt, info),
            QpType::Ud => self.ud_request(ctx, pkt, src, dst),
        }
    }

    /// A request past the expected PSN: one PSN sequence NAK with the expected PSN per gap,
    /// the rest of the gap's packets dropped (rxe `check_psn`, `sent_psn_nak`).
    fn sequence_gap(&mut self, ctx: &mut Ctx<'_>) {
        ctx.counters.out_of_seq_request += 1;
        if self.resp.sent_psn_nak {
            ctx.counters.drop_out_of_seq += 1;
            return;
        }
        self.resp.sent_psn_nak = true;
        ctx.counters.nak_psn_sequence += 1;
        self.counters.nak_psn_sequence += 1;
        let expected = self.resp.psn;
        self.resp
            .queue_ack(expected, Syndrome::Nak(NakCode::PsnSequenceError), false);
    }

    fn rc_request(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>, info: &OpcodeInfo) {
        let psn = pkt.bth.psn;
        if self.sr.on {
            return self.sr_request(ctx, pkt, info);
        }
        if pkt.opcode().is_selective() {
            return self.sr_unexpected(ctx, psn);
        }
        let d = psn.diff(self.resp.psn);
        if d > 0 {
            return self.sequence_gap(ctx);
        }
        if d < 0 {
            ctx.counters.duplicate_request += 1;
            self.counters.duplicate_request += 1;
            return self.duplicate(ctx, pkt, info);
        }
        self.resp.sent_psn_nak = false;
        match self.rc_execute(ctx, pkt, info) {
            Ok(()) | Err(Stop::Answered) => {}
            Err(Stop::Refused(r)) => self.refuse(ctx, psn, r),
        }
    }

    /// Checks and executes an in-sequence RC request; `Err` says how it ends instead.
    fn rc_execute(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Stop> {
        let psn = pkt.bth.psn;
        self.check_sequence(info)?;
        self.check_access(pkt, info)?;
        self.check_rd_atomic(info)?;
        // A message that needs a receive WQE waits for one: RNR NAK (C9-146).
        let needs_recv = match info.operation {
            Operation::Send => info.position.starts(),
            Operation::Write => info.immediate,
            _ => false,
        };
        if needs_recv && self.rq.is_empty() && !matches!(self.resp.msg, Some(InMsg::Send { .. })) {
            ctx.counters.send_rnr_err += 1;
            self.counters.send_rnr_err += 1;
            let timer = self.attr.min_rnr_timer;
            self.resp.queue_ack(psn, Syndrome::RnrNak { timer }, false);
            return Ok(());
        }
        self.check_length(pkt, info)?;
        match info.operation {
            Operation::Send => self.exec_send(ctx, pkt, info)?,
            Operation::Write => self.exec_write(ctx, pkt, info)?,
            Operation::ReadRequest => return Ok(self.exec_read(ctx, pkt)?),
            Operation::CompareSwap | Operation::FetchAdd => {
                return Ok(self.exec_atomic(ctx, pkt, info)?);
            }
            Operation::AtomicWrite | Operation::Flush => {
                return Ok(self.exec_atomic_write_or_flush(ctx, pkt, info)?);
            }
            _ => return Err(INVALID.into()),
        }
        self.resp.psn = psn.add(1);
        if pkt.bth.ack_req {
            self.resp.queue_ack(psn, Syndrome::ACK, ctx.coalesce_acks);
        }
        Ok(())
    }

    fn exec_send(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Stop> {
        if info.position.starts() {
            let wr = self.rq.pop_front().expect("checked before");
            self.resp.msg = Some(InMsg::Send { wr, offset: 0 });
        }
        let Some(InMsg::Send { wr, offset }) = &mut self.resp.msg else {
            return Err(INVALID.into());
        };
        place(ctx, self.pd, wr, *offset, pkt.payload)?;
        *offset += pkt.payload.len() as u64;
        if !info.position.ends() {
            return Ok(());
        }
        let Some(InMsg::Send { wr, offset }) = self.resp.msg.take() else {
            unreachable!()
        };
        let mut wc = self.recv_wc(wr.wr_id, WcOpcode::Recv, offset);
        wc.imm_data = pkt.immdt.map(|i| i.data);
        if let Some(ieth) = pkt.ieth {
            if ctx.mem.invalidate(self.pd, ieth.rkey).is_err() {
                // rxe: the message is acknowledged without advancing the MSN, the receive
                // completes in error and the QP moves to ERROR.
                wc.status = WcStatus::RemInvReqErr;
                ctx.complete(self.recv_cq, wc, pkt.bth.solicited);
                self.resp.psn = pkt.bth.psn.add(1);
                if pkt.bth.ack_req {
                    self.resp
                        .queue_ack(pkt.bth.psn, Syndrome::ACK, ctx.coalesce_acks);
                }
                self.enter_error(ctx);
                return Err(Stop::Answered);
            }
            wc.invalidated_rkey = Some(ieth.rkey);
        }
        self.resp.count_message();
        ctx.counters.rdma_recvs += 1;
        ctx.complete(self.recv_cq, wc, pkt.bth.solicited);
        Ok(())
    }

    fn exec_write(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Refusal> {
        if let Some(reth) = pkt.reth {
            let target = self.remote_rw(ctx, reth, Access::REMOTE_WRITE)?;
            self.resp.msg = Some(InMsg::Write {
                target,
                offset: 0,
                recv: None,
            });
        }
        let Some(InMsg::Write { target, offset, .. }) = &mut self.resp.msg else {
            return Err(INVALID);
        };
        target.write_at(*offset, pkt.payload).map_err(|e| match e {
            // The region's memory is gone (another process's pages): an access error.
            MemError::Fault(_) => ACCESS,
            _ => LENGTH,
        })?;
        *offset += pkt.payload.len() as u64;
        if !info.position.ends() {
            return Ok(());
        }
        let Some(InMsg::Write { target, offset, .. }) = self.resp.msg.take() else {
            unreachable!()
        };
        if offset != target.len() {
            return Err(INVALID);
        }
        self.resp.count_message();
        if let Some(imm) = pkt.immdt {
            let wr = self.rq.pop_front().expect("checked before");
            let mut wc = self.recv_wc(wr.wr_id, WcOpcode::RecvRdmaWithImm, offset);
            wc.imm_data = Some(imm.data);
            ctx.complete(self.recv_cq, wc, pkt.bth.solicited);
        }
        Ok(())
    }

    fn exec_read(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>) -> Result<(), Refusal> {
        let npkts = self.answer_read(ctx, pkt, (self.resp.msn + 1) & MSN_MASK)?;
        self.resp.count_message();
        self.resp.psn = pkt.bth.psn.add(npkts);
        Ok(())
    }

    /// Checks a READ's target, keeps it to answer again and queues its responses, their
    /// AETHs carrying `msn`; the PSNs it takes.
    fn answer_read(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        msn: u32,
    ) -> Result<u32, Refusal> {
        let reth = pkt.reth.ok_or(INVALID)?;
        let target = self.remote_rw(ctx, reth, Access::REMOTE_READ)?;
        // Memory that can vanish (another process's pages) is probed at both ends now, so
        // a READ of memory already gone is refused rather than answered later with zeros.
        if let Some(last) = target.len().checked_sub(1) {
            let mut byte = [0u8; 1];
            target
                .read_at(0, &mut byte)
                .and_then(|()| target.read_at(last, &mut byte))
                .map_err(|_| ACCESS)?;
        }
        let psn = pkt.bth.psn;
        let npkts = packets(u64::from(reth.dma_len), self.mtu());
        let kind = ResourceKind::Read(reth);
        self.resp.save(
            self.resources_kept(),
            Resource {
                first: psn,
                npkts,
                kind,
            },
        );
        self.resp.out.push_back(Reply::Read(ReadJob {
            request: psn,
            first: psn,
            npkts,
            next: 0,
            end: npkts,
            target,
            msn,
        }));
        Ok(npkts)
    }

    fn exec_atomic(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Refusal> {
        let a = pkt.atomic_eth.ok_or(INVALID)?;
        if a.va % 8 != 0 {
            return Err(INVALID);
        }
        let target = self.remote(ctx, a.rkey, a.va, 8, Access::REMOTE_ATOMIC)?;
        let orig = if info.operation == Operation::CompareSwap {
            target.compare_swap(0, a.compare, a.swap_add)
        } else {
            target.fetch_add(0, a.swap_add)
        }
        .map_err(|_| ACCESS)?;
        let psn = pkt.bth.psn;
        self.executed_once(psn, ResourceKind::Atomic { orig });
        self.resp.out.push_back(Reply::AtomicAck {
            psn,
            msn: self.resp.msn,
            orig,
        });
        Ok(())
    }

    /// ATOMIC_WRITE and FLUSH: executed, saved, answered by an empty READ response.
    fn exec_atomic_write_or_flush(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) -> Result<(), Refusal> {
        let reth = pkt.reth.ok_or(INVALID)?;
        if info.operation == Operation::AtomicWrite {
            let value: [u8; 8] = pkt.payload.try_into().map_err(|_| INVALID)?;
            if reth.va % 8 != 0 || reth.dma_len != 8 {
                return Err(INVALID);
            }
            let target = self.remote(ctx, reth.rkey, reth.va, 8, Access::REMOTE_WRITE)?;
            target
                .atomic_write(0, u64::from_ne_bytes(value))
                .map_err(|_| ACCESS)?;
        } else {
            use rocex_wire::feth::{PLT_PERSISTENCE, SEL_MEMORY_REGION};
            let feth = pkt.feth.ok_or(INVALID)?;
            let persistent = feth.placement & PLT_PERSISTENCE != 0;
            // rxe `check_rkey`: the rights are those of every placement type asked for.
            let need = flush_access(feth.placement);
            // The whole region: the key and its rights are checked all the same, only the
            // range is not (rxe `check_rkey`, `process_flush`).
            let target = if feth.selectivity == SEL_MEMORY_REGION {
                ctx.mem
                    .check_rkey_whole(self.pd, reth.rkey, need)
                    .map_err(|_| ACCESS)?
            } else {
                self.remote(ctx, reth.rkey, reth.va, u64::from(reth.dma_len), need)?
            };
            target.flush(persistent).map_err(|_| ACCESS)?;
        }
        let psn = pkt.bth.psn;
        self.executed_once(psn, ResourceKind::Empty);
        self.queue_empty_read_response(psn);
        Ok(())
    }

    /// After a one-packet request that must never run twice (an atomic, ATOMIC_WRITE,
    /// FLUSH): its result saved for duplicates, the message counted, the PSN passed.
    fn executed_once(&mut self, psn: Psn, kind: ResourceKind) {
        self.resp.save(
            self.resources_kept(),
            Resource {
                first: psn,
                npkts: 1,
                kind,
            },
        );
        self.resp.count_message();
        self.resp.psn = psn.add(1);
    }

    /// Refuses an RC request: NAK with its PSN, the receive in progress completed in
    /// error, the QP to ERROR.
    fn refuse(&mut self, ctx: &mut Ctx<'_>, psn: Psn, r: Refusal) {
        match r.nak {
            NakCode::InvalidRequest => ctx.counters.nak_invalid_request += 1,
            NakCode::RemoteAccessError => ctx.counters.nak_remote_access += 1,
            _ => ctx.counters.nak_remote_operation += 1,
        }
        self.resp.queue_ack(psn, Syndrome::Nak(r.nak), false);
        if let Some(wr) = self.resp.take_recv() {
            let mut wc = self.recv_wc(wr.wr_id, WcOpcode::Recv, 0);
            wc.status = r.recv_status;
            ctx.complete(self.recv_cq, wc, false);
        }
        self.enter_error(ctx);
    }

    /// The remote range a request names, checked against its rkey: a remote access error
    /// (NAK 0x62) if it does not check out.
    fn remote(
        &self,
        ctx: &Ctx<'_>,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<Target, Refusal> {
        ctx.mem
            .check_rkey(self.pd, rkey, va, len, need)
            .map_err(|_| ACCESS)
    }

    /// The range a READ or WRITE's RETH names: none for a zero-byte one, which needs no
    /// valid rkey (IBTA C9-88, rxe `check_rkey`), else checked as [`Qp::remote`] does.
    fn remote_rw(&self, ctx: &Ctx<'_>, reth: RethRepr, need: Access) -> Result<Target, Refusal> {
        if reth.dma_len == 0 {
            return Ok(Target::default());
        }
        self.remote(ctx, reth.rkey, reth.va, u64::from(reth.dma_len), need)
    }

    fn recv_wc(&self, wr_id: u64, opcode: WcOpcode, byte_len: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            status: WcStatus::Success,
            opcode,
            byte_len: byte_len as u32,
            imm_data: None,
            invalidated_rkey: None,
            qp_num: self.qpn,
            src_qp: self.attr.dest_qp_num,
        }
    }
}

/// Copies `bytes` into a receive WQE's buffers at `offset`.
fn place(
    ctx: &mut Ctx<'_>,
    pd: rocex_mem::PdId,
    wr: &RecvWr,
    offset: u64,
    bytes: &[u8],
) -> Result<(), Refusal> {
    super::sge::walk(
        ctx.mem,
        pd,
        &wr.sges,
        offset,
        bytes.len(),
        Access::LOCAL_WRITE,
        |t, r| t.write_at(0, &bytes[r]),
    )
    .map_err(|e| match e {
        super::sge::SgeError::Key => MALFORMED_WQE,
        super::sge::SgeError::Short => LENGTH,
    })
}
