//! What the tests that run `rocexd` share: the daemon binary and a daemon killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `rocexd` binary: `$ROCEXD`, else built next to the `rocex` under test.
pub(crate) fn rocexd() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ROCEXD") {
            return PathBuf::from(p);
        }
        let rocex = Path::new(env!("CARGO_BIN_EXE_rocex"));
        let dir = rocex.parent().expect("the binary's directory");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "-p", "rocex-daemon", "--bin", "rocexd"]);
        if dir.ends_with("release") {
            build.arg("--release");
        }
        let st = build.status().expect("run cargo build for rocexd");
        assert!(st.success(), "cargo build of rocexd failed");
        dir.join("rocexd")
    })
}

/// A `rocexd` process, killed on drop.
pub(crate) struct Daemon {
    child: Child,
    /// Its control socket.
    pub(crate) sock: PathBuf,
}

impl Daemon {
    /// A daemon on `addr` with `extra` options, its socket in a directory named for `tag`;
    /// returns once the socket accepts connections.
    pub(crate) fn start(addr: &str, tag: &str, extra: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("rocex-{tag}-{}-{addr}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let child = Command::new(rocexd())
            .args(["--addr", addr, "--socket"])
            .arg(&sock)
            .args(["--spin-limit", "200"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("start rocexd");
        let mut d = Self { child, sock };
        let end = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&d.sock).is_err() {
            assert!(d.child.try_wait().unwrap().is_none(), "rocexd exited");
            assert!(Instant::now() < end, "rocexd on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = self.sock.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
