//! What the responder sends: ACKs and NAKs, atomic acknowledgements and READ responses,
//! built from the queue of replies in order, a READ's data read from memory as each
//! response packet is built.

use rocex_mem::Target;
use rocex_wire::{AethRepr, AtomicAckEthRepr, BthRepr, NakCode, Opcode, PacketRepr, Psn, Syndrome};

use super::{ReadJob, Reply};
use crate::Ctx;
use crate::qp::Qp;

impl Qp {
    /// An empty READ response, the answer to ATOMIC_WRITE and FLUSH (rxe
    /// `send_read_response_ack`).
    pub(super) fn queue_empty_read_response(&mut self, psn: Psn) {
        let job = ReadJob {
            request: psn,
            first: psn,
            npkts: 1,
            next: 0,
            end: 1,
            target: Target::default(),
            msn: self.resp.msn,
        };
        self.resp.out.push_back(Reply::Read(job));
    }

    /// Writes the next responder packet (BTH to ICRC, ICRC left to the caller) into `buf`.
    pub(crate) fn next_reply(&mut self, ctx: &mut Ctx<'_>, buf: &mut [u8]) -> Option<usize> {
        let dest = self.attr.dest_qp_num;
        let mtu = self.mtu();
        // READ responses are the responder's data: DCQCN's rate paces them as it paces
        // requests (the peer's CNPs for them name this QP).
        let read = matches!(self.resp.out.front(), Some(Reply::Read(_)));
        if read && self.rate.paced_until.is_some() {
            return None;
        }
        let reply = self.resp.out.front_mut()?;
        let mut done = true;
        let mut fault = None;
        let len = match reply {
            Reply::Ack { psn, syndrome, msn } => {
                let mut p = PacketRepr::new(BthRepr::new(Opcode::RC_ACKNOWLEDGE, dest, *psn));
                p.aeth = Some(AethRepr {
                    syndrome: *syndrome,
                    msn: *msn,
                });
                p.emit(buf).ok()
            }
            Reply::Sack { psn, msn } => {
                let sack = self.sr.resp.sack(*psn, self.resp.psn);
                let op = if sack.is_empty() {
                    Opcode::RC_ACKNOWLEDGE
                } else {
                    Opcode::SR_ACKNOWLEDGE
                };
                let mut p = PacketRepr::new(BthRepr::new(op, dest, *psn));
                p.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK,
                    msn: *msn,
                });
                p.sack = (!sack.is_empty()).then_some(sack);
                p.emit(buf).ok()
            }
            Reply::AtomicAck { psn, msn, orig } => {
                let mut p =
                    PacketRepr::new(BthRepr::new(Opcode::RC_ATOMIC_ACKNOWLEDGE, dest, *psn));
                p.aeth = Some(AethRepr {
                    syndrome: Syndrome::ACK,
                    msn: *msn,
                });
                p.atomic_ack_eth = Some(AtomicAckEthRepr { orig: *orig });
                p.emit(buf).ok()
            }
            Reply::Read(job) => {
                let i = job.next;
                let (first, last) = (i == 0, i + 1 >= job.npkts);
                let op = match (first, last) {
                    (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                    (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                    (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
                    (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                };
                let at = u64::from(i) * u64::from(mtu);
                let n = job.target.len().saturating_sub(at).min(u64::from(mtu)) as usize;
                let mut p = PacketRepr::new(BthRepr::new(op, dest, job.first.add(i)));
                p.bth.pad = rocex_wire::packet::pad_for(n);
                if first || last {
                    p.aeth = Some(AethRepr {
                        syndrome: Syndrome::ACK,
                        msn: job.msn,
                    });
                }
                // The data goes from memory straight into the packet.
                let emitted = p.emit_around(buf, n).ok();
                if let Some((off, _)) = emitted
                    && job.target.read_at(at, &mut buf[off..off + n]).is_err()
                {
                    fault = Some((job.request, job.msn));
                }
                job.next += 1;
                done = job.next >= job.end;
                emitted.map(|(_, len)| len)
            }
        };
        if let Some((psn, msn)) = fault {
            return self.read_fault(ctx, buf, psn, msn);
        }
        if done {
            self.resp.out.pop_front();
        }
        if read && let Some(n) = len {
            self.rate.on_sent(ctx.now, n, &ctx.congestion.dcqcn);
        }
        len
    }

    /// Memory a READ response was to carry could not be read (it vanished after the request
    /// was checked): the READ ends with NAK 0x62 carrying the request's PSN and the MSN its
    /// responses carried, and the QP moves to ERROR (rxe `read_reply`: a failed
    /// `rxe_mr_copy` is an rkey violation, class C). Nothing queued behind the READ is
    /// answered: rxe finishes a READ before it takes the next request, which an errored QP
    /// then drops.
    pub(super) fn read_fault(
        &mut self,
        ctx: &mut Ctx<'_>,
        buf: &mut [u8],
        psn: Psn,
        msn: u32,
    ) -> Option<usize> {
        ctx.counters.nak_remote_access += 1;
        self.resp.out.clear();
        self.resp.out.push_back(Reply::Ack {
            psn,
            syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
            msn,
        });
        self.enter_error(ctx);
        self.next_reply(ctx, buf)
    }
}
