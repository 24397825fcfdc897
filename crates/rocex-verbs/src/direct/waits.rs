//! What the progress thread sleeps on, and how a caller changes it without waking it: an
//! epoll set of the slot's socket, the wake eventfd, a timerfd and the control connection.
//! The timerfd is set to the engine's next deadline, or, while the application holds the
//! lease (and its turns run the engine's timers), to the lease's end.
//! Re-arming a timerfd or taking the socket out of the set is one syscall in the caller's
//! thread; a write to the eventfd would be a wake-up of the progress thread, which on a
//! busy machine preempts a program that spins.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use rocex_shm::EventFd;

use crate::Result;

/// Which descriptor an epoll event is for (its data word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum Source {
    Socket,
    Wake,
    Timer,
    Daemon,
}

const SOURCES: [Source; 4] = [Source::Socket, Source::Wake, Source::Timer, Source::Daemon];

/// What woke the progress thread.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Woken {
    pub(super) timer: bool,
    pub(super) hangup: bool,
}

/// The progress thread's wait set.
pub(super) struct Waits {
    epoll: OwnedFd,
    /// The progress thread's own descriptor of the slot's socket.
    sock: OwnedFd,
    pub(super) wake: EventFd,
    timer: OwnedFd,
    /// The control connection, registered for its hang-up (kept open while registered).
    _daemon: Option<OwnedFd>,
}

impl Waits {
    /// The set for `sock`, watching `daemon` for a hang-up when there is one.
    pub(super) fn new(sock: OwnedFd, daemon: Option<OwnedFd>) -> Result<Self> {
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        );
        let w = Self {
            epoll: epoll::create(CreateFlags::CLOEXEC).map_err(std::io::Error::from)?,
            sock,
            wake: EventFd::new()?,
            timer: timer.map_err(std::io::Error::from)?,
            _daemon: daemon,
        };
        w.add(&w.sock, Source::Socket, EventFlags::IN)?;
        w.add(&w.wake, Source::Wake, EventFlags::IN)?;
        w.add(&w.timer, Source::Timer, EventFlags::IN)?;
        if let Some(d) = &w._daemon {
            // The daemon writes on the control connection only to answer, and a direct
            // context asks it nothing more: a hang-up is all this can report.
            w.add(d, Source::Daemon, EventFlags::RDHUP)?;
        }
        Ok(w)
    }

    fn add(&self, fd: impl AsFd, src: Source, flags: EventFlags) -> Result<()> {
        epoll::add(&self.epoll, fd, EventData::new_u64(src as u64), flags)
            .map_err(std::io::Error::from)?;
        Ok(())
    }

    /// Sleeps until something in the set is ready, and consumes what woke it.
    pub(super) fn wait(&self) -> Woken {
        let mut buf = [MaybeUninit::<Event>::uninit(); SOURCES.len()];
        let mut woken = Woken::default();
        let Ok((events, _)) = epoll::wait(&self.epoll, &mut buf, None) else {
            return woken;
        };
        for ev in events.iter() {
            let Some(src) = SOURCES.get(ev.data.u64() as usize) else {
                continue;
            };
            match src {
                Source::Socket => {}
                Source::Wake => {
                    let _ = self.wake.drain();
                }
                Source::Timer => woken.timer = drain(&self.timer),
                Source::Daemon => {
                    let hangup = EventFlags::RDHUP | EventFlags::HUP | EventFlags::ERR;
                    let flags = ev.flags;
                    woken.hangup = flags.intersects(hangup);
                }
            }
        }
        woken
    }

    /// Sets the timer to fire `after` from now; `None` disarms it.
    pub(super) fn arm_timer(&self, after: Option<Duration>) {
        arm(&self.timer, after);
    }

    /// The application takes the socket: the progress thread no longer wakes for its
    /// packets.
    pub(super) fn stand_aside(&self) {
        let _ = epoll::delete(&self.epoll, &self.sock);
    }

    /// The socket is the progress thread's again: a packet already waiting wakes it.
    pub(super) fn take_socket_back(&self) {
        let _ = self.add(&self.sock, Source::Socket, EventFlags::IN);
    }
}

/// A one-shot timer `after` from now (at least a nanosecond: zero would disarm it).
fn arm(fd: &OwnedFd, after: Option<Duration>) {
    let value = after.map_or(Duration::ZERO, |d| d.max(Duration::from_nanos(1)));
    let spec = Itimerspec {
        it_interval: to_timespec(Duration::ZERO),
        it_value: to_timespec(value),
    };
    let _ = timerfd_settime(fd, TimerfdTimerFlags::empty(), &spec);
}

/// Reads a timerfd's expiry count: true when it fired.
fn drain(fd: &OwnedFd) -> bool {
    let mut n = [0u8; 8];
    matches!(rustix::io::read(fd, &mut n), Ok(8))
}

fn to_timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}
