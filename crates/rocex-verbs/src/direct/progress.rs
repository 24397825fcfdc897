//! The progress thread: drives the engine when the application does not.

use std::os::fd::OwnedFd;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::Shared;

/// A sleep this long or longer means no timer: wait for a packet or the wake eventfd.
const FOREVER: Duration = Duration::from_secs(3600);

/// Turns whenever a packet, a timer or the wake eventfd calls for it, until told to stop
/// or until `daemon` (the control connection that holds the grant) hangs up: then the
/// engine and its socket go, and the slot's address is the daemon's again.
pub(super) fn run(shared: &Shared, sock: OwnedFd, daemon: Option<OwnedFd>) {
    let mut gone = false;
    while !shared.stop.load(Ordering::Acquire) {
        // A blocking wait, not a try-and-back-off: the program holds the lock for one
        // turn at most and never blocks under it, and on a busy machine the holder is
        // often the thread this one's wake-up preempted, so a spin or a sleep here waits
        // on a thread that is not running (measured: docs/verbs.md, "Direct mode").
        let mut guard = shared.core.lock().unwrap_or_else(PoisonError::into_inner);
        if gone {
            *guard = None;
            return;
        }
        let Some(core) = guard.as_mut() else {
            return;
        };
        core.turn();
        let sleep = core.driver.timeout(FOREVER);
        core.wakes_at = (sleep < FOREVER).then(|| core.driver.now() + sleep);
        drop(guard);
        if sleep.is_zero() {
            continue;
        }
        let ts = (sleep < FOREVER).then(|| Timespec {
            tv_sec: sleep.as_secs() as _,
            tv_nsec: sleep.subsec_nanos() as _,
        });
        // The daemon writes on the control connection only to answer, and a direct
        // context asks it nothing more: a hang-up is all this can report.
        let hangup = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
        let mut fds = [
            PollFd::new(&sock, PollFlags::IN),
            PollFd::new(&shared.wake, PollFlags::IN),
            PollFd::new(daemon.as_ref().unwrap_or(&sock), PollFlags::RDHUP),
        ];
        let n = if daemon.is_some() { 3 } else { 2 };
        if matches!(poll(&mut fds[..n], ts.as_ref()), Ok(k) if k > 0) {
            if !fds[1].revents().is_empty() {
                let _ = shared.wake.drain();
            }
            gone = n == 3 && fds[2].revents().intersects(hangup);
        }
    }
}
