//! Completion channels and completion queues: the eventfd the daemon writes for an armed
//! CQ, and the CQ ring this process reads without system calls.

use std::collections::VecDeque;
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
            retired: VecDeque::new(),
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
    /// Rings [`Cq::resize`] replaced, oldest first, each read to its end before the next.
    retired: VecDeque<Retired>,
}

/// A CQ ring that a resize replaced: the daemon writes no more into it, and the
/// completions it still holds come before any of the new ring's.
#[derive(Debug)]
struct Retired {
    map: SharedRegion,
    spec: RingSpec,
    off: usize,
    head: u32,
}

/// Completions waiting in a CQ ring from `head`.
fn available(map: &SharedRegion, off: usize, spec: RingSpec, head: u32) -> Result<u32> {
    let ring = ring_in(map, off, spec)?;
    ring.consumer_at(head)
        .available()
        .map_err(|e| Error::BadCompletion(ReadError::Ring(e)))
}

/// Takes up to `max` completions from a CQ ring at `head`, handing each to `f`: how many,
/// and the malformed completion that ended the batch, if one did.
fn drain(
    map: &SharedRegion,
    off: usize,
    spec: RingSpec,
    head: &mut u32,
    max: usize,
    f: &mut impl FnMut(WorkCompletion),
) -> Result<(usize, Option<ReadError>)> {
    let ring = ring_in(map, off, spec)?;
    let mut r = CqReader::new(ring.consumer_at(*head));
    let mut n = 0;
    let mut err = None;
    while n < max {
        match r.poll() {
            Ok(Some(wc)) => {
                *head = head.wrapping_add(1);
                n += 1;
                f(wc);
            }
            Ok(None) => break,
            Err(e @ ReadError::Desc { .. }) => {
                *head = head.wrapping_add(1);
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
    Ok((n, err))
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

    /// Completions waiting in the ring (and in rings a resize replaced), left there; no
    /// system call.
    pub fn pending(&self) -> Result<u32> {
        let mut n = available(&self.map, self.off, self.spec, self.head)?;
        for r in &self.retired {
            n = n.saturating_add(available(&r.map, r.off, r.spec, r.head)?);
        }
        Ok(n)
    }

    /// Gives the CQ room for at least `cqe` completions (`ibv_resize_cq`): rocexd makes a
    /// new ring, the completions waiting in the old one are still taken first, and an arm
    /// carries over. Fewer entries than completions waiting is EINVAL, as rxe refuses it
    /// (`rxe_cq_chk_attr`), and so is more than the device's `max_cqe`.
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        let waiting = self.pending()?;
        if cqe == 0 || cqe < waiting {
            return Err(Error::Daemon {
                errno: 22,
                detail: format!("{cqe} CQ entries for {waiting} completions waiting"),
            });
        }
        let armed = self.armed()?;
        let (r, mut fds) = self
            .ctx
            .ch
            .call(&Request::ResizeCq { cq: self.cq, cqe }, &[])?;
        let (Response::ResizeCq { slots, ring_offset }, Some(fd)) = (r, fds.pop()) else {
            return Err(proto("bad ResizeCq response"));
        };
        let map = map_rings(fd)?;
        let spec = RingSpec::new(RingKind::Cq, slots, 64).map_err(|e| proto(e.to_string()))?;
        let off = usize::try_from(ring_offset).map_err(|_| proto("ring offset"))?;
        ring_in(&map, off, spec)?;
        let old = Retired {
            map: std::mem::replace(&mut self.map, map),
            spec: std::mem::replace(&mut self.spec, spec),
            off: std::mem::replace(&mut self.off, off),
            head: std::mem::replace(&mut self.head, 0),
        };
        self.retired.push_back(old);
        if armed {
            self.req_notify()?;
        }
        Ok(())
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
    pub fn poll_with(&mut self, max: usize, f: impl FnMut(WorkCompletion)) -> Result<usize> {
        let r = self.take_with(max, f);
        if matches!(r, Ok(0)) {
            self.empty_polls = self.empty_polls.saturating_add(1);
            if self.empty_polls > EMPTY_POLLS_BEFORE_YIELD {
                std::thread::yield_now();
            }
        } else {
            self.empty_polls = 0;
        }
        r
    }

    /// [`poll_with`](Self::poll_with) without its yields, for a caller that has its own
    /// policy for empty polls (the drop-in libibverbs yields without its context's lock).
    pub fn take_with(&mut self, max: usize, mut f: impl FnMut(WorkCompletion)) -> Result<usize> {
        let mut n = 0;
        let mut err = None;
        // Rings a resize replaced first: the daemon writes no more into them, so one that
        // gives fewer than asked is done with.
        while let Some(old) = self.retired.front_mut() {
            let (k, e) = drain(&old.map, old.off, old.spec, &mut old.head, max - n, &mut f)?;
            n += k;
            err = e;
            if n == max || err.is_some() {
                break;
            }
            self.retired.pop_front();
        }
        if n < max && err.is_none() {
            let (k, e) = drain(
                &self.map,
                self.off,
                self.spec,
                &mut self.head,
                max - n,
                &mut f,
            )?;
            n += k;
            err = e;
        }
        match err {
            Some(e) if n == 0 => Err(Error::BadCompletion(e)),
            _ => Ok(n),
        }
    }

    /// Arms the CQ (`ibv_req_notify_cq`): the next completion writes the channel. Returns
    /// true when completions are already waiting (poll instead of waiting).
    pub fn req_notify(&mut self) -> Result<bool> {
        for r in &self.retired {
            if available(&r.map, r.off, r.spec, r.head)? > 0 {
                return Ok(true);
            }
        }
        let ring = ring_in(&self.map, self.off, self.spec)?;
        match ring.consumer_at(self.head).prepare_sleep(1) {
            Ok(SleepCheck::Sleep) => Ok(false),
            Ok(SleepCheck::Ready(_)) => Ok(true),
            Err(e) => Err(Error::BadCompletion(ReadError::Ring(e))),
        }
    }

    /// Takes the arm as the daemon takes it when a completion comes ([`armed`](Self::armed)
    /// then reads false): for a completion the client made itself, whose event the
    /// channel then owes. The caller writes the channel.
    pub fn take_arm(&mut self) -> Result<()> {
        let ring = ring_in(&self.map, self.off, self.spec)?;
        ring.consumer_at(self.head).finish_sleep();
        Ok(())
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
