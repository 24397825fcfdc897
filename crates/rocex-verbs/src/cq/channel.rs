//! Completion channels: the eventfd written when an armed CQ gets a completion (by
//! rocexd, or by whichever thread drove a direct context's engine).

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use rocex_shm::EventFd;
use rocex_shm::control::{Request, Response};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::{Context, Dev, Error, Result, proto};

impl Context {
    /// A completion channel (`ibv_create_comp_channel`).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let (id, ev) = match &self.dev {
            Dev::Daemon(ch) => match ch.call(&Request::CreateCompChannel, &[])? {
                (Response::CreateCompChannel { channel }, mut fds) if fds.len() == 1 => {
                    (channel, EventFd::from_fd(fds.remove(0)))
                }
                (r, _) => return Err(proto(format!("unexpected {r:?}"))),
            },
            Dev::Direct(_) => (0, EventFd::new()?),
        };
        Ok(CompChannel {
            id,
            ev: Arc::new(ev),
            dev: self.dev.clone(),
        })
    }
}

/// A completion channel: the eventfd written when an armed CQ gets a completion.
#[derive(Debug, Clone)]
pub struct CompChannel {
    pub(super) id: u32,
    pub(super) ev: Arc<EventFd>,
    dev: Dev,
}

impl CompChannel {
    /// Waits for an event (or `timeout`); true when one came. Waits on the control socket
    /// too: a daemon that dies wakes the waiter with [`Error::DaemonGone`] instead of
    /// leaving it blocked on an eventfd nobody will write.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        if self.dev.closed() {
            return Err(Error::DaemonGone);
        }
        let ts = timeout.map(|t| Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        let live = self.dev.liveness_fd();
        let mut fds = [
            PollFd::new(&*self.ev, PollFlags::IN),
            PollFd::new(&live, PollFlags::IN | PollFlags::RDHUP),
        ];
        loop {
            match poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Ok(false),
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::Io(e.into())),
            }
        }
        if !fds[0].revents().is_empty() {
            return Ok(self.ev.drain()? > 0);
        }
        self.dev.set_gone();
        Err(Error::DaemonGone)
    }

    /// Writes the channel's eventfd as the device does, waking a waiter: for a CQ that
    /// already held completions when it was armed (libibverbs' missed-event report).
    pub fn signal(&self) -> Result<()> {
        self.ev.signal().map_err(Error::Io)
    }

    /// The descriptors an event loop (epoll, tokio's `AsyncFd`) waits on in place of
    /// [`CompChannel::wait`]: the eventfd, and the control socket, which becomes readable
    /// between calls only when the daemon is gone. Once either is ready,
    /// `wait(Some(Duration::ZERO))` drains the eventfd or reports [`Error::DaemonGone`].
    pub fn wait_fds(&self) -> [std::os::fd::BorrowedFd<'_>; 2] {
        [self.ev.as_fd(), self.dev.liveness_fd()]
    }
}
