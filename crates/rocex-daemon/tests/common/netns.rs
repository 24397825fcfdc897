//! Two network namespaces joined by a veth pair (MTU 9000, `rocex_testkit::veth`), made by
//! [`Net::up`] and removed on drop, with a `rocexd` in each. The daemons run under `ip
//! netns exec`; their control sockets are files, so the clients (the test, its children
//! and `rocex perf`) stay in the root namespace.
//!
//! Needs root and `ip`: without them [`Net::up`] records why (`rocex_testkit::cannot_run`:
//! a failure in CI, a `SKIPPED:` notice elsewhere). The tests of one binary share its
//! names and addresses, so they run one at a time.

use std::sync::{Mutex, MutexGuard};

pub(crate) use rocex_testkit::veth::Layout;
use rocex_testkit::veth::VethPair;

use super::{Daemon, Rocexd, rocexd};

static SERIAL: Mutex<()> = Mutex::new(());

/// The namespaces and the veth pair, removed on drop; holding it serializes the tests.
pub(crate) struct Net {
    pair: VethPair,
    _serial: MutexGuard<'static, ()>,
}

impl Net {
    /// `None` when the machine lacks what `test` needs (`rocex_testkit::cannot_run`).
    pub(crate) fn up(test: &str, layout: &'static Layout) -> Option<Self> {
        Self::up_with_mtu(test, layout, 9000)
    }

    /// [`up`](Self::up) with a link MTU of `mtu` bytes.
    pub(crate) fn up_with_mtu(test: &str, layout: &'static Layout, mtu: u32) -> Option<Self> {
        let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        Some(Self {
            pair: VethPair::up(test, *layout, mtu)?,
            _serial: serial,
        })
    }

    /// The daemon of side `i`, on its address in its namespace, to be given its flags and
    /// started.
    pub(crate) fn rocexd(&self, i: usize) -> Rocexd {
        let l = self.pair.layout();
        rocexd(l.addr[i])
            .netns(l.ns[i])
            .tag(&format!("{}-{i}", l.ns[i]))
    }

    /// Starts the daemon of side `i` on `backend` in its namespace; panics with the
    /// daemon's own words when it does not come up (an unknown backend, a bind error).
    pub(crate) fn daemon(&self, i: usize, backend: &str) -> Daemon {
        self.rocexd(i).args(["--backend", backend]).start()
    }

    /// Both daemons on `backend`.
    pub(crate) fn daemons(&self, backend: &str) -> [Daemon; 2] {
        [self.daemon(0, backend), self.daemon(1, backend)]
    }

    /// Both daemons on `backend`, granting no direct slots (`super::ring_daemon`).
    pub(crate) fn ring_daemons(&self, backend: &str) -> [Daemon; 2] {
        let side = |i| {
            self.rocexd(i)
                .daemon_path()
                .args(["--backend", backend])
                .start()
        };
        [side(0), side(1)]
    }
}
