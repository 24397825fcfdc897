//! The requester: send work requests to request packets (IBTA §9.7; rxe `rxe_req.c`).
//!
//! Messages are cut at the path MTU; every packet takes the next PSN, a READ takes one PSN
//! per response packet it asks for. AckReq is set on the last packet of a message and at
//! least every [`MAX_PKT_PER_ACK`] packets; at most a window of PSNs is in flight (rxe's
//! [`MAX_UNACKED_PSNS`](super::MAX_UNACKED_PSNS), or up to `Config::window` on a clean
//! path: `window.rs`), and at most `max_rd_atomic` READ and atomic requests.
//!
//! rxe's `rxe_requester` runs its steps in one pass per packet; here they are:
//!
//! | rxe (`rxe_req.c`) | rocex |
//! |---|---|
//! | `req_next_wqe`, the QP-state checks | `Qp::requester_ready`: RTS, a WQE at `req.next` |
//! | `wait_for_rnr_timer` (cleared by `rnr_nak_timer`) | `requester_ready`: `comp.rnr_until`, cleared in `Qp::handle_timer` |
//! | `wait_psn`: `req.psn` past `comp.psn + RXE_MAX_UNACKED_PSNS` | `requester_ready`: `Qp::window` |
//! | `rxe_wqe_is_fenced` (a fenced WQE waits for READs and atomics) | `requester_ready`: `fence` while `rd_atomic_outstanding` |
//! | `check_init_depth` (`max_rd_atomic`) | `requester_ready`: `rd_atomic_outstanding` against `max_rd_atomic` |
//! | `need_retry`, `req_retry` (back to `comp.psn`) | `Qp::resend_from` (the completer's): `Qp::go_back` points `req.next` and `req.offset` at the first PSN to resend |
//! | `next_opcode`, `next_opcode_rc`, `next_opcode_uc` | `opcode`, by operation and `Position` |
//! | `get_mtu` (path MTU; the port's for UD) | `Qp::mtu`; `ctx.port_mtu` for UD in `Qp::next_request` |
//! | `init_req_packet` (headers; AckReq at a message's end or past `RXE_MAX_PKT_PER_ACK`) | `build`; the `noack_pkts` count in `next_request` |
//! | `finish_packet` (`copy_data` from the SGEs) | `gather`, straight into the packet |
//! | `update_wqe_psn` (a READ takes a PSN per response) | `next_request`: `first_psn`, `npkts`, `req.psn` |
//! | `update_wqe_state`, `update_state` (next WQE, retransmit timer started) | `next_request`: `req.next`, `req.offset`; `Qp::request_sent` starts the timer |
//! | UC and UD: a WQE done once its last packet is out | `next_request`: `complete_head` |
//! | a failed `copy_data` (`wqe->status`, QP to error) | `Qp::fail_from` |
//! | `rxe_xmit_packet` | the engine's `poll_transmit` sends what `next_request` wrote |
//!
//! Selective repeat (rocex's own, between two rocex engines that both enable it) has no rxe
//! counterpart: `sr_begin_resend`, `sr_shape` and `sr_end_resend` (`completer/selective.rs`).

use core::net::IpAddr;

use rocex_mem::Access;
use rocex_wire::opcode::Position;
use rocex_wire::{
    AtomicEthRepr, BthRepr, DethRepr, FethRepr, IethRepr, ImmDtRepr, Opcode, PacketRepr, Psn,
    RethRepr,
};

use super::{MAX_PKT_PER_ACK, Qp, SendWqe};
use crate::time::Instant;
use crate::verbs::{QpState, QpType, SendData, SendOp, WcStatus};
use crate::{Ctx, Outgoing};

/// Requester state of a QP.
#[derive(Debug, Default)]
pub(crate) struct Requester {
    /// PSN of the next packet.
    pub(crate) psn: Psn,
    /// One past the highest PSN ever sent: PSNs before it and from `psn` on are resent.
    pub(crate) high_psn: Psn,
    /// Index in the send queue of the request being sent.
    pub(crate) next: usize,
    /// Bytes of that request already sent (READ: already received).
    pub(crate) offset: u64,
    noack_pkts: u32,
    scratch: Vec<u8>,
    /// The post time of the sampled request whose first packet was built last.
    pub(crate) sampled: Option<Instant>,
}

/// Packets a message spans at `mtu`: at least one.
pub(crate) fn packets(len: u64, mtu: u32) -> u32 {
    len.div_ceil(u64::from(mtu)).max(1) as u32
}

fn opcode(qp_type: QpType, op: &SendOp, pos: Position) -> Opcode {
    use Position::*;
    let uc = qp_type == QpType::Uc;
    let pick = |rc: [Opcode; 4], ucs: [Opcode; 4]| {
        let t = if uc { ucs } else { rc };
        match pos {
            First => t[0],
            Middle => t[1],
            Last => t[2],
            Only => t[3],
        }
    };
    match op {
        SendOp::Send => pick(
            [
                Opcode::RC_SEND_FIRST,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_LAST,
                Opcode::RC_SEND_ONLY,
            ],
            [
                Opcode::UC_SEND_FIRST,
                Opcode::UC_SEND_MIDDLE,
                Opcode::UC_SEND_LAST,
                Opcode::UC_SEND_ONLY,
            ],
        ),
        SendOp::SendWithImm(_) => pick(
            [
                Opcode::RC_SEND_FIRST,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
                Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
            ],
            [
                Opcode::UC_SEND_FIRST,
                Opcode::UC_SEND_MIDDLE,
                Opcode::UC_SEND_LAST_WITH_IMMEDIATE,
                Opcode::UC_SEND_ONLY_WITH_IMMEDIATE,
            ],
        ),
        SendOp::SendWithInv(_) => pick(
            [
                Opcode::RC_SEND_FIRST,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_LAST_WITH_INVALIDATE,
                Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
            ],
            [
                Opcode::UC_SEND_FIRST,
                Opcode::UC_SEND_MIDDLE,
                Opcode::UC_SEND_LAST,
                Opcode::UC_SEND_ONLY,
            ],
        ),
        SendOp::Write(_) => pick(
            [
                Opcode::RC_RDMA_WRITE_FIRST,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_LAST,
                Opcode::RC_RDMA_WRITE_ONLY,
            ],
            [
                Opcode::UC_RDMA_WRITE_FIRST,
                Opcode::UC_RDMA_WRITE_MIDDLE,
                Opcode::UC_RDMA_WRITE_LAST,
                Opcode::UC_RDMA_WRITE_ONLY,
            ],
        ),
        SendOp::WriteWithImm(..) => pick(
            [
                Opcode::RC_RDMA_WRITE_FIRST,
                Opcode::RC_RDMA_WRITE_MIDDLE,
                Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            ],
            [
                Opcode::UC_RDMA_WRITE_FIRST,
                Opcode::UC_RDMA_WRITE_MIDDLE,
                Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
                Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            ],
        ),
        SendOp::Read(_) => Opcode::RC_RDMA_READ_REQUEST,
        SendOp::CompareSwap { .. } => Opcode::RC_COMPARE_SWAP,
        SendOp::FetchAdd { .. } => Opcode::RC_FETCH_ADD,
        SendOp::AtomicWrite { .. } => Opcode::RC_ATOMIC_WRITE,
        SendOp::Flush { .. } => Opcode::RC_FLUSH,
    }
}

impl Qp {
    /// Whether at least `n` READ and atomic requests are sent and not yet answered. Under
    /// selective repeat, one whose responses have all come no longer counts though it
    /// waits to complete in order (`Qp::sr_answered`). It stops at the `n`th: the requester
    /// asks before each request, behind up to `max_rd_atomic` of them.
    fn rd_atomic_outstanding(&self, n: usize) -> bool {
        n == 0
            || self
                .sq
                .iter()
                .take(self.req.next)
                .filter(|w| w.is_rd_atomic() && !(self.sr.on && self.sr_answered(w)))
                .nth(n - 1)
                .is_some()
    }

    /// Whether the requester can send a packet now.
    pub(crate) fn requester_ready(&self) -> bool {
        if self.state != QpState::Rts
            || self.comp.rnr_until.is_some()
            || self.rate.paced_until.is_some()
        {
            return false;
        }
        if self.sr_resend_pending() {
            return true;
        }
        let Some(wqe) = self.sq.get(self.req.next) else {
            return false;
        };
        if self.qp_type != QpType::Rc {
            return true;
        }
        if self.sr.on {
            if !self.sr_window_open() {
                return false;
            }
        } else if !self.window.open(self.req.psn, self.comp.psn) {
            return false;
        }
        if self.req.offset == 0 {
            if wqe.is_rd_atomic()
                && self.rd_atomic_outstanding(usize::from(self.attr.max_rd_atomic))
            {
                return false;
            }
            if wqe.wr.flags.fence && self.rd_atomic_outstanding(1) {
                return false;
            }
        }
        true
    }

    /// Writes the next request packet (BTH to ICRC, the ICRC left to the caller) into `buf`.
    pub(crate) fn next_request(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<Outgoing> {
        // Selective repeat: a resend first, then back to the frontier (`qp/sr`).
        let resume = self.sr_begin_resend();
        if resume.is_none() && !self.requester_ready() {
            return None;
        }
        let mtu = if self.qp_type == QpType::Ud {
            ctx.port_mtu
        } else {
            self.mtu()
        };
        let i = self.req.next;
        let psn = self.req.psn;
        let (qp_type, qpn) = (self.qp_type, self.qpn);
        let wqe = &mut self.sq[i];
        if !wqe.started {
            wqe.started = true;
            self.req.sampled = wqe.posted_at.take();
            wqe.first_psn = psn;
            wqe.npkts = match wqe.wr.op {
                SendOp::CompareSwap { .. }
                | SendOp::FetchAdd { .. }
                | SendOp::AtomicWrite { .. }
                | SendOp::Flush { .. } => 1,
                _ => packets(wqe.len, mtu),
            };
        }
        let mut scratch = core::mem::take(&mut self.req.scratch);
        let Built {
            mut packet,
            psns: consumed,
            bytes,
            done,
            data,
        } = build(
            wqe,
            qp_type,
            qpn,
            psn,
            self.req.offset,
            mtu,
            self.attr.dest_qp_num,
            &mut scratch,
        );
        if self.sr.on {
            self.sr_shape(&mut packet, i, self.req.offset, resume.as_ref());
        }
        if qp_type == QpType::Rc {
            self.req.noack_pkts += 1;
            if packet.bth.ack_req || self.req.noack_pkts > MAX_PKT_PER_ACK {
                packet.bth.ack_req = true;
                self.req.noack_pkts = 0;
            }
        }
        let dest = match (&self.sq[i].wr.ud, self.attr.ah_attr) {
            (Some(ud), _) if qp_type == QpType::Ud => ud.dest,
            (_, Some(av)) => av.dest,
            _ => IpAddr::from([0, 0, 0, 0]),
        };
        let dest_qpn = packet.bth.dest_qp;
        let len = if data == 0 {
            packet.emit(buf).ok()
        } else {
            // The data goes from memory straight into the packet, between headers and pad.
            match packet.emit_around(buf, data) {
                Ok((at, len)) => {
                    let out = &mut buf[at..at + data];
                    if let Err(status) = gather(&self.sq[i], self.req.offset, out, ctx, self.pd) {
                        self.req.scratch = scratch;
                        self.fail_from(ctx, i, status);
                        return None;
                    }
                    Some(len)
                }
                Err(_) => None,
            }
        };
        self.req.scratch = scratch;
        let Some(len) = len else {
            if let Some(resume) = resume {
                self.sr_end_resend(resume, psn, ctx.now);
            }
            return None;
        };
        let resent = psn.is_before(self.req.high_psn);
        if resent {
            ctx.counters.retransmitted_pkts += 1;
            self.counters.retransmitted_pkts += 1;
        }
        let is_send = matches!(
            self.sq[i].wr.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_)
        );
        if done && is_send && !resent {
            ctx.counters.rdma_sends += 1;
        }
        self.req.psn = psn.add(consumed);
        if self.req.psn.is_after(self.req.high_psn) {
            self.req.high_psn = self.req.psn;
        }
        if done {
            self.req.next += 1;
            self.req.offset = 0;
        } else {
            self.req.offset += bytes;
        }
        if let Some(resume) = resume {
            self.sr_end_resend(resume, psn, ctx.now);
        }
        match qp_type {
            QpType::Rc => self.request_sent(ctx, psn, resent),
            // Unreliable: a request is complete once its last packet is out.
            QpType::Uc | QpType::Ud => {
                if done {
                    self.complete_head(ctx, WcStatus::Success);
                }
            }
        }
        self.rate.on_sent(ctx.now, len, &ctx.congestion.dcqcn);
        Some(Outgoing {
            len,
            dest,
            local_qpn: self.qpn,
            dest_qpn,
            tclass: self.wire_tclass(ctx),
        })
    }

    /// Completes requests before `i` with WR_FLUSH_ERR, request `i` with `status`, and
    /// moves the QP to ERROR, which flushes the rest.
    pub(crate) fn fail_from(&mut self, ctx: &mut Ctx<'_>, i: usize, status: WcStatus) {
        for _ in 0..i {
            self.complete_head(ctx, WcStatus::WrFlushErr);
        }
        self.complete_head(ctx, status);
    }
}

/// The next request packet of a send WQE, without its data.
struct Built<'a> {
    /// Headers, and the payload when it is not gathered (an ATOMIC WRITE's value).
    packet: PacketRepr<'a>,
    /// PSNs it takes.
    psns: u32,
    /// Bytes of the request it covers.
    bytes: u64,
    /// It ends the request.
    done: bool,
    /// Bytes of data to gather from `offset` into its payload.
    data: usize,
}

/// The packet for the request at `offset` bytes into `wqe`.
#[allow(clippy::too_many_arguments)]
fn build<'a>(
    wqe: &SendWqe,
    qp_type: QpType,
    qpn: u32,
    psn: Psn,
    offset: u64,
    mtu: u32,
    dest_qpn: u32,
    scratch: &'a mut Vec<u8>,
) -> Built<'a> {
    let wr = &wqe.wr;
    let dest = if qp_type == QpType::Ud {
        wr.ud.map_or(0, |u| u.remote_qpn)
    } else {
        dest_qpn
    };
    let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, dest, psn);
    let mut p;
    match wr.op {
        SendOp::Read(remote) => {
            bth.opcode = Opcode::RC_RDMA_READ_REQUEST;
            bth.ack_req = true;
            p = PacketRepr::new(bth);
            let rest = wqe.len - offset;
            p.reth = Some(RethRepr {
                va: remote.addr.wrapping_add(offset),
                rkey: remote.rkey,
                dma_len: rest as u32,
            });
            return Built::control(p, packets(rest, mtu), rest);
        }
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            bth.opcode = Opcode::RC_COMPARE_SWAP;
            bth.ack_req = true;
            p = PacketRepr::new(bth);
            p.atomic_eth = Some(AtomicEthRepr {
                va: remote.addr,
                rkey: remote.rkey,
                swap_add: swap,
                compare,
            });
            return Built::control(p, 1, 8);
        }
        SendOp::FetchAdd { remote, add } => {
            bth.opcode = Opcode::RC_FETCH_ADD;
            bth.ack_req = true;
            p = PacketRepr::new(bth);
            p.atomic_eth = Some(AtomicEthRepr {
                va: remote.addr,
                rkey: remote.rkey,
                swap_add: add,
                compare: 0,
            });
            return Built::control(p, 1, 8);
        }
        SendOp::AtomicWrite { remote, value } => {
            bth.opcode = Opcode::RC_ATOMIC_WRITE;
            bth.ack_req = true;
            scratch.clear();
            // The payload is the 8 bytes of `value` as they lie in memory, as libibverbs
            // sends the buffer it is given and rxe stores the payload unchanged.
            scratch.extend_from_slice(&value.to_ne_bytes());
            p = PacketRepr::new(bth);
            p.reth = Some(RethRepr {
                va: remote.addr,
                rkey: remote.rkey,
                dma_len: 8,
            });
            p.payload = scratch;
            return Built::control(p.with_canonical_pad(), 1, 8);
        }
        SendOp::Flush {
            remote,
            len,
            placement,
            selectivity,
        } => {
            bth.opcode = Opcode::RC_FLUSH;
            bth.ack_req = true;
            p = PacketRepr::new(bth);
            p.feth = Some(FethRepr {
                placement,
                selectivity,
                reserved: 0,
            });
            p.reth = Some(RethRepr {
                va: remote.addr,
                rkey: remote.rkey,
                dma_len: len,
            });
            return Built::control(p, 1, 0);
        }
        _ => {}
    }
    let chunk = (wqe.len - offset).min(u64::from(mtu));
    let first = offset == 0;
    let last = offset + chunk >= wqe.len;
    let pos = match (first, last) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    };
    bth.opcode = if qp_type == QpType::Ud {
        if matches!(wr.op, SendOp::SendWithImm(_)) {
            Opcode::UD_SEND_ONLY_WITH_IMMEDIATE
        } else {
            Opcode::UD_SEND_ONLY
        }
    } else {
        opcode(qp_type, &wr.op, pos)
    };
    bth.ack_req = last && qp_type == QpType::Rc;
    bth.solicited = last && wr.flags.solicited;
    bth.pad = rocex_wire::packet::pad_for(chunk as usize);
    p = PacketRepr::new(bth);
    if let Some(ud) = wr.ud.filter(|_| qp_type == QpType::Ud) {
        p.deth = Some(DethRepr {
            qkey: ud.remote_qkey,
            src_qp: qpn,
            reserved: 0,
        });
    }
    let info = bth
        .opcode
        .info()
        .expect("requester opcodes are in the table");
    if info.exts.contains(rocex_wire::Ext::Reth) {
        if let SendOp::Write(r) | SendOp::WriteWithImm(r, _) = wr.op {
            p.reth = Some(RethRepr {
                va: r.addr,
                rkey: r.rkey,
                dma_len: wqe.len as u32,
            });
        }
    }
    if info.immediate {
        if let SendOp::SendWithImm(imm) | SendOp::WriteWithImm(_, imm) = wr.op {
            p.immdt = Some(ImmDtRepr { data: imm });
        }
    }
    if let (true, SendOp::SendWithInv(rkey)) = (info.invalidate, wr.op) {
        p.ieth = Some(IethRepr { rkey });
    }
    Built {
        packet: p,
        psns: 1,
        bytes: chunk,
        done: last,
        data: chunk as usize,
    }
}

impl<'a> Built<'a> {
    /// A one-packet request, or a READ request: no data of its own to gather.
    fn control(packet: PacketRepr<'a>, psns: u32, bytes: u64) -> Self {
        Self {
            packet,
            psns,
            bytes,
            done: true,
            data: 0,
        }
    }
}

/// Copies the request's data from `offset` into `out`, as many bytes as it holds.
fn gather(
    wqe: &SendWqe,
    offset: u64,
    out: &mut [u8],
    ctx: &mut Ctx<'_>,
    pd: rocex_mem::PdId,
) -> Result<(), WcStatus> {
    let len = out.len();
    match &wqe.wr.data {
        SendData::Inline(data) => {
            let start = offset as usize;
            out.copy_from_slice(data.get(start..start + len).ok_or(WcStatus::LocLenErr)?);
        }
        SendData::Sges(sges) => {
            super::sge::walk(ctx.mem, pd, sges, offset, len, Access::empty(), |t, r| {
                t.read_at(0, &mut out[r])
            })
            .map_err(|e| match e {
                super::sge::SgeError::Key => WcStatus::LocProtErr,
                super::sge::SgeError::Short => WcStatus::LocLenErr,
            })?;
        }
    }
    Ok(())
}
