//! What the tests that run `rocexd` share: the daemon of `rocex_testkit::rocexd` (built
//! next to the `rocex` under test, or `$ROCEXD`).

// Each test binary uses its own part.
#![allow(dead_code, unused_imports)]

pub(crate) use rocex_testkit::rocexd::{Daemon, Rocexd};

/// `rocexd` on `addr` with `extra` options, on a socket of its own, once it answers.
pub(crate) fn daemon(addr: &str, extra: &[&str]) -> Daemon {
    Rocexd::new(addr).args(extra).start()
}
