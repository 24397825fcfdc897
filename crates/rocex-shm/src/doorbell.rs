//! Doorbells and completion channels: the eventfd half of the notification protocol.
//!
//! The shared-memory half lives in [`crate::ring`]: the producer's index store is the
//! doorbell word, which costs no system call while the consumer polls. Only when the consumer
//! has armed the ring ([`Consumer::prepare_sleep`](crate::Consumer::prepare_sleep) returned
//! [`SleepCheck::Sleep`]) does [`Producer::publish`](crate::Producer::publish) return true,
//! and then the producer calls [`EventFd::signal`]. The same pair serves both directions:
//!
//! * SQ/RQ: the application produces, rocexd consumes. rocexd polls while its spin policy
//!   lets it (rocex-daemon's `spin.rs`), then arms and sleeps on the QP's doorbell eventfd.
//! * CQ: rocexd produces, the application consumes. Arming the CQ is `ibv_req_notify_cq`:
//!   one arm, at most one event on the completion channel's eventfd.
//!
//! The eventfd is created by rocexd and passed over the control socket; a client that never
//! writes it only delays its own work, and one that writes it too often only wakes rocexd.

use crate::ring::{Consumer, RingError, SleepCheck};
use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use std::io;
use std::time::Duration;

/// An eventfd used as a wakeup counter.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<Self> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self { fd })
    }

    /// An eventfd received from the other side. Writes and reads are 8 bytes, and any
    /// failure is reported, so a descriptor that is not an eventfd does no harm.
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// Adds one to the counter (wakes a waiter). A counter at its maximum (EAGAIN) already
    /// wakes the waiter, so that is success.
    pub fn signal(&self) -> io::Result<()> {
        match rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            Ok(_) | Err(rustix::io::Errno::AGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Resets the counter; returns how many signals it held.
    pub fn drain(&self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        match rustix::io::read(&self.fd, &mut b) {
            Ok(8) => Ok(u64::from_ne_bytes(b)),
            Ok(_) => Ok(0),
            Err(rustix::io::Errno::AGAIN) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until signalled or `timeout` passes, then drains; true when signalled.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let ts = timeout.map(|t| rustix::event::Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        loop {
            match poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Ok(false),
                Ok(_) => return Ok(self.drain()? > 0),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Adaptive polling for a consumer: spin while work keeps coming, sleep on the eventfd once
/// the ring has been idle for `spin_limit` polls. Busy polling costs a core but answers in
/// well under a microsecond; a wakeup through the eventfd costs tens of microseconds on a
/// VM, so the limit trades CPU for latency.
#[derive(Debug, Clone, Copy)]
pub struct AdaptivePoll {
    /// Empty polls before sleeping.
    pub spin_limit: u32,
    idle: u32,
}

impl AdaptivePoll {
    /// A policy that sleeps after `spin_limit` empty polls.
    pub const fn new(spin_limit: u32) -> Self {
        Self {
            spin_limit,
            idle: 0,
        }
    }

    /// Records a poll that found work.
    pub fn busy(&mut self) {
        self.idle = 0;
    }

    /// Records an empty poll; once idle long enough, arms the ring and sleeps on `efd` (at
    /// most `timeout`). Returns after the sleep, or at once when still spinning or when
    /// work raced in while arming.
    pub fn idle(
        &mut self,
        ring: &mut Consumer<'_>,
        efd: &EventFd,
        timeout: Option<Duration>,
    ) -> Result<(), IdleError> {
        self.idle = self.idle.saturating_add(1);
        if self.idle < self.spin_limit {
            core::hint::spin_loop();
            return Ok(());
        }
        self.idle = 0;
        match ring.prepare_sleep(1).map_err(IdleError::Ring)? {
            SleepCheck::Ready(_) => Ok(()),
            SleepCheck::Sleep => {
                let r = efd.wait(timeout);
                ring.finish_sleep();
                r.map(drop).map_err(IdleError::Io)
            }
        }
    }
}

/// Why [`AdaptivePoll::idle`] failed.
#[derive(Debug)]
pub enum IdleError {
    /// The ring is broken.
    Ring(RingError),
    /// The eventfd failed.
    Io(io::Error),
}

impl core::fmt::Display for IdleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Ring(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "eventfd: {e}"),
        }
    }
}

impl std::error::Error for IdleError {}
