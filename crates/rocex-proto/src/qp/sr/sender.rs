//! What a selective-repeat requester knows of the packets it sent: which ones the peer
//! holds (SACKed, or for a READ, which responses arrived), which wait to be resent, and
//! when each was last resent.

use std::collections::VecDeque;

use rocex_wire::Psn;

use crate::time::Instant;

/// One PSN from the oldest unacknowledged one on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mark {
    /// The peer holds it (a request packet SACKed), or its READ response arrived
    /// ([`Sender::hold`]).
    pub(crate) got: bool,
    /// In the resend queue.
    pub(crate) queued: bool,
    /// When last resent: the PSN the requester's frontier stood at. A packet sent after
    /// the resend (a PSN at or past it) acknowledged while this one is still missing
    /// means the resend was lost too.
    pub(crate) resent_at: Option<Psn>,
    /// When last resent.
    pub(crate) resent_time: Option<Instant>,
}

/// Selective-repeat requester state.
#[derive(Debug, Default)]
pub(crate) struct Sender {
    /// The PSN of `marks[0]`; the oldest unacknowledged PSN or before it.
    base: Psn,
    marks: VecDeque<Mark>,
    /// How many of `marks` are held (`got`).
    held: u32,
    /// PSNs to resend, oldest first.
    pub(crate) resend: VecDeque<Psn>,
    /// The furthest cumulative acknowledgement received.
    pub(crate) cumulative: Option<Psn>,
    /// Atomic results that came before their request was the oldest: PSN, original value.
    pub(crate) early: VecDeque<(Psn, u64)>,
    /// Receive-consuming messages (SEND, WRITE with immediate) completed: the message
    /// number of the first such one on the send queue.
    pub(crate) recv_done: u32,
}

impl Sender {
    /// Drops the marks of PSNs before `oldest` (acknowledged).
    pub(crate) fn sync(&mut self, oldest: Psn) {
        let d = oldest.diff(self.base);
        if d < 0 || d as usize >= self.marks.len() {
            self.marks.clear();
            self.held = 0;
        } else {
            let gone = self.marks.drain(..d as usize).filter(|m| m.got).count();
            self.held -= gone as u32;
        }
        self.base = oldest;
    }

    /// Marks `psn` (at or past the base) held by the peer.
    pub(crate) fn hold(&mut self, psn: Psn) {
        let Some(m) = self.mark(psn) else { return };
        let new = !m.got;
        m.got = true;
        self.held += u32::from(new);
    }

    /// PSNs from `oldest` (unacknowledged) up to `high` (one past the highest sent) the
    /// peer is not known to hold: the packets in flight, or lost.
    pub(crate) fn in_flight(&self, oldest: Psn, high: Psn) -> u32 {
        let d = oldest.diff(self.base);
        let held = if d < 0 || d as usize > self.marks.len() {
            0
        } else {
            // Marks before `oldest` are acknowledged, not in flight: not synced yet.
            let stale = self.marks.iter().take(d as usize).filter(|m| m.got).count();
            self.held - stale as u32
        };
        (high.diff(oldest).max(0) as u32).saturating_sub(held)
    }

    /// The mark of `psn` (at or past the base).
    pub(crate) fn mark(&mut self, psn: Psn) -> Option<&mut Mark> {
        let d = psn.diff(self.base);
        if d < 0 {
            return None;
        }
        let d = d as usize;
        if self.marks.len() <= d {
            self.marks.resize(d + 1, Mark::default());
        }
        self.marks.get_mut(d)
    }

    /// Whether `psn` is marked as held by the peer.
    pub(crate) fn got(&self, psn: Psn) -> bool {
        let d = psn.diff(self.base);
        d >= 0 && self.marks.get(d as usize).is_some_and(|m| m.got)
    }

    /// The oldest PSN resent and not yet known held, unless it waits to be resent again.
    pub(crate) fn unanswered_resend(&self) -> Option<Psn> {
        let d = self
            .marks
            .iter()
            .position(|m| m.resent_time.is_some() && !m.got && !m.queued)?;
        Some(self.base.add(d as u32))
    }

    /// When `psn` (at or past the base) was last resent, if it was.
    pub(crate) fn resent_time(&self, psn: Psn) -> Option<Instant> {
        let d = psn.diff(self.base);
        (d >= 0)
            .then(|| self.marks.get(d as usize))
            .flatten()
            .and_then(|m| m.resent_time)
    }

    /// Queues `psn` for resending unless it is queued already or the peer holds it;
    /// `again` (the timer's resend) resends it whatever is known, so that the peer
    /// answers with what it holds now.
    pub(crate) fn queue(&mut self, psn: Psn, again: bool) {
        let Some(m) = self.mark(psn) else { return };
        if again {
            m.resent_at = None;
            m.resent_time = None;
            let was = m.got;
            m.got = false;
            self.held -= u32::from(was);
        }
        let Some(m) = self.mark(psn) else { return };
        if m.queued || m.got {
            return;
        }
        m.queued = true;
        let at = self
            .resend
            .iter()
            .position(|p| p.is_after(psn))
            .unwrap_or(self.resend.len());
        self.resend.insert(at, psn);
    }
}
