//! Two `rocexd` on 127.0.7.1 and 127.0.7.2 for the high-level API's tests.
//!
//! The daemon is another package's binary, which cargo does not build for this one's
//! tests, so the first test of a run builds it: `cargo build -p rocex-daemon --bin rocexd`
//! with the cargo that runs the tests, into the same target directory and profile (a
//! no-op when it is up to date, as under `cargo test --workspace`). `$ROCEXD` names a
//! daemon binary to use instead.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The daemon binary, built once per test process.
pub fn rocexd() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("ROCEXD") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test binary>
        let exe = std::env::current_exe().expect("test binary path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>");
        let target_dir = profile_dir.parent().expect("target dir");
        let profile = profile_dir
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or("debug");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet", "-p", "rocex-daemon", "--bin", "rocexd"])
            .arg("--target-dir")
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        match profile {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            p => {
                cmd.args(["--profile", p]);
            }
        }
        let st = cmd.status().expect("run cargo to build rocexd");
        assert!(st.success(), "cargo build -p rocex-daemon failed");
        let bin = profile_dir.join("rocexd");
        assert!(bin.exists(), "no rocexd at {}", bin.display());
        bin
    })
}

/// Tests take the two addresses in turn.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A daemon process, killed on drop.
pub struct Daemon {
    child: Child,
    pub sock: PathBuf,
}

impl Daemon {
    pub fn start(addr: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rocex-hl-{}-{addr}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let _ = std::fs::remove_file(&sock);
        let child = Command::new(rocexd())
            .args(["--addr", addr, "--socket"])
            .arg(&sock)
            .args(["--spin-limit", "200", "--mtu", "1024"])
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

    /// SIGKILL: the device vanishes without a goodbye.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
        if let Some(d) = self.sock.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The pair every test uses: A on 127.0.7.1 (the listening side), B on 127.0.7.2.
pub struct Pair {
    pub a: Daemon,
    pub b: Daemon,
    _serial: MutexGuard<'static, ()>,
}

pub fn pair() -> Pair {
    let serial = serial();
    Pair {
        a: Daemon::start("127.0.7.1"),
        b: Daemon::start("127.0.7.2"),
        _serial: serial,
    }
}

/// Fails the whole test process if a test hangs: every wait in the library must end.
pub fn watchdog(name: &'static str) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            rx.recv_timeout(Duration::from_secs(120))
        {
            eprintln!("{name}: hung for 120 s");
            std::process::exit(101);
        }
    });
    tx
}

pub fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add((i >> 8) as u8)
        })
        .collect()
}
