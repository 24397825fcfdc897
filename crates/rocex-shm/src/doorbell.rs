//! Doorbells and completion channels: the eventfd half of the notification protocol.
//!
//! The shared-memory half lives in [`crate::ring`]: the producer's index store is the
//! doorbell word, which costs no system call while the consumer polls. Only when the
//! consumer has armed the ring ([`Consumer::prepare_sleep`](crate::Consumer::prepare_sleep)
//! returned [`SleepCheck::Sleep`](crate::SleepCheck::Sleep)) does
//! [`Producer::publish`](crate::Producer::publish) return true, and then the producer calls
//! [`EventFd::signal`]. The same pair serves both directions:
//!
//! * SQ/RQ: the application produces, rocexd consumes. rocexd polls while its spin policy
//!   lets it (rocex-daemon's `spin.rs`), then arms and sleeps on the QP's doorbell eventfd.
//! * CQ: rocexd produces, the application consumes. Arming the CQ is `ibv_req_notify_cq`:
//!   one arm, at most one event on the completion channel's eventfd.
//!
//! The eventfd is created by rocexd and passed over the control socket; a client that never
//! writes it only delays its own work, and one that writes it too often only wakes rocexd.

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
