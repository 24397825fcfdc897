//! Two network namespaces joined by a veth pair (MTU 9000), made by [`Net::up`] and
//! removed on drop, with a `rocexd` in each. The daemons run under `ip netns exec`; their
//! control sockets are files, so the clients (the test, its children and `rocex perf`)
//! stay in the root namespace.
//!
//! Needs root and `ip`: without them [`Net::up`] records why (`rocex_testkit::cannot_run`:
//! a failure in CI, a `SKIPPED:` notice elsewhere). The tests of one binary share its
//! names and addresses, so they run one at a time.

use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};

use super::{Daemon, rocexd};

/// The names and addresses of one test binary's pair of namespaces.
pub(crate) struct Layout {
    pub(crate) ns: [&'static str; 2],
    pub(crate) veth: [&'static str; 2],
    /// In 198.18.0.0/15, one /24 per layout.
    pub(crate) addr: [&'static str; 2],
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `cmd`, panicking with its stderr when it fails.
pub(crate) fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn ip(args: &[&str]) -> Output {
    run(Command::new("ip").args(args))
}

/// Why this machine cannot run the tests, if it cannot.
fn missing() -> Option<&'static str> {
    if !rocex_testkit::is_root() {
        return Some("root (network namespaces)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` (iproute2)");
    }
    None
}

/// The namespaces and the veth pair, removed on drop; holding it serializes the tests.
pub(crate) struct Net {
    layout: &'static Layout,
    _serial: MutexGuard<'static, ()>,
}

impl Net {
    /// `None` when the machine lacks what `test` needs (`rocex_testkit::cannot_run`).
    pub(crate) fn up(test: &str, layout: &'static Layout) -> Option<Self> {
        if let Some(what) = missing() {
            rocex_testkit::cannot_run(test, what);
            return None;
        }
        let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        remove_namespaces(layout);
        let net = Self {
            layout,
            _serial: serial,
        };
        for ns in layout.ns {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        let [v0, v1] = layout.veth;
        let [n0, n1] = layout.ns;
        ip(&[
            "link", "add", v0, "netns", n0, "type", "veth", "peer", "name", v1, "netns", n1,
        ]);
        for i in 0..2 {
            let (ns, dev) = (layout.ns[i], layout.veth[i]);
            let cidr = format!("{}/24", layout.addr[i]);
            ip(&["-n", ns, "addr", "add", &cidr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "mtu", "9000", "up"]);
        }
        Some(net)
    }

    /// Starts the daemon of side `i` on `backend` in its namespace; panics with the
    /// daemon's own words when it does not come up (an unknown backend, a bind error).
    pub(crate) fn daemon(&self, i: usize, backend: &str) -> Daemon {
        rocexd(self.layout.addr[i])
            .netns(self.layout.ns[i])
            .tag(&format!("{}-{i}", self.layout.ns[i]))
            .args(["--backend", backend])
            .start()
    }

    /// Both daemons on `backend`.
    pub(crate) fn daemons(&self, backend: &str) -> [Daemon; 2] {
        [self.daemon(0, backend), self.daemon(1, backend)]
    }
}

/// Deleting a namespace deletes the veth end in it, and with it the pair.
fn remove_namespaces(layout: &Layout) {
    for ns in layout.ns {
        let _ = Command::new("ip")
            .args(["netns", "del", ns])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        remove_namespaces(self.layout);
    }
}
