//! Which QP runs next: the ready queue of QPs with something to send, the timer set, and
//! the context a QP runs in.

use std::collections::VecDeque;

use foldhash::HashMap;
use rocex_mem::MemTable;

use super::{Engine, Event};
use crate::counters::Counters;
use crate::cq::Cq;
use crate::qp::Qp;
use crate::time::Instant;
use crate::verbs::WorkCompletion;

/// What the per-QP engines may touch besides their QP.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) mem: &'a mut MemTable,
    pub(crate) cqs: &'a mut HashMap<u32, Cq>,
    pub(crate) counters: &'a mut Counters,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) port_mtu: u32,
    /// Back-to-back positive ACKs coalesce into the last (with `requests_before_acks`).
    pub(crate) coalesce_acks: bool,
    /// ECN marking, CNPs and DCQCN.
    pub(crate) congestion: &'a crate::Congestion,
    /// Retransmit only when rxe would (`Config::rxe_recovery`).
    pub(crate) rxe_recovery: bool,
}

impl Ctx<'_> {
    /// Delivers a completion to a CQ.
    pub(crate) fn complete(&mut self, cq: u32, wc: WorkCompletion, solicited: bool) {
        let Some(q) = self.cqs.get_mut(&cq) else {
            return;
        };
        match q.push(wc, solicited) {
            Ok(true) => self.events.push_back(Event::CqNotify(cq)),
            Ok(false) => {}
            Err(_) => self.events.push_back(Event::CqOverrun(cq)),
        }
    }
}

impl Engine {
    /// When [`Engine::handle_timeout`] should next be called: at the earliest deadline or
    /// before it (a QP whose timer was restarted is looked at again, at no cost to it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.armed == 0 {
            return None;
        }
        self.timers.first().map(|(t, _)| *t)
    }

    /// Runs the timers due at `now`; a QP whose deadline moved later is scheduled anew.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, qpn)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            // The QP's timers check their own times against `now`.
            self.with_qp(qpn, now, |qp, ctx| {
                qp.scheduling.timer_entry = None;
                qp.rate.on_timer(ctx.now, &ctx.congestion.dcqcn);
                qp.handle_timer(ctx);
            });
        }
    }

    /// Runs `f` on a QP with the context it needs, then reschedules the QP.
    pub(super) fn with_qp<R>(
        &mut self,
        qpn: u32,
        now: Instant,
        f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let qp = self.qps.get_mut(&qpn)?;
        let mut ctx = Ctx {
            now,
            mem: &mut self.mem,
            cqs: &mut self.cqs,
            counters: &mut self.counters,
            events: &mut self.events,
            port_mtu: self.config.port_mtu.bytes(),
            coalesce_acks: self.requests_first,
            congestion: &self.config.congestion,
            rxe_recovery: self.config.rxe_recovery,
        };
        let r = f(qp, &mut ctx);
        let deadline = qp.deadline();
        let wants = qp.wants_to_send();
        match (deadline, qp.scheduling.timer_entry) {
            // An entry at or before the deadline will do (see `timers`).
            (Some(t), Some(at)) if at <= t => {}
            (Some(t), old) => {
                if let Some(old) = old {
                    self.timers.remove(&(old, qpn));
                }
                qp.scheduling.timer_entry = Some(t);
                self.timers.insert((t, qpn));
            }
            // No deadline: the entry stays for the next one (an idle engine reports none).
            (None, _) => {}
        }
        if deadline.is_some() != qp.scheduling.armed {
            qp.scheduling.armed = deadline.is_some();
            if qp.scheduling.armed {
                self.armed += 1;
            } else {
                self.armed -= 1;
            }
        }
        if wants && !qp.scheduling.queued {
            qp.scheduling.queued = true;
            self.ready.push_back(qpn);
        }
        Some(r)
    }
}
