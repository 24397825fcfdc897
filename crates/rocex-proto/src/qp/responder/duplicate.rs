//! Requests with a PSN before the expected one (IBTA C9-105..C9-107; rxe
//! `duplicate_request`): SEND and WRITE re-ACKed, a READ replayed from the PSN it asks
//! for, an atomic, ATOMIC_WRITE or FLUSH answered from its saved result.

use rocex_mem::Access;
use rocex_wire::opcode::Operation;
use rocex_wire::{OpcodeInfo, PacketRepr, Syndrome};

use super::{ReadJob, Reply, ResourceKind};
use crate::Ctx;
use crate::qp::Qp;

impl Qp {
    /// A request with a PSN before the expected one (C9-105..C9-107).
    pub(super) fn duplicate(&mut self, ctx: &mut Ctx<'_>, pkt: &PacketRepr<'_>, info: &OpcodeInfo) {
        let psn = pkt.bth.psn;
        match info.operation {
            Operation::Send | Operation::Write => {
                let last = self.resp.psn.sub(1);
                self.resp.queue_ack(last, Syndrome::ACK, false);
            }
            Operation::ReadRequest => {
                let Some(reth) = pkt.reth else { return };
                let mtu = u64::from(self.mtu());
                let found = self.resp.resources.iter().rev().find_map(|r| match r.kind {
                    ResourceKind::Read(original) if psn.in_window(r.first, r.npkts) => {
                        Some((r.first, r.npkts, original))
                    }
                    _ => None,
                });
                let Some((first, npkts, original)) = found else {
                    ctx.counters.drop_no_resource += 1;
                    return;
                };
                // The retried request must ask for the rest of the original, from its PSN;
                // under selective repeat, for any range of it from its PSN (`qp/sr`).
                let skip = u64::from(psn.diff(first) as u32) * mtu;
                let asked = u64::from(reth.dma_len) + skip;
                let rest = u64::from(original.dma_len);
                if reth.rkey != original.rkey
                    || reth.va != original.va.wrapping_add(skip)
                    || (asked != rest && !(self.sr.on && asked < rest))
                {
                    ctx.counters.drop_no_resource += 1;
                    return;
                }
                // rxe `rxe_recheck_mr`: a key gone since the original is a remote access
                // error, not a silent drop.
                let target = match self.remote_rw(ctx, original, Access::REMOTE_READ) {
                    Ok(t) => t,
                    Err(r) => return self.refuse(ctx, psn, r),
                };
                let next = psn.diff(first) as u32;
                let end = next + super::packets(u64::from(reth.dma_len), self.mtu());
                let msn = self.resp.msn;
                self.resp.out.push_back(Reply::Read(ReadJob {
                    request: psn,
                    first,
                    npkts,
                    next,
                    end: end.min(npkts),
                    target,
                    msn,
                }));
            }
            Operation::CompareSwap
            | Operation::FetchAdd
            | Operation::AtomicWrite
            | Operation::Flush => {
                let saved = self
                    .resp
                    .resources
                    .iter()
                    .rev()
                    .find(|r| r.first == psn)
                    .map(|r| r.kind.clone());
                match saved {
                    Some(ResourceKind::Atomic { orig }) => {
                        self.resp.out.push_back(Reply::AtomicAck {
                            psn,
                            msn: self.resp.msn,
                            orig,
                        });
                    }
                    Some(ResourceKind::Empty) => self.queue_empty_read_response(psn),
                    _ => ctx.counters.drop_no_resource += 1,
                }
            }
            _ => ctx.counters.drop_no_resource += 1,
        }
    }
}
