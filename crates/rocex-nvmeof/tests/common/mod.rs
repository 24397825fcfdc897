//! Two `rocexd` on loopback addresses for the host's tests against a scripted target
//! (`rocex_testkit::rocexd`: the daemon is built on first use, or `$ROCEXD`).

#![allow(dead_code, unreachable_pub)]

use std::sync::{Mutex, MutexGuard};

pub use rocex_testkit::rocexd::Daemon;

/// `rocexd` on `addr` at path MTU 1024, once its socket answers.
pub fn daemon(addr: &str) -> Daemon {
    rocex_testkit::rocexd::Rocexd::new(addr)
        .args(["--mtu", "1024"])
        .start()
}

/// The tests take the two addresses in turn.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
