//! The direct data path: the engine runs in this process, one per [`Context`](crate::Context),
//! and the thread that calls a verb drives it (`docs/verbs.md`, "Direct mode").
//!
//! A [`Host`] holds the engine on its UDP port behind one mutex. Posting runs the engine's
//! turn in the poster's thread, so a request leaves without crossing to another thread;
//! polling a CQ runs a turn and then takes completions. A progress thread per host sleeps
//! in epoll on the socket, a wake eventfd and a timerfd at the engine's next deadline, and
//! takes a turn when the application does not: a
//! passive responder that posts and polls nothing still acknowledges, and a WRITE lands in
//! memory the application only watches. While the application polls and finds nothing
//! (it holds the lease) the socket is out of the thread's set and the timerfd waits for
//! the lease's end: the poller takes the packets and runs the timers, and nothing wakes a
//! second thread to contend for the lock. It uses no CPU while the device is idle.

mod board;
mod cm;
pub(crate) mod grant;
mod lease;
mod linger;
mod objects;
mod open;
mod progress;
pub(crate) mod region;
mod waits;

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use rocex_io::Driver;
use rocex_proto::{Event, Instant};
use rocex_shm::{Board, EventFd};

use self::cm::CmIds;
pub(crate) use self::cm::Seen;
use self::lease::{LEASE, Lease};
use self::linger::Linger;
use self::waits::Waits;
use crate::{Channel, Error, Result};

/// How long after a program's own step a CQ poll takes completions without receiving
/// again ([`Core::poll_turn`]).
const FRESH: Duration = Duration::from_micros(2);

/// An engine in this process, its progress thread and, when rocexd granted it, the
/// control connection that holds the grant.
pub(crate) struct Host {
    shared: Arc<Shared>,
    progress: Option<JoinHandle<()>>,
    /// The connection to rocexd that asked for the slot: it keeps the slot ours, and its
    /// hang-up says the daemon is gone. `None` for an engine started without a daemon.
    pub(crate) ctl: Option<Channel>,
    /// Never written: what a waiter watches in place of the control socket when there is
    /// no daemon to lose.
    quiet: EventFd,
    /// The connection ids of rdma_cm on this context, whose QPs this process moves.
    cm: RefCell<CmIds>,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("daemon", &self.ctl.is_some())
            .finish_non_exhaustive()
    }
}

/// What the host and its progress thread share.
struct Shared {
    /// The engine; `None` once the daemon that granted it is gone, which ends the grant:
    /// the engine and its socket are dropped and every verb answers
    /// [`Error::DaemonGone`], as on the daemon path.
    core: Mutex<Option<Core>>,
    /// What the progress thread sleeps on; its eventfd wakes it to stop.
    waits: Waits,
    stop: AtomicBool,
}

/// The engine and what its events are delivered to.
pub(crate) struct Core {
    pub(crate) driver: Driver,
    /// The completion channel and arm of each CQ, which the engine's `CqNotify` writes.
    notify: HashMap<u32, Notify>,
    /// When the progress thread's timerfd fires next (`None`: disarmed): at the engine's
    /// next deadline, which a caller that leaves an earlier one re-arms it for, or during
    /// a lease at about its end.
    wakes_at: Option<Instant>,
    /// Who has the socket and the timerfd: the progress thread, or the application that
    /// polls.
    lease: Lease,
    /// When the application last drove its own waits
    /// ([`Context::progress`](crate::Context::progress)): it drives them for a lease after
    /// ([`Core::drives_within`]).
    driven_at: Option<Instant>,
    /// Whether a poll that took a request's completion waits for the peer's answer.
    linger: Linger,
    /// Turns of the progress thread's spin that took packets (`progress::spin`).
    spun: u64,
    /// Send posts left for the next poll to send ([`Core::corks`]).
    corked: u64,
    /// The QP board rocexd reads (a granted engine's), and when it is next copied to
    /// (`None`: it shows the engine as it is).
    board: Option<Board>,
    board_due: Option<Instant>,
}

/// A CQ's completion channel and whether it is armed.
#[derive(Debug, Clone)]
pub(crate) struct Notify {
    pub(crate) ev: Arc<EventFd>,
    pub(crate) armed: Arc<AtomicBool>,
}

impl Core {
    /// One turn of the engine (send, receive, timers, send), then its events: each armed
    /// CQ that got a completion has its arm taken and its channel written. An I/O error
    /// is a lost packet, which the transport recovers; the turn is not repeated for it.
    pub(crate) fn turn(&mut self) {
        self.driver.busy_poll(false);
        let _ = self.driver.turn();
        self.deliver_events();
    }

    /// One step of a program that drives its own waits, as a busy-polling engine in the
    /// program's process steps (`Driver::step`): what is waiting is sent, then what came is
    /// received; the ACKs it calls for leave with the next post or step, in one batch with
    /// the program's answer.
    pub(super) fn step(&mut self) {
        self.driver.busy_poll(true);
        let _ = self.driver.step();
        self.deliver_events();
    }

    /// What a CQ poll runs first: nothing within [`FRESH`] of the program's own step (it
    /// received a moment ago; a loop of progress, poll and a look at its memory then
    /// costs one receive, not three), a step while it drives its waits, else a turn.
    pub(crate) fn poll_turn(&mut self) {
        let now = self.driver.now();
        self.linger.came_back(now);
        self.board_tick(now);
        if self.drives_within(now, FRESH) {
            return;
        }
        if self.drives_within(now, LEASE) {
            self.step();
        } else {
            self.turn();
        }
    }

    /// Whether the application drove its own waits less than `d` before `now`.
    fn drives_within(&self, now: Instant, d: Duration) -> bool {
        self.driven_at.is_some_and(|t| now < t + d)
    }

    /// What a post calls for: its packets sent at once unless `corked`, nothing received
    /// (the next poll or the progress thread does that, so a burst of posts is not a burst
    /// of empty receives), and the events of what completed at once (a post to a QP in
    /// error).
    pub(crate) fn after_post(&mut self, corked: bool) {
        let now = self.driver.now();
        self.linger.came_back(now);
        self.board_tick(now);
        if corked {
            self.corked += 1;
        } else {
            let _ = self.driver.send_now();
        }
        self.deliver_events();
    }

    /// The engine's events: each armed CQ that got a completion has its arm taken and its
    /// channel written.
    fn deliver_events(&mut self) {
        while let Some(ev) = self.driver.engine.poll_event() {
            if let Event::CqNotify(cq) = ev
                && let Some(n) = self.notify.get(&cq)
            {
                n.armed.store(false, Ordering::Release);
                let _ = n.ev.signal();
            }
        }
    }
}

impl Host {
    /// Starts the progress thread for the engine on `driver`; `ctl` is the connection to
    /// rocexd that granted it, if one did, and `board` the QP board that came with it.
    pub(crate) fn start(
        driver: Driver,
        ctl: Option<Channel>,
        board: Option<Board>,
    ) -> Result<Self> {
        let sock = dup(driver.fd())?;
        let daemon = ctl.as_ref().map(|c| dup(&c.sock)).transpose()?;
        let shared = Arc::new(Shared {
            core: Mutex::new(Some(Core {
                driver,
                notify: HashMap::new(),
                wakes_at: None,
                lease: Lease::Free,
                driven_at: None,
                linger: Linger::default(),
                spun: 0,
                corked: 0,
                board,
                board_due: None,
            })),
            waits: Waits::new(sock, daemon)?,
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let progress = with_signals_blocked(|| {
            std::thread::Builder::new()
                .name("rocex-progress".into())
                .spawn(move || progress::run(&s))
        })?;
        Ok(Self {
            shared,
            progress: Some(progress),
            ctl,
            quiet: EventFd::new()?,
            cm: RefCell::default(),
        })
    }

    /// Runs `f` on the engine in the caller's thread, and re-arms the progress thread's
    /// timer when `f` left an earlier one. [`Error::DaemonGone`] once the daemon that
    /// granted the engine is gone.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Core) -> T) -> Result<T> {
        self.with_waits(|c, _| f(c))
    }

    /// [`with`](Self::with), `f` also given the wait set (to take or give up the lease).
    fn with_waits<T>(&self, f: impl FnOnce(&mut Core, &Waits) -> T) -> Result<T> {
        enter(lock(&self.shared.core), &self.shared.waits, f)
    }

    /// One turn in the caller's thread if no other thread holds the engine, counted as an
    /// empty poll: the caller holds the lease ([`Context::progress`](crate::Context::progress)).
    pub(crate) fn progress(&self) -> Result<()> {
        let guard = match self.shared.core.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // The holder is turning the engine now.
            Err(TryLockError::WouldBlock) => return Ok(()),
        };
        enter(guard, &self.shared.waits, |c, w| {
            c.linger.came_back(c.driver.now());
            c.step();
            c.drive(w);
        })
    }

    /// [`with`](Self::with) for a control verb, which also asks the kernel whether the
    /// daemon hung up (one poll(2)): a verb after the daemon's death fails at once, as
    /// on the daemon path, where the data path learns it from the progress thread.
    pub(crate) fn control<T>(&self, f: impl FnOnce(&mut Core) -> T) -> Result<T> {
        if self.daemon_gone() {
            return Err(Error::DaemonGone);
        }
        self.with(|c| {
            let r = f(c);
            c.publish();
            r
        })
    }

    /// Registers `cq`'s channel and arm for the engine's events.
    pub(crate) fn watch_cq(&self, cq: u32, n: Notify) -> Result<()> {
        self.with(|c| c.notify.insert(cq, n)).map(drop)
    }

    /// What a waiter watches for the daemon's loss: the control socket, or, with no
    /// daemon, a descriptor that never becomes readable.
    pub(crate) fn liveness_fd(&self) -> BorrowedFd<'_> {
        match &self.ctl {
            Some(ch) => ch.sock.as_fd(),
            None => self.quiet.as_fd(),
        }
    }

    /// True when the daemon that granted the engine is gone.
    pub(crate) fn daemon_gone(&self) -> bool {
        lock(&self.shared.core).is_none() || self.ctl.as_ref().is_some_and(Channel::closed)
    }

    /// Marks the daemon gone (a waiter saw its socket hang up).
    pub(crate) fn set_gone(&self) {
        if let Some(ch) = &self.ctl {
            ch.gone.set(true);
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        let _ = self.shared.waits.wake.signal();
        if let Some(t) = self.progress.take() {
            let _ = t.join();
        }
    }
}

/// The core, whoever held it last: a caller that panicked while holding it left the
/// engine's tables consistent (each verb is one engine call).
fn lock(m: &Mutex<Option<Core>>) -> MutexGuard<'_, Option<Core>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs `f` on the engine `guard` holds, then re-arms the timer it left earlier.
fn enter<T>(
    mut guard: MutexGuard<'_, Option<Core>>,
    w: &Waits,
    f: impl FnOnce(&mut Core, &Waits) -> T,
) -> Result<T> {
    let Some(core) = guard.as_mut() else {
        return Err(Error::DaemonGone);
    };
    let r = f(core, w);
    core.arm_earlier_timer(w);
    Ok(r)
}

/// Runs `f` with every signal blocked in the calling thread, whose mask the progress thread
/// `f` starts inherits, then restores the caller's mask. A signal raised at the process
/// goes to a thread that does not block it: a program that blocks one to take it from a
/// signalfd (tgtd: SIGUSR2) would otherwise be killed by its default action in this
/// library's thread.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data that sigfillset initialises; pthread_sigmask reads
    // `all` and writes `old`, both live locals.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

/// A descriptor of the progress thread's own for `fd`.
fn dup(fd: impl AsFd) -> Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(std::io::Error::from)?)
}
