//! Two rocex hosts: two network namespaces joined by a veth pair (MTU 9000), each test its
//! own names and /24 in 198.18.0.0/15, a rocexd in either when asked, and commands run
//! inside each as on two machines. Needs root and `ip`.

use std::process::Command;

use rocex_testkit::rocexd::Rocexd;
/// The namespaces, veth ends and addresses of one pair.
pub(crate) use rocex_testkit::veth::Layout as Pair;
use rocex_testkit::veth::VethPair;

use super::bins;

/// A pair that is up, removed on drop.
pub(crate) struct Net(VethPair);

impl Net {
    /// Makes the namespaces and the link (after removing what a killed run left), or records
    /// the skip (a failure under `CI`) without root or `ip`.
    pub(crate) fn up(p: &Pair, test: &str) -> Option<Self> {
        VethPair::up(test, *p, 9000).map(Self)
    }

    /// The pair's names and addresses.
    pub(crate) fn pair(&self) -> &Pair {
        self.0.layout()
    }

    /// `ip netns exec NS PROGRAM` in host `i`, output piped, not yet started.
    pub(crate) fn cmd(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.0.cmd(i, program)
    }

    /// `rocex run --socket S -- PROGRAM ARGS` in host `i`.
    pub(crate) fn under_rocex(
        &self,
        i: usize,
        d: &NsDaemon,
        program: &str,
        args: &[&str],
    ) -> Command {
        let mut c = self.cmd(i, &bins().0);
        c.arg("run")
            .arg("--socket")
            .arg(&d.sock)
            .arg("--")
            .arg(program)
            .args(args);
        c
    }

    /// rocexd on host `i`'s address, once its socket answers.
    pub(crate) fn daemon(&self, i: usize) -> NsDaemon {
        Rocexd::new(self.pair().addr[i])
            .bin(&bins().1)
            .netns(self.pair().ns[i])
            .tag(&format!("ibv-{}", self.pair().ns[i]))
            .start()
    }
}

/// A rocexd in a namespace, killed on drop with its socket's directory.
pub(crate) type NsDaemon = rocex_testkit::rocexd::Daemon;
