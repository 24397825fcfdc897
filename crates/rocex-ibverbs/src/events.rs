//! A context's asynchronous events (`ibv_get_async_event`, `ibv_ack_async_event`).
//!
//! The events rxe raises to a program, and when rocex raises each:
//! - `IBV_EVENT_SRQ_LIMIT_REACHED`: an armed SRQ (a non-zero `srq_limit`) falls below its
//!   limit once a receive has taken a request, and the limit is disarmed (rxe
//!   `get_srq_wqe`). SRQs are the library's (`srq.rs`), so the event is raised when the
//!   program polls the receive completion that took the SRQ below the limit.
//! - `IBV_EVENT_QP_LAST_WQE_REACHED`: a QP whose receives come from an SRQ goes to error
//!   (rxe `flush_recv_queue`), once until it is reset. The library sees that when the
//!   program moves the QP to error or polls an error completion of the QP; a QP moved to
//!   error without one (a request of the peer's refused by its responder) goes unnoticed.
//! - `IBV_EVENT_DEVICE_FATAL`: the device goes away (rocexd's control connection hangs
//!   up; rxe's netdev is unregistered), once.
//!
//! rxe raises no `IBV_EVENT_QP_FATAL` and no `IBV_EVENT_COMM_EST`: a QP that a NAK or an
//! exhausted retry count moves to error completes the request with its error status
//! (`rxe_completer`'s `COMPST_ERROR` calls `rxe_qp_error`, which raises nothing), and
//! neither does rocex. `IBV_EVENT_PORT_ACTIVE` and `IBV_EVENT_PORT_ERR` follow rxe's
//! netdev going up and down; rocexd's port is active while it runs.
//!
//! `ibv_context.async_fd` is an epoll descriptor over the queue's eventfd and the control
//! socket's hang-up, so a program may set `O_NONBLOCK` on it and `poll(2)` it as with
//! rdma-core: it is readable exactly while an event waits.

use core::ffi::{c_int, c_void};
use std::collections::VecDeque;
use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::abi::ibv_async_event;

/// `enum ibv_event_type` values rocex raises.
pub mod kind {
    use core::ffi::c_int;

    /// `IBV_EVENT_DEVICE_FATAL`.
    pub const DEVICE_FATAL: c_int = 8;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub const SRQ_LIMIT_REACHED: c_int = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    pub const QP_LAST_WQE_REACHED: c_int = 16;
}

/// The events of one context.
pub struct AsyncEvents {
    /// `ibv_context.async_fd`: epoll over `queued` and the control socket's hang-up.
    pub fd: c_int,
    /// Counts the queued events (`EFD_SEMAPHORE`: each read takes one).
    queued: c_int,
    /// The control socket (owned by the context's connection).
    sock: c_int,
    queue: Mutex<VecDeque<ibv_async_event>>,
    /// `IBV_EVENT_DEVICE_FATAL` was reported (and the socket left the epoll set).
    fatal_sent: AtomicBool,
}

// SAFETY: the queued events' element pointers name objects of the context, which the
// program owns; the queue is behind a mutex and the descriptors are plain integers.
unsafe impl Send for AsyncEvents {}
// SAFETY: as above.
unsafe impl Sync for AsyncEvents {}

fn check(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl AsyncEvents {
    /// The events of a context whose control socket is `sock`.
    pub fn new(sock: c_int) -> io::Result<Self> {
        // SAFETY: plain descriptor-creating calls; each is closed on failure or in Drop.
        unsafe {
            let fd = check(libc::epoll_create1(libc::EPOLL_CLOEXEC))?;
            let queued = match check(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK | libc::EFD_SEMAPHORE,
            )) {
                Ok(q) => q,
                Err(e) => {
                    libc::close(fd);
                    return Err(e);
                }
            };
            let ev = Self {
                fd,
                queued,
                sock,
                queue: Mutex::new(VecDeque::new()),
                fatal_sent: AtomicBool::new(false),
            };
            ev.watch(queued, libc::EPOLLIN as u32)?;
            ev.watch(sock, (libc::EPOLLRDHUP | libc::EPOLLHUP) as u32)?;
            Ok(ev)
        }
    }

    fn watch(&self, fd: c_int, events: u32) -> io::Result<()> {
        let mut e = libc::epoll_event {
            events,
            u64: fd as u64,
        };
        // SAFETY: both descriptors are open; `e` is a valid event.
        check(unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut e) }).map(drop)
    }

    /// Queues an event about `element` (an object of the context, or NULL).
    pub fn raise(&self, element: *mut c_void, event_type: c_int) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(ibv_async_event {
                element,
                event_type,
            });
        let one = 1u64;
        // SAFETY: writes 8 bytes to the context's eventfd.
        unsafe { libc::write(self.queued, (&raw const one).cast(), 8) };
    }

    /// The next event, without waiting: a queued one first, then the device's loss.
    fn take(&self) -> Option<ibv_async_event> {
        if let Some(e) = self
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            let mut n = 0u64;
            // SAFETY: reads 8 bytes from the context's eventfd (takes one count).
            unsafe { libc::read(self.queued, (&raw mut n).cast(), 8) };
            return Some(e);
        }
        if self.fatal_sent.load(Ordering::Acquire) || !self.hung_up() {
            return None;
        }
        if self.fatal_sent.swap(true, Ordering::AcqRel) {
            return None;
        }
        // The hang-up stays readable: leave the set, or async_fd would stay readable.
        // SAFETY: removes an entry this struct added.
        unsafe {
            libc::epoll_ctl(
                self.fd,
                libc::EPOLL_CTL_DEL,
                self.sock,
                core::ptr::null_mut(),
            )
        };
        Some(ibv_async_event {
            element: core::ptr::null_mut(),
            event_type: kind::DEVICE_FATAL,
        })
    }

    /// True when rocexd's end of the control socket is closed. The daemon writes only in
    /// answer to a call, so only a hang-up (not a readable answer) counts.
    fn hung_up(&self) -> bool {
        let mut p = libc::pollfd {
            fd: self.sock,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        let r = unsafe { libc::poll(&mut p, 1, 0) };
        r > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
    }

    /// `ibv_get_async_event`: the next event, waiting for one unless `async_fd` is
    /// non-blocking (then EAGAIN).
    pub fn next(&self) -> Result<ibv_async_event, c_int> {
        // SAFETY: fcntl on the context's own descriptor.
        let fl = unsafe { libc::fcntl(self.fd, libc::F_GETFL) };
        let nonblock = fl >= 0 && fl & libc::O_NONBLOCK != 0;
        loop {
            if let Some(e) = self.take() {
                return Ok(e);
            }
            if nonblock {
                return Err(libc::EAGAIN);
            }
            let mut p = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut p, 1, -1) };
            if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(libc::EIO);
            }
        }
    }
}

impl Drop for AsyncEvents {
    fn drop(&mut self) {
        // SAFETY: the two descriptors this struct created (the socket is the connection's).
        unsafe {
            libc::close(self.fd);
            libc::close(self.queued);
        }
    }
}
