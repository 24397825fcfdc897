//! Lingering: a CQ poll that takes the last completion a QP owed keeps receiving for a
//! moment before it returns, while the peer's answer to that request has not come yet.
//!
//! A program that waits for its peer by spinning on its own memory (`ib_write_lat`, RPC
//! over RDMA WRITE) calls no verb while it waits, so the peer's WRITE lands only when the
//! progress thread wakes for it; on a small machine where both programs spin, that wake
//! preempts a spinner and costs tens of microseconds (`docs/verbs.md`, "Direct mode").
//! The peer's answer most often follows the ACK that completed the request within a few
//! microseconds: received in the poller's own thread, it lands before the program looks
//! at its memory, and nothing has to wake. A poll that lingers in vain makes the next
//! ones skip the wait (1, 3, 7 ... of them), so a program whose peer does not answer that
//! quickly, or at all, pays the window rarely.

use std::time::Duration;

use super::Core;
use super::lease::LEASE;
use super::waits::Waits;

/// How long a poll waits for the peer's answer: a few of the peer's system calls (its
/// ACK, its return from the poll, its post), measured 4-7 us on this machine.
const WINDOW: Duration = Duration::from_micros(10);

/// The skips after lingers in vain in a row grow no further than 2^this - 1.
const MAX_BACKOFF: u32 = 10;

/// Whether lingering has been paying.
#[derive(Debug, Default)]
pub(super) struct Linger {
    /// Lingers in vain in a row.
    misses: u32,
    /// Chances left to skip before lingering again.
    skip: u32,
    /// The QP last lingered for and the PSN its responder expected then: one that has
    /// moved on since received the peer's answer already, and there is nothing to wait
    /// for.
    answered_from: Option<(u32, u32)>,
    /// Lingers a packet ended, lingers in vain, and chances skipped after one in vain.
    answered: u64,
    in_vain: u64,
    skipped: u64,
}

impl Linger {
    /// Its counters, as a direct context's `stats` reports them (group `direct`).
    pub(super) fn counters(&self) -> [(&'static str, u64); 3] {
        [
            ("linger_answered", self.answered),
            ("linger_in_vain", self.in_vain),
            ("linger_skipped", self.skipped),
        ]
    }
}

impl Core {
    /// Run by a poll that took completions, the last of them `qpn`'s. When the program
    /// does not drive its own waits (a program that does receives the answer itself),
    /// the QP has nothing more in flight, and its peer has sent nothing since the last
    /// linger: holds the socket and turns until a packet comes or [`WINDOW`] is over.
    pub(super) fn linger(&mut self, qpn: u32, w: &Waits) {
        let now = self.driver.now();
        if self.drives_within(now, LEASE) {
            return;
        }
        let Ok(qp) = self.driver.engine.qp_status(qpn) else {
            return;
        };
        let last = self.linger.answered_from.replace((qpn, qp.rq_psn));
        let answered = last.is_some_and(|(q, psn)| q == qpn && psn != qp.rq_psn);
        if qp.sq_wqes > 0 || answered {
            return;
        }
        if self.linger.skip > 0 {
            self.linger.skip -= 1;
            self.linger.skipped += 1;
            return;
        }
        // A packet must not wake the progress thread to queue on the lock this holds.
        self.extend_lease(w);
        let rx = self.driver.backend_counters().rx_packets;
        let end = now + WINDOW;
        self.driver.busy_poll(false);
        loop {
            let _ = self.driver.turn();
            if self.driver.backend_counters().rx_packets != rx {
                self.linger.misses = 0;
                self.linger.answered += 1;
                break;
            }
            if self.driver.now() >= end {
                self.linger.misses = (self.linger.misses + 1).min(MAX_BACKOFF);
                self.linger.in_vain += 1;
                self.linger.skip = (1 << self.linger.misses) - 1;
                break;
            }
        }
        self.deliver_events();
        if let Ok(qp) = self.driver.engine.qp_status(qpn) {
            self.linger.answered_from = Some((qpn, qp.rq_psn));
        }
    }
}
