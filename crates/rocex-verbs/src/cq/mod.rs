//! Completion queues: a ring rocexd fills ([`ring`]), or a CQ of a direct context's engine,
//! polled by running the engine in the caller's thread; and their completion channels.

mod channel;
mod ring;

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rocex_verbs_types::WorkCompletion;

use crate::direct::{Host, Notify};
use crate::{AnswerWait, Context, Dev, Error, Lingered, Result};
pub use channel::CompChannel;
use ring::RingCq;

impl Context {
    /// A CQ of at least `cqe` entries, optionally tied to a completion channel. Without
    /// one, a private channel is made so that [`Cq::wait`] always works.
    pub fn create_cq(&self, cqe: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        let channel = match channel {
            Some(c) => c.clone(),
            None => self.create_comp_channel()?,
        };
        let (cq, imp) = match &self.dev {
            Dev::Daemon(ch) => {
                let (cq, ring) = RingCq::create(ch, cqe, channel.id)?;
                (cq, Imp::Ring(ring))
            }
            Dev::Direct(h) => {
                let cq = h.create_cq(cqe)?;
                let armed = Arc::new(AtomicBool::new(false));
                let ev = channel.ev.clone();
                h.watch_cq(
                    cq,
                    Notify {
                        ev,
                        armed: armed.clone(),
                    },
                )?;
                (
                    cq,
                    Imp::Local {
                        host: h.clone(),
                        armed,
                    },
                )
            }
        };
        Ok(Cq {
            cq,
            imp,
            empty_polls: 0,
            channel,
        })
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct Cq {
    cq: u32,
    imp: Imp,
    /// Polls in a row that found nothing (see [`EMPTY_POLLS_BEFORE_YIELD`]).
    empty_polls: u32,
    channel: CompChannel,
}

/// Where the CQ's completions are.
#[derive(Debug)]
enum Imp {
    /// In a ring rocexd writes.
    Ring(RingCq),
    /// In the engine of a direct context; `armed` is cleared when an event takes the arm.
    Local {
        host: Rc<Host>,
        armed: Arc<AtomicBool>,
    },
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

    /// Completions waiting, left there; no system call on the daemon's rings.
    pub fn pending(&self) -> Result<u32> {
        match &self.imp {
            Imp::Ring(r) => r.pending(),
            Imp::Local { host, .. } => host.cq_len(self.cq),
        }
    }

    /// Gives the CQ room for at least `cqe` completions (`ibv_resize_cq`): the completions
    /// waiting are still taken first, and an arm carries over. Fewer entries than
    /// completions waiting is EINVAL, as rxe refuses it (`rxe_cq_chk_attr`), and so is
    /// more than the device's `max_cqe`.
    pub fn resize(&mut self, cqe: u32) -> Result<()> {
        let waiting = self.pending()?;
        if cqe == 0 || cqe < waiting {
            return Err(Error::Daemon {
                errno: 22,
                detail: format!("{cqe} CQ entries for {waiting} completions waiting"),
            });
        }
        match &mut self.imp {
            Imp::Ring(r) => r.resize(self.cq, cqe),
            Imp::Local { host, .. } => host.resize_cq(self.cq, cqe),
        }
    }

    /// Whether the CQ is still armed: false once the device took the arm (and wrote the
    /// channel), or [`req_notify`](Self::req_notify) found completions already waiting.
    pub fn armed(&self) -> Result<bool> {
        match &self.imp {
            Imp::Ring(r) => r.armed(),
            Imp::Local { armed, .. } => Ok(armed.load(Ordering::Acquire)),
        }
    }

    /// The completion channel the CQ signals (its own when it was created without one).
    pub fn channel(&self) -> &CompChannel {
        &self.channel
    }

    /// Takes up to `max` completions (`ibv_poll_cq`); no system call while completions
    /// come from the daemon's ring, a yield of the core per empty poll after a run of them.
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
        if let Some(w) = self.answer_wait() {
            self.lingered(w.run());
        }
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
    /// On a direct context it first runs one turn of the engine in the caller's thread.
    pub fn take_with(&mut self, max: usize, mut f: impl FnMut(WorkCompletion)) -> Result<usize> {
        match &mut self.imp {
            Imp::Ring(r) => r.take_with(max, f),
            Imp::Local { host, .. } => host.poll_cq(self.cq, max, &mut f),
        }
    }

    /// After a poll that took completions from rocexd's ring, the last a SEND's or a
    /// WRITE's: a wait, yielding the core, for the peer's answer to land in this
    /// process's memory, when the peer has sent nothing since the request was posted
    /// (`docs/verbs.md`, "Lingering on the daemon path"). [`poll`](Self::poll) runs it;
    /// a caller of [`take_with`](Self::take_with) runs it without its locks and hands
    /// the result to [`lingered`](Self::lingered). A direct context's poll lingers
    /// itself: `None`.
    pub fn answer_wait(&mut self) -> Option<AnswerWait> {
        match &mut self.imp {
            Imp::Ring(r) => r.answer_wait(),
            Imp::Local { .. } => None,
        }
    }

    /// A wait [`answer_wait`](Self::answer_wait) gave has run: the next ones' window,
    /// and their backing off when it was in vain.
    pub fn lingered(&mut self, l: Lingered) {
        if let Imp::Ring(r) = &self.imp {
            r.lingered(l);
        }
    }

    /// Arms the CQ (`ibv_req_notify_cq`): the next completion writes the channel. Returns
    /// true when completions are already waiting (poll instead of waiting).
    pub fn req_notify(&mut self) -> Result<bool> {
        match &mut self.imp {
            Imp::Ring(r) => r.req_notify(),
            Imp::Local { host, .. } => host.arm_cq(self.cq),
        }
    }

    /// Takes the arm as the device takes it when a completion comes ([`armed`](Self::armed)
    /// then reads false): for a completion the client made itself, whose event the
    /// channel then owes. The caller writes the channel.
    pub fn take_arm(&mut self) -> Result<()> {
        match &mut self.imp {
            Imp::Ring(r) => r.take_arm(),
            Imp::Local { armed, .. } => {
                armed.store(false, Ordering::Release);
                Ok(())
            }
        }
    }

    /// Arms the CQ and blocks on its completion channel until a completion is there or
    /// `timeout` passes; true when one is there.
    pub fn wait(&mut self, timeout: Duration) -> Result<bool> {
        if self.req_notify()? {
            return Ok(true);
        }
        let r = self.channel.wait(Some(timeout));
        self.take_arm()?;
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
        let _ = match &self.imp {
            Imp::Ring(r) => r.destroy(self.cq),
            Imp::Local { host, .. } => host.destroy_cq(self.cq),
        };
    }
}
