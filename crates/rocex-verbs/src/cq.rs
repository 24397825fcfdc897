//! Completion channels and completion queues: the eventfd the daemon writes for an armed
//! CQ, and the CQ ring this process reads without system calls.

use std::os::fd::AsFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rocex_shm::control::{Request, Response};
use rocex_shm::{CqReader, EventFd, ReadError, RingKind, RingSpec, SharedRegion, SleepCheck};
use rocex_verbs_types::WorkCompletion;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::{Channel, Context, Error, Result, map_rings, proto, ring_in};

impl Context {
    /// A completion channel (`ibv_create_comp_channel`).
    pub fn create_comp_channel(&self) -> Result<CompChannel> {
        let (r, mut fds) = self.ch.call(&Request::CreateCompChannel, &[])?;
        match (r, fds.pop()) {
            (Response::CreateCompChannel { channel }, Some(fd)) => Ok(CompChannel {
                id: channel,
                ev: Rc::new(EventFd::from_fd(fd)),
                ch: self.ch.clone(),
            }),
            (r, _) => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// A CQ of at least `cqe` entries, optionally tied to a completion channel. Without
    /// one, a private channel is made so that [`Cq::wait`] always works.
    pub fn create_cq(&self, cqe: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        let channel = match channel {
            Some(c) => c.clone(),
            None => self.create_comp_channel()?,
        };
        let (r, mut fds) = self.ch.call(
            &Request::CreateCq {
                cqe,
                channel: channel.id,
            },
            &[],
        )?;
        let (
            Response::CreateCq {
                cq,
                slots,
                ring_offset,
            },
            Some(fd),
        ) = (r, fds.pop())
        else {
            return Err(proto("bad CreateCq response"));
        };
        let map = map_rings(fd)?;
        let spec = RingSpec::new(RingKind::Cq, slots, 64).map_err(|e| proto(e.to_string()))?;
        let off = usize::try_from(ring_offset).map_err(|_| proto("ring offset"))?;
        ring_in(&map, off, spec)?;
        Ok(Cq {
            ctx: self.clone(),
            cq,
            map,
            spec,
            off,
            head: 0,
            empty_polls: 0,
            channel,
        })
    }
}

/// A completion channel: the eventfd the daemon writes when an armed CQ gets a
/// completion.
#[derive(Debug, Clone)]
pub struct CompChannel {
    id: u32,
    ev: Rc<EventFd>,
    ch: Rc<Channel>,
}

impl CompChannel {
    /// Waits for an event (or `timeout`); true when one came. Waits on the control socket
    /// too: a daemon that dies wakes the waiter with [`Error::DaemonGone`] instead of
    /// leaving it blocked on an eventfd nobody will write.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        if self.ch.closed() {
            return Err(Error::DaemonGone);
        }
        let ts = timeout.map(|t| Timespec {
            tv_sec: t.as_secs() as _,
            tv_nsec: t.subsec_nanos() as _,
        });
        let mut fds = [
            PollFd::new(&*self.ev, PollFlags::IN),
            PollFd::new(&self.ch.sock, PollFlags::IN | PollFlags::RDHUP),
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
        self.ch.gone.set(true);
        Err(Error::DaemonGone)
    }

    /// Writes the channel's eventfd as the daemon does, waking a waiter: for a CQ that
    /// already held completions when it was armed (libibverbs' missed-event report).
    pub fn signal(&self) -> Result<()> {
        self.ev.signal().map_err(Error::Io)
    }

    /// The descriptors an event loop (epoll, tokio's `AsyncFd`) waits on in place of
    /// [`CompChannel::wait`]: the eventfd the daemon writes, and the control socket, which
    /// becomes readable between calls only when the daemon is gone. Once either is ready,
    /// `wait(Some(Duration::ZERO))` drains the eventfd or reports [`Error::DaemonGone`].
    pub fn wait_fds(&self) -> [std::os::fd::BorrowedFd<'_>; 2] {
        [self.ev.as_fd(), self.ch.sock.as_fd()]
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    ctx: Context,
    cq: u32,
    map: SharedRegion,
    spec: RingSpec,
    off: usize,
    head: u32,
    /// Polls in a row that found nothing (see [`EMPTY_POLLS_BEFORE_YIELD`]).
    empty_polls: u32,
    channel: CompChannel,
}

/// Empty polls in a row after which each further empty poll yields the core. A program
/// that spins on its CQ (as perftest's do) would otherwise hold the core the daemon needs
/// to make the completion it waits for: on a machine with fewer cores than spinning
/// threads that wait is the rest of the scheduler's slice, milliseconds, where a yield
/// costs a fraction of a microsecond when nobody else wants the core.
const EMPTY_POLLS_BEFORE_YIELD: u32 = 32;

impl Cq {
    /// The CQ's handle.
    pub fn handle(&self) -> u32 {
        self.cq
    }

    /// Completions waiting in the ring, left there; no system call.
    pub fn pending(&self) -> Result<u32> {
        let ring = ring_in(&self.map, self.off, self.spec)?;
        ring.consumer_at(self.head)
            .available()
            .map_err(|e| Error::BadCompletion(ReadError::Ring(e)))
    }

    /// Whether the CQ is still armed: false once the daemon took the arm (and wrote the
    /// channel), or [`req_notify`](Self::req_notify) found completions already waiting.
    pub fn armed(&self) -> Result<bool> {
        let w = self
            .map
            .view()
            .word(self.off + rocex_shm::layout::ring_off::NEED_WAKEUP)
            .map_err(|e| proto(e.to_string()))?;
        Ok(w.load(Ordering::Acquire) != 0)
    }

    /// The completion channel the CQ signals (its own when it was created without one).
    pub fn channel(&self) -> &CompChannel {
        &self.channel
    }

    /// Takes up to `max` completions (`ibv_poll_cq`); no system call while completions
    /// come, a yield of the core per empty poll after a run of them.
    pub fn poll(&mut self, max: usize) -> Result<Vec<WorkCompletion>> {
        let mut out = Vec::new();
        self.poll_with(max, |wc| out.push(wc))?;
        Ok(out)
    }

    /// Takes up to `max` completions, handing each to `f`, and returns how many it took:
    /// [`poll`](Self::poll) without a vector. A malformed completion ends the batch; it is
    /// an error only when it comes first.
    pub fn poll_with(&mut self, max: usize, mut f: impl FnMut(WorkCompletion)) -> Result<usize> {
        let ring = ring_in(&self.map, self.off, self.spec)?;
        let mut r = CqReader::new(ring.consumer_at(self.head));
        let mut n = 0;
        let mut err = None;
        while n < max {
            match r.poll() {
                Ok(Some(wc)) => {
                    self.head = self.head.wrapping_add(1);
                    n += 1;
                    f(wc);
                }
                Ok(None) => break,
                Err(e @ ReadError::Desc { .. }) => {
                    self.head = self.head.wrapping_add(1);
                    err = Some(e);
                    break;
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        r.ring().release();
        if n == 0 && err.is_none() {
            self.empty_polls = self.empty_polls.saturating_add(1);
            if self.empty_polls > EMPTY_POLLS_BEFORE_YIELD {
                std::thread::yield_now();
            }
        } else {
            self.empty_polls = 0;
        }
        match err {
            Some(e) if n == 0 => Err(Error::BadCompletion(e)),
            _ => Ok(n),
        }
    }

    /// Arms the CQ (`ibv_req_notify_cq`): the next completion writes the channel. Returns
    /// true when completions are already waiting (poll instead of waiting).
    pub fn req_notify(&mut self) -> Result<bool> {
        let ring = ring_in(&self.map, self.off, self.spec)?;
        match ring.consumer_at(self.head).prepare_sleep(1) {
            Ok(SleepCheck::Sleep) => Ok(false),
            Ok(SleepCheck::Ready(_)) => Ok(true),
            Err(e) => Err(Error::BadCompletion(ReadError::Ring(e))),
        }
    }

    /// Arms the CQ and blocks on its completion channel until a completion is there or
    /// `timeout` passes; true when one is there.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool> {
        if self.req_notify()? {
            return Ok(true);
        }
        let r = self.channel.wait(Some(timeout));
        let ring = ring_in(&self.map, self.off, self.spec)?;
        ring.consumer_at(self.head).finish_sleep();
        r
    }

    /// The next completion, polling briefly and then sleeping on the channel; fails with
    /// [`Error::Timeout`].
    pub fn poll_wait(&mut self, timeout: Duration) -> Result<WorkCompletion> {
        let end = Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            if let Some(wc) = self.poll(1)?.pop() {
                return Ok(wc);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout);
            }
            spins += 1;
            if spins < 200 {
                std::hint::spin_loop();
            } else {
                self.wait(left.min(Duration::from_millis(50)))?;
            }
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        let _ = self.ctx.ch.done(&Request::DestroyCq { cq: self.cq });
    }
}
