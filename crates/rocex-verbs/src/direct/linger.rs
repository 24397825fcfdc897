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
//!
//! Once answered, the poll keeps the lease and the answer's ACK waits for the program's
//! next post or poll, so that its reply leaves first, alone, and the socket does not go
//! to the progress thread and back (two `epoll_ctl`) between the poll and the post. That
//! pays only while the program comes back at once (a ping-pong); one that does not leaves
//! the ACK and its peer's next packets waiting until the lease ends (1 ms at most), so a
//! late return makes the next answered lingers give both up at once (1, 3, 7 ... of
//! them), as a linger in vain makes the next chances skip.

use std::time::Duration;

use rocex_proto::{Instant, QpStatus};

use super::Core;
use super::lease::LEASE;
use super::waits::Waits;
use crate::patience::{Backoff, MIN_WINDOW, Patience};

/// How soon after an answered linger the program must post or poll again for the held
/// ACK to have cost its peer nothing worth the saving: the shortest window, a few of the
/// peer's system calls.
const PROMPT: Duration = MIN_WINDOW;

/// Whether lingering has been paying.
#[derive(Debug)]
pub(super) struct Linger {
    /// How long the next linger waits, and whether it does.
    patience: Patience,
    /// The QP of the last post of requests and the PSN its responder expected then: one
    /// that has moved on since received the peer's answer already.
    asked_at: Option<(u32, u32)>,
    /// When the last answered linger returned holding the lease and the answer's ACK,
    /// until the program's next post or poll.
    held_at: Option<Instant>,
    /// Late returns after a hold back off.
    holds: Backoff,
    /// Answered lingers that held, and returns that came late.
    held: u64,
    held_late: u64,
}

/// A poll's linger under way.
pub(super) struct Lingering {
    qpn: u32,
    began: Instant,
    /// When it ends if nothing more comes.
    end: Instant,
    /// Datagrams the port had received when last looked at.
    rx: u64,
    /// How long after it began the first packet came.
    heard: Option<Duration>,
    window: Duration,
}

impl Default for Linger {
    fn default() -> Self {
        Self {
            patience: Patience::new(MIN_WINDOW),
            asked_at: None,
            held_at: None,
            holds: Backoff::default(),
            held: 0,
            held_late: 0,
        }
    }
}

impl Linger {
    /// Its counters, as a direct context's `stats` reports them (group `direct`).
    pub(super) fn counters(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let held = [
            ("linger_held", self.held),
            ("linger_held_late", self.held_late),
        ];
        self.patience.counters().into_iter().chain(held)
    }

    /// An answered linger returns: whether it keeps the lease and holds the ACK.
    fn hold(&mut self, now: Instant) -> bool {
        if self.holds.skip() {
            return false;
        }
        self.held_at = Some(now);
        self.held += 1;
        true
    }

    /// The program posts or polls: a return that came late gives up the next holds.
    pub(super) fn came_back(&mut self, now: Instant) {
        let Some(at) = self.held_at.take() else {
            return;
        };
        if now.since(at) <= PROMPT {
            self.holds.paid();
            return;
        }
        self.holds.missed();
        self.held_late += 1;
    }
}

impl Core {
    /// One turn ([`Core::turn`]); whether it received a datagram.
    pub(super) fn turn_heard(&mut self) -> bool {
        let rx = self.driver.rx_packets();
        self.turn();
        self.driver.rx_packets() != rx
    }

    /// Run by a poll that took completions, the last of them a request's of `qpn` (whose
    /// status is `qp`), which has nothing more in flight. When the program does not drive its own waits (a
    /// program that does receives the answer itself) and its peer has sent nothing since
    /// the program posted on it (or only the first packets of a message), the poll holds
    /// the socket and lingers: [`Core::linger_turn`] until a packet comes, and on until
    /// the message it began is whole, or until the window passes without one.
    pub(super) fn begin_linger(&mut self, qpn: u32, qp: &QpStatus, w: &Waits) -> Option<Lingering> {
        let now = self.driver.now();
        if self.drives_within(now, LEASE) {
            return None;
        }
        let answered = self
            .linger
            .asked_at
            .is_some_and(|(q, psn)| q == qpn && psn != qp.rq_psn);
        if answered && !qp.receiving {
            return None;
        }
        let window = self.linger.patience.chance()?;
        // A packet must not wake the progress thread to queue on the engine's lock.
        self.extend_lease(w);
        Some(Lingering {
            qpn,
            began: now,
            end: now + window,
            rx: self.driver.rx_packets(),
            heard: None,
            window,
        })
    }

    /// One turn of a linger, under the lock, which is free between turns for the
    /// program's other threads; true when it is over. A step: what the packets received
    /// call for (the answer's ACK) waits for [`Core::end_linger`].
    pub(super) fn linger_turn(&mut self, l: &mut Lingering) -> bool {
        self.step();
        let now = self.driver.now();
        let rx = self.driver.rx_packets();
        if rx == l.rx {
            return now >= l.end;
        }
        // The answer may be a message of many packets: wait on for the rest.
        (l.rx, l.end) = (rx, now + l.window);
        l.heard.get_or_insert(now.since(l.began));
        let qp = self.driver.engine.qp_status(l.qpn);
        !qp.is_ok_and(|q| q.receiving)
    }

    /// A linger is over: the next one's window, and its backing off when none came. An
    /// answered one keeps the lease and the ACK unless late returns gave that up; else
    /// what it received is answered now and the socket goes back to the progress thread.
    pub(super) fn end_linger(&mut self, l: Lingering, w: &Waits) {
        let now = self.driver.now();
        let g = &mut self.linger;
        g.patience.ended(l.window, l.heard);
        if l.heard.is_some() && g.hold(now) {
            return;
        }
        let _ = self.driver.send_now();
        self.release_lease(w);
    }

    /// Requests were posted on `qpn`: what its responder expects now tells a later linger
    /// whether the peer answered meanwhile.
    pub(super) fn asked(&mut self, qpn: u32) {
        if let Ok(qp) = self.driver.engine.qp_status(qpn) {
            self.linger.asked_at = Some((qpn, qp.rq_psn));
        }
    }
}
