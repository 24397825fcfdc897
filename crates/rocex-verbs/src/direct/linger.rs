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

/// How long a poll waits for the peer's answer at least: a few of the peer's system calls
/// (its ACK, its return from the poll, its post), measured 4-7 us on this machine for an
/// answer of one packet.
const MIN_WINDOW: Duration = Duration::from_micros(10);

/// How long at most: a larger answer takes the peer longer to land the request and to
/// send (64 KiB: 30-40 us here), but past a few wake-ups of the progress thread waiting
/// costs more than it saves.
const MAX_WINDOW: Duration = Duration::from_micros(100);

/// The skips after lingers in vain in a row grow no further than 2^this - 1.
const MAX_BACKOFF: u32 = 10;

/// Whether lingering has been paying.
#[derive(Debug)]
pub(super) struct Linger {
    /// How long the next linger waits: twice the last answer's delay, doubled after one
    /// in vain.
    window: Duration,
    /// Lingers in vain in a row.
    misses: u32,
    /// Chances left to skip before lingering again.
    skip: u32,
    /// The QP of the last post of requests and the PSN its responder expected then: one
    /// that has moved on since received the peer's answer already.
    asked_at: Option<(u32, u32)>,
    /// Lingers a packet ended, lingers in vain, and chances skipped after one in vain.
    answered: u64,
    in_vain: u64,
    skipped: u64,
}

impl Default for Linger {
    fn default() -> Self {
        Self {
            window: MIN_WINDOW,
            misses: 0,
            skip: 0,
            asked_at: None,
            answered: 0,
            in_vain: 0,
            skipped: 0,
        }
    }
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
    /// Whether `qpn` has send work requests not yet completed.
    pub(super) fn in_flight(&self, qpn: u32) -> bool {
        let qp = self.driver.engine.qp_status(qpn);
        qp.is_ok_and(|q| q.sq_wqes > 0)
    }

    fn rx_packets(&self) -> u64 {
        self.driver.backend_counters().rx_packets
    }

    /// Run by a poll that took completions, the last of them a request's of `qpn`, which
    /// has nothing more in flight. When the program does not drive its own waits (a
    /// program that does receives the answer itself) and its peer has sent nothing since the program
    /// posted on it (or only the first packets of a message): holds the socket and turns until
    /// a packet comes, and on until the message it began is whole, or until the window
    /// passes without one.
    pub(super) fn linger(&mut self, qpn: u32, w: &Waits) {
        let now = self.driver.now();
        if self.drives_within(now, LEASE) {
            return;
        }
        let Ok(qp) = self.driver.engine.qp_status(qpn) else {
            return;
        };
        let answered = self
            .linger
            .asked_at
            .is_some_and(|(q, psn)| q == qpn && psn != qp.rq_psn);
        if answered && !qp.receiving {
            return;
        }
        if self.linger.skip > 0 {
            self.linger.skip -= 1;
            self.linger.skipped += 1;
            return;
        }
        // A packet must not wake the progress thread to queue on the lock this holds.
        self.extend_lease(w);
        self.driver.busy_poll(false);
        let window = self.linger.window;
        let (mut rx, mut end, mut heard) = (self.rx_packets(), now + window, None);
        loop {
            let _ = self.driver.turn();
            if self.rx_packets() != rx {
                // The answer may be a message of many packets: wait on for the rest.
                let t = self.driver.now();
                (rx, end) = (self.rx_packets(), t + window);
                heard.get_or_insert(t.since(now));
                let st = self.driver.engine.qp_status(qpn);
                if !st.is_ok_and(|s| s.receiving) {
                    break;
                }
            } else if self.driver.now() >= end {
                break;
            }
        }
        if let Some(after) = heard {
            self.linger.window = (after * 2).clamp(MIN_WINDOW, MAX_WINDOW);
            self.linger.misses = 0;
            self.linger.answered += 1;
        } else {
            self.linger.window = (window * 2).min(MAX_WINDOW);
            self.linger.misses = (self.linger.misses + 1).min(MAX_BACKOFF);
            self.linger.skip = (1 << self.linger.misses) - 1;
            self.linger.in_vain += 1;
        }
        self.deliver_events();
    }

    /// Requests were posted on `qpn`: what its responder expects now tells a later linger
    /// whether the peer answered meanwhile.
    pub(super) fn asked(&mut self, qpn: u32) {
        if let Ok(qp) = self.driver.engine.qp_status(qpn) {
            self.linger.asked_at = Some((qpn, qp.rq_psn));
        }
    }
}
