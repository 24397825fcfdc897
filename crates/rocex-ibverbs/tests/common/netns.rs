//! Two rocex hosts: two network namespaces joined by a veth pair (MTU 9000), each test its
//! own names and /24 in 198.18.0.0/15, a rocexd in either when asked, and commands run
//! inside each as on two machines. Needs root and `ip`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{bins, text};

/// The namespaces, veth ends and addresses of one pair.
pub(crate) struct Pair {
    pub(crate) ns: [&'static str; 2],
    pub(crate) veth: [&'static str; 2],
    pub(crate) addr: [&'static str; 2],
}

fn ip(args: &[&str]) -> Output {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    o
}

/// A pair that is up, removed on drop.
pub(crate) struct Net(&'static Pair);

impl Net {
    /// Makes the namespaces and the link (after removing what a killed run left), or records
    /// the skip (a failure under `CI`) without root or `ip`.
    pub(crate) fn up(p: &'static Pair, test: &str) -> Option<Self> {
        rocex_testkit::require_root(test)?;
        rocex_testkit::require_tool(test, "ip")?;
        Self::down(p);
        for ns in p.ns {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", p.veth[0], "netns", p.ns[0], "type", "veth", "peer", "name", p.veth[1],
            "netns", p.ns[1],
        ]);
        for i in 0..2 {
            let cidr = format!("{}/24", p.addr[i]);
            ip(&["-n", p.ns[i], "addr", "add", &cidr, "dev", p.veth[i]]);
            ip(&["-n", p.ns[i], "link", "set", p.veth[i], "mtu", "9000", "up"]);
        }
        Some(Self(p))
    }

    fn down(p: &Pair) {
        for ns in p.ns {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// The pair's names and addresses.
    pub(crate) fn pair(&self) -> &'static Pair {
        self.0
    }

    /// `ip netns exec NS PROGRAM` in host `i`, output piped, not yet started.
    pub(crate) fn cmd(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.0.ns[i]])
            .arg(program)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
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
        let dir =
            std::env::temp_dir().join(format!("rocex-ibv-{}-{}", self.0.ns[i], std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let child = self
            .cmd(i, &bins().1)
            .args(["--addr", self.0.addr[i], "--socket"])
            .arg(&sock)
            .args(["--spin-limit", "200"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let d = NsDaemon { child, sock };
        let end = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&d.sock).is_err() {
            assert!(
                Instant::now() < end,
                "rocexd in {} did not start",
                self.0.ns[i]
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        Self::down(self.0);
    }
}

/// A rocexd in a namespace, killed on drop with its socket's directory.
pub(crate) struct NsDaemon {
    child: Child,
    sock: PathBuf,
}

impl NsDaemon {
    /// Its control socket.
    pub(crate) fn sock(&self) -> &Path {
        &self.sock
    }
}

impl Drop for NsDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = self.sock.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
