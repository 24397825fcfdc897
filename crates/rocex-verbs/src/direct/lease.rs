//! The lease: while the application polls a CQ and finds it empty, it takes the packets and
//! runs the engine's timers in its own turns, and the progress thread stands aside. Each
//! packet would otherwise wake that thread for nothing, preempting a program that spins on
//! a busy core, and the thread would then queue on the engine's lock (measured:
//! `docs/verbs.md`, "Direct mode"). Every change is a syscall in the caller's thread
//! ([`Waits`]), never a wake-up.

use std::time::Duration;

use rocex_proto::Instant;

use super::Core;
use super::waits::Waits;

/// How long the progress thread stands aside after the application's last empty poll (or
/// [`Context::progress`](crate::Context::progress)): a program that polls again within it
/// keeps the socket. A program that stops polling without a completion gets the progress
/// thread back when it runs out, so no packet waits longer than this for a turn.
pub(super) const LEASE: Duration = Duration::from_millis(1);

/// Who has the socket and the timerfd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The progress thread: the socket is in its set, the timerfd at the engine's next
    /// deadline.
    Free,
    /// The application, until the instant: the socket is out of the set, and the timerfd
    /// waits for the lease's end (`Core::wakes_at`, moved on at most every half lease).
    Held(Instant),
    /// The application polled and got completions: the socket is back in the set at once
    /// (a program that now spins on its memory needs the progress thread for the next
    /// packet), and the timerfd still waits for the lease's end, which is when the engine's
    /// timers are the thread's again. Left unchanged it costs one syscall; an empty poll
    /// takes the lease again with one more.
    Released,
}

impl Core {
    /// Re-arms the progress thread's timer when the engine's next timer is earlier than it
    /// (a posted request's ACK timeout): one syscall, no wake-up. Only while the timerfd is
    /// the engine's.
    pub(super) fn arm_earlier_timer(&mut self, w: &Waits) {
        if self.lease != Lease::Free {
            return;
        }
        let Some(t) = self.deadline() else {
            return;
        };
        if self.wakes_at.is_none_or(|at| t < at) {
            self.wakes_at = Some(t);
            w.arm_timer(Some(t.since(self.driver.now())));
        }
    }

    /// The application polled and found nothing: it holds the socket for [`LEASE`] more.
    /// The timerfd is moved on once half the lease has gone by, so that a program that
    /// keeps polling never wakes the thread (one syscall per half lease).
    pub(super) fn extend_lease(&mut self, w: &Waits) {
        let now = self.driver.now();
        match self.lease {
            Lease::Free => {
                w.stand_aside();
                self.wakes_at = None;
            }
            Lease::Released => w.stand_aside(),
            Lease::Held(_) => {}
        }
        if self.wakes_at.is_none_or(|at| at < now + LEASE / 2) {
            w.arm_timer(Some(LEASE));
            self.wakes_at = Some(now + LEASE);
        }
        self.lease = Lease::Held(now + LEASE);
    }

    /// The application turned the engine itself ([`Context::progress`](crate::Context::progress)):
    /// it holds the lease as after an empty poll, and, since a program that waits this way
    /// drives its own waits, its completions leave the lease with it until it stops calling
    /// for [`LEASE`] (the peer's next request, a few microseconds behind its ACK, is then
    /// the program's own to take, not a wake-up of the progress thread).
    pub(super) fn drive(&mut self, w: &Waits) {
        self.extend_lease(w);
        self.driven_at = Some(self.driver.now());
    }

    /// The application got completions and may go on to spin on its memory: the socket is
    /// the progress thread's again, unless the application drives its own waits.
    pub(super) fn release_lease(&mut self, w: &Waits) {
        if self.drives_within(self.driver.now(), LEASE) {
            return;
        }
        if let Lease::Held(_) = self.lease {
            w.take_socket_back();
            self.lease = Lease::Released;
        }
    }

    /// The application is about to block (it armed a CQ): what waits to be sent (an ACK
    /// an answered linger held) leaves, and the socket and the engine's timers are the
    /// progress thread's at once.
    pub(super) fn end_lease(&mut self, w: &Waits) {
        self.linger.came_back(self.driver.now());
        let _ = self.driver.send_now();
        if let Lease::Held(_) = self.lease {
            w.take_socket_back();
        }
        if self.lease != Lease::Free {
            self.lease = Lease::Free;
            self.arm_engine_timer(w);
        }
    }

    /// The progress thread's timerfd fired: during a lease that was extended meanwhile it
    /// waits for the new end (true: stand aside); otherwise the lease is over.
    pub(super) fn lease_timer(&mut self, w: &Waits) -> bool {
        let now = self.driver.now();
        match self.lease {
            Lease::Held(end) if end > now => {
                w.arm_timer(Some(end.since(now)));
                self.wakes_at = Some(end);
                return true;
            }
            Lease::Held(_) => w.take_socket_back(),
            Lease::Released | Lease::Free => {}
        }
        self.lease = Lease::Free;
        false
    }

    /// Whether a post of `posted` send requests to `qpn` leaves with the program's next
    /// poll instead of at once: when the program holds the lease (it polls, and a poll
    /// sends what waits) and the QP had requests in flight before it, whose answers that
    /// poll waits for. A window of posts then leaves as one GSO send, which a peer's
    /// steered socket takes as one coalesced run, where each post's own send cost the
    /// kernel's whole path per datagram (64 B SEND ... `docs/performance.md`). A request
    /// alone in flight (a ping-pong's) leaves at once; a program that stops polling gets the
    /// progress thread back at the lease's end, whose turn sends them.
    pub(super) fn corks(&self, qpn: u32, posted: usize) -> bool {
        matches!(self.lease, Lease::Held(_))
            && self
                .driver
                .engine
                .qp_status(qpn)
                .is_ok_and(|q| q.sq_wqes > posted)
    }

    /// Sets the timerfd to the engine's next deadline (or the board's).
    fn arm_engine_timer(&mut self, w: &Waits) {
        let t = self.deadline();
        self.wakes_at = t;
        w.arm_timer(t.map(|t| t.since(self.driver.now())));
    }
}
