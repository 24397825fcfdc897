//! Two `rocexd` on loopback addresses for the host's tests against a scripted target
//! (`rocex_testkit::rocexd`: the daemon is built on first use, or `$ROCEXD`).

#![allow(dead_code, unreachable_pub)]

pub use rocex_testkit::rocexd::Daemon;
/// The tests take the addresses in turn.
pub use rocex_testkit::serial;

/// `rocexd` on `addr` at path MTU 1024, once its socket answers.
pub fn daemon(addr: &str) -> Daemon {
    rocex_testkit::rocexd::Rocexd::new(addr)
        .args(["--mtu", "1024"])
        .start()
}
