//! Two `rocexd` on loopback addresses for the host's tests against a scripted target.
//! The daemon is another package's binary: the first test builds it with the cargo
//! that runs the tests, into the same target directory and profile (`$ROCEXD` names
//! one to use instead).

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

fn rocexd() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ROCEXD") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("test binary path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "rocex-daemon",
            "--bin",
            "rocexd",
            "--target-dir",
        ])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile_dir.file_name().and_then(|s| s.to_str()) {
            Some("release") => {
                cmd.arg("--release");
            }
            Some("debug") | None => {}
            Some(p) => {
                cmd.args(["--profile", p]);
            }
        }
        assert!(
            cmd.status().expect("run cargo").success(),
            "building rocexd failed"
        );
        profile_dir.join("rocexd")
    })
}

/// A daemon process, killed on drop.
pub struct Daemon {
    child: Child,
    pub sock: PathBuf,
}

impl Daemon {
    pub fn start(addr: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rocex-nvmeof-{}-{addr}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let _ = std::fs::remove_file(&sock);
        let child = Command::new(rocexd())
            .args(["--addr", addr, "--socket"])
            .arg(&sock)
            .args(["--mtu", "1024"])
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("start rocexd");
        let end = Instant::now() + Duration::from_secs(20);
        while !sock.exists() {
            assert!(Instant::now() < end, "rocexd on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, sock }
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

/// The tests take the two addresses in turn.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
