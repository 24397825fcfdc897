//! UC requests (IBTA §9.8): no acknowledgements; a packet lost drops the rest of its
//! message, and the next first packet resynchronizes (C9-116).

use rocex_wire::opcode::Operation;
use rocex_wire::{OpcodeInfo, PacketRepr};

use crate::Ctx;
use crate::qp::Qp;

impl Qp {
    pub(super) fn uc_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        info: &OpcodeInfo,
    ) {
        let psn = pkt.bth.psn;
        if info.position.starts() {
            // A first packet resynchronizes; a message cut short is dropped (C9-116).
            if let Some(wr) = self.resp.take_recv() {
                self.rq.push_front(wr);
            }
            self.resp.uc_resync = false;
            self.resp.psn = psn;
        } else if self.resp.uc_resync || psn != self.resp.psn {
            if let Some(wr) = self.resp.take_recv() {
                self.rq.push_front(wr);
            }
            self.resp.uc_resync = true;
            ctx.counters.drop_unreliable += 1;
            return;
        }
        let ok = self.check_sequence(info).is_ok()
            && self.check_access(pkt, info).is_ok()
            && self.check_length(pkt, info).is_ok()
            && !((info.position.starts() || info.immediate)
                && self.rq.is_empty()
                && self.resp.msg.is_none());
        let done = ok
            && match info.operation {
                Operation::Send => self.exec_send(ctx, pkt, info).is_ok(),
                Operation::Write => self.exec_write(ctx, pkt, info).is_ok(),
                _ => false,
            };
        if done {
            self.resp.psn = psn.add(1);
        } else {
            ctx.counters.drop_unreliable += 1;
            if let Some(wr) = self.resp.take_recv() {
                self.rq.push_front(wr);
            }
            self.resp.msg = None;
            self.resp.uc_resync = true;
        }
    }
}
