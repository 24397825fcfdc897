//! The progress thread: drives the engine when the application does not.

use std::sync::atomic::Ordering;
use std::time::Duration;

use rocex_proto::Instant;

use super::lease::{LEASE, Lease};
use super::{Shared, lock};

/// A sleep this long or longer means no timer: wait for a packet or the wake eventfd.
const FOREVER: Duration = Duration::from_secs(3600);

/// How long the thread keeps turning after the last packet it took for a program that
/// neither polls nor drives its engine ([`spin`]).
const SPIN: Duration = Duration::from_micros(50);

/// Turns whenever a packet or the engine's timer calls for it, until told to stop or until
/// the control connection that holds the grant hangs up: then the engine and its socket
/// go, and the slot's address is the daemon's again. While the application holds the lease
/// it does nothing, and takes the socket and the timers back when the lease ends.
pub(super) fn run(shared: &Shared) {
    let w = &shared.waits;
    loop {
        let woken = w.wait();
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        // A blocking wait, not a try-and-back-off: the program holds the lock for one
        // turn at most and never blocks under it, and on a busy machine the holder is
        // often the thread this one's wake-up preempted, so a spin or a sleep here waits
        // on a thread that is not running (measured: docs/verbs.md, "Direct mode").
        let mut guard = lock(&shared.core);
        if woken.hangup {
            *guard = None;
            return;
        }
        let Some(core) = guard.as_mut() else {
            return;
        };
        if woken.timer && core.lease_timer(w) {
            continue;
        }
        // A packet that woke this thread just as the application took the lease is the
        // application's to take. Any other turn ends a lease given back: the timerfd is
        // the engine's again.
        if let Lease::Held(_) = core.lease {
            continue;
        }
        let now = core.driver.now();
        let passive = core.lease == Lease::Free && !core.drives_within(now, LEASE);
        core.lease = Lease::Free;
        if core.turn_heard() && passive {
            let until = core.driver.now() + SPIN;
            drop(guard);
            spin(shared, until);
            guard = lock(&shared.core);
        }
        let Some(core) = guard.as_mut() else {
            return;
        };
        if core.lease != Lease::Free {
            continue;
        }
        let now = core.driver.now();
        core.board_tick(now);
        let board = core.board_due.map_or(FOREVER, |t| t.since(now));
        let sleep = core.driver.timeout(FOREVER).min(board);
        let armed = (sleep < FOREVER).then_some(sleep);
        core.wakes_at = armed.map(|d| core.driver.now() + d);
        w.arm_timer(armed);
    }
}

/// Keeps turning while packets come, until none has come for [`SPIN`] (`until`: the last
/// one's time plus that), the program takes the lease, or the thread is told to stop. Run
/// after a turn that took packets while the program neither polled nor drove its engine:
/// a passive responder (`ib_read_lat`'s server answers READs, `ib_write_bw`'s
/// acknowledges) whose next request, a round trip away, would otherwise be a wake-up from
/// epoll, which on a halted virtual CPU costs tens of microseconds (`docs/verbs.md`,
/// "Direct mode"). The lock is free between turns.
fn spin(shared: &Shared, mut until: Instant) {
    while !shared.stop.load(Ordering::Acquire) {
        let mut guard = lock(&shared.core);
        let Some(core) = guard.as_mut() else {
            return;
        };
        if core.lease != Lease::Free {
            return;
        }
        if core.turn_heard() {
            core.spun += 1;
            until = core.driver.now() + SPIN;
        } else if core.driver.now() >= until {
            return;
        }
        drop(guard);
        std::hint::spin_loop();
    }
}
