//! A `rocexd` a test starts: on its address, with a control socket in a directory of its
//! own, optionally inside a network namespace (`ip netns exec`, the socket file still
//! reachable from the test's namespace). [`Rocexd::start`] returns once the socket answers;
//! the [`Daemon`] is killed on drop, which removes the socket's directory and, when the
//! test is failing, prints what the daemon logged (its output goes to a file beside the
//! socket, so that a failure shows the daemon's side).

use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a daemon may take to answer on its socket (builds and other tests share the
/// machine's cores).
pub const START: Duration = Duration::from_secs(20);

/// A socket path `d.sock` in a fresh directory `rocexd-{tag}-{pid}`; the [`Daemon`]
/// serving it removes the directory.
pub fn socket_in(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocexd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("make the socket's directory");
    dir.join("d.sock")
}

/// How to start one daemon.
#[derive(Debug, Clone)]
pub struct Rocexd {
    bin: Option<PathBuf>,
    addr: String,
    sock: Option<PathBuf>,
    socket_dir: bool,
    netns: Option<String>,
    user: Option<(u32, u32)>,
    direct: bool,
    args: Vec<OsString>,
}

/// Whether the tests run their clients on the direct data path: `ROCEX_TEST_DIRECT=1`
/// starts every daemon with its default, direct slots where its options fit, so that each
/// client's `Context::open` is granted a QPN slot and runs the engine itself (docs/verbs.md,
/// "Direct mode"); otherwise every daemon runs with `--no-direct`.
pub fn direct_mode() -> bool {
    std::env::var_os("ROCEX_TEST_DIRECT").is_some_and(|v| v == "1")
}

impl Rocexd {
    /// `rocexd --addr addr --spin-limit 200` ([`bins::rocexd`](crate::bins::rocexd)), on a
    /// socket in a fresh directory named for the address unless [`socket`](Self::socket)
    /// names one. The spin limit keeps an idle daemon from holding a core the tests share.
    /// Without `ROCEX_TEST_DIRECT=1` ([`direct_mode`]) it grants no direct slots
    /// (`--no-direct`).
    pub fn new(addr: &str) -> Self {
        Self {
            bin: None,
            addr: addr.to_owned(),
            sock: None,
            socket_dir: false,
            netns: None,
            user: None,
            direct: direct_mode(),
            args: vec!["--spin-limit".into(), "200".into()],
        }
    }

    /// Runs `bin` instead (the daemon's own tests: `env!("CARGO_BIN_EXE_rocexd")`).
    pub fn bin(mut self, bin: impl Into<PathBuf>) -> Self {
        self.bin = Some(bin.into());
        self
    }

    /// Serves `sock`, in a directory of its own (see [`socket_in`]): the [`Daemon`]'s
    /// drop removes that directory.
    pub fn socket(mut self, sock: impl Into<PathBuf>) -> Self {
        self.sock = Some(sock.into());
        self
    }

    /// Given no `--socket`, serves `<addr>.sock` in `dir` as `$ROCEX_SOCKET_DIR` tells it
    /// (docs/daemon.md, "How clients find the daemon").
    pub fn in_socket_dir(mut self, dir: &Path) -> Self {
        self.sock = Some(dir.join(format!("{}.sock", self.addr)));
        self.socket_dir = true;
        self
    }

    /// Serves a socket in a fresh directory named for `tag` ([`socket_in`]).
    pub fn tag(self, tag: &str) -> Self {
        self.socket(socket_in(tag))
    }

    /// Runs in network namespace `ns` (`ip netns exec ns rocexd ...`).
    pub fn netns(mut self, ns: &str) -> Self {
        self.netns = Some(ns.to_owned());
        self
    }

    /// Runs as user `uid` and group `gid` (the test runs as root).
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.user = Some((uid, gid));
        self
    }

    /// Leaves out `--spin-limit 200`, for a test of a configuration file's own settings
    /// (call it before [`args`](Self::args)).
    pub fn no_spin_limit(mut self) -> Self {
        self.args.clear();
        self
    }

    /// Grants no direct slots even under `ROCEX_TEST_DIRECT=1` (unless the test's own
    /// options say `--direct`): for a test of the daemon path itself.
    pub fn daemon_path(mut self) -> Self {
        self.direct = false;
        self
    }

    /// Leaves the direct slots to the daemon's default, whatever `ROCEX_TEST_DIRECT`
    /// says: for a test of that default.
    pub fn direct_default(mut self) -> Self {
        self.direct = true;
        self
    }

    /// More options after the others.
    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts the daemon and waits until its socket answers.
    ///
    /// # Panics
    ///
    /// When it exits first (quoting what it said) or does not answer within [`START`].
    pub fn start(self) -> Daemon {
        let sock = match self.sock {
            Some(s) => s,
            None => socket_in(&self.addr),
        };
        let bin = match self.bin {
            Some(b) => b,
            None => crate::bins::rocexd().to_owned(),
        };
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let log = log_path(&sock);
        let stderr = std::fs::File::create(&log).expect("make the daemon's log");
        cmd.arg("--addr").arg(&self.addr);
        match self.socket_dir {
            true => cmd.env_remove("ROCEX_SOCKET").env(
                "ROCEX_SOCKET_DIR",
                sock.parent().expect("the socket directory"),
            ),
            false => cmd.arg("--socket").arg(&sock),
        };
        let chosen = self
            .args
            .iter()
            .any(|a| a == "--direct" || a == "--no-direct");
        if !self.direct && !chosen {
            cmd.arg("--no-direct");
        }
        cmd.args(&self.args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(stderr.try_clone().expect("share the log"))
            .stderr(stderr);
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        let child = cmd.spawn().expect("start rocexd");
        let mut d = Daemon {
            child,
            sock,
            addr: self.addr,
        };
        let end = Instant::now() + START;
        while UnixStream::connect(&d.sock).is_err() {
            if let Some(st) = d.child.try_wait().expect("wait for rocexd") {
                panic!(
                    "rocexd {:?} on {} exited at start ({st}): {}",
                    self.args,
                    d.addr,
                    d.log().trim()
                );
            }
            assert!(
                Instant::now() < end,
                "rocexd on {} did not answer on {} within {START:?}: {}",
                d.addr,
                d.sock.display(),
                d.log().trim()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

fn log_path(sock: &Path) -> PathBuf {
    let mut name = sock.as_os_str().to_owned();
    name.push(".log");
    PathBuf::from(name)
}

/// A running daemon, killed on drop with its socket's directory.
#[derive(Debug)]
pub struct Daemon {
    /// The process (`ip netns exec` execs the daemon, so in a namespace too).
    pub child: Child,
    /// Its control socket.
    pub sock: PathBuf,
    addr: String,
}

impl Daemon {
    /// Whether it still runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("wait for rocexd").is_none()
    }

    /// SIGTERM; waits for the exit; whether it exited 0 and removed its socket.
    pub fn stop(&mut self) -> bool {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let end = Instant::now() + START;
        loop {
            if let Some(st) = self.child.try_wait().expect("wait for rocexd") {
                return st.success() && !self.sock.exists();
            }
            if Instant::now() > end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: the daemon dies as in a crash, its socket file stays behind.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// What it printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(log_path(&self.sock)).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("rocexd on {} logged:\n{}", self.addr, self.log().trim_end());
        }
        if let Some(d) = self.sock.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
