//! What the drop-in tests share: the binaries they need (`rocex`, `rocexd` and the
//! libraries, built once per run in this test's profile), two `rocexd` on loopback
//! addresses of the test's own, and Debian's programs run under `rocex run` on both ends.
//!
//! A Debian program that is missing (perftest, ibverbs-utils), or memory registration
//! that rocexd may not perform (it reaches the program's memory with
//! `process_vm_writev`, which needs root or `kernel.yama.ptrace_scope` 0), makes a test
//! print `SKIPPED:`, or fail when `CI` is set.

#![allow(dead_code)]

pub(crate) mod netns;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one program may run.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// The target directory of this test binary's profile (`target/debug`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_owned()
}

/// `rocex` and `rocexd`, with the drop-in libraries beside them, built once.
pub(crate) fn bins() -> &'static (PathBuf, PathBuf) {
    static B: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    B.get_or_init(|| {
        let dir = profile_dir();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut b = Command::new(cargo);
        b.args(["build", "-q"]);
        for p in [
            "rocex-cli",
            "rocex-daemon",
            "rocex-ibverbs",
            "rocex-dv-mlx5",
            "rocex-dv-efa",
        ] {
            b.args(["-p", p]);
        }
        if dir.ends_with("release") {
            b.arg("--release");
        }
        let st = b.status().expect("run cargo build");
        assert!(
            st.success(),
            "cargo build of the binaries and libraries failed"
        );
        (dir.join("rocex"), dir.join("rocexd"))
    })
}

/// The running test's name (libtest names each test's thread after it), for the skip notice.
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("rocex-ibverbs test")
        .to_owned()
}

/// Whether the test can run: the programs exist and rocexd may reach this user's memory.
/// Records the skip (or fails under `CI`) when not.
pub(crate) fn ready(programs: &[&str]) -> bool {
    let test = test_name();
    if !programs
        .iter()
        .all(|p| rocex_testkit::require_tool(&test, p).is_some())
    {
        return false;
    }
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "0".into());
    if !rocex_testkit::is_root() && scope != "0" {
        rocex_testkit::cannot_run(
            &test,
            "root or kernel.yama.ptrace_scope 0 (rocexd reaches a program's memory)",
        );
        return false;
    }
    true
}

/// A C program built for a test in a directory of its own, removed on drop.
pub(crate) struct CProgram {
    dir: PathBuf,
    /// The executable.
    pub(crate) exe: PathBuf,
}

/// `cc NAME.c -o NAME ARGS...` from `source` against the system's `<infiniband/verbs.h>`,
/// failing the test with cc's diagnostics; `None` after recording the skip (or failing
/// under `CI`) when `cc` or the header is missing.
pub(crate) fn build_c(name: &str, source: &str, args: &[&str]) -> Option<CProgram> {
    let test = test_name();
    rocex_testkit::require_tool(&test, "cc")?;
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        rocex_testkit::cannot_run(&test, "<infiniband/verbs.h> (Debian: libibverbs-dev)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rocex-cc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (c, exe) = (dir.join(format!("{name}.c")), dir.join(name));
    std::fs::write(&c, source).unwrap();
    let out = Command::new("cc")
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .args(args)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc {name}.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(CProgram { dir, exe })
}

impl Drop for CProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A daemon, killed on drop with its socket's directory.
pub(crate) struct Daemon {
    child: Child,
    /// Its control socket.
    pub(crate) sock: PathBuf,
}

impl Daemon {
    /// `rocexd --addr addr` on a socket of its own, once the socket answers.
    pub(crate) fn start(addr: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rocex-ibv-{addr}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let child = Command::new(&bins().1)
            .args(["--addr", addr, "--socket"])
            .arg(&sock)
            .args(["--spin-limit", "200"])
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("start rocexd");
        let d = Self { child, sock };
        let end = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&d.sock).is_err() {
            assert!(Instant::now() < end, "rocexd on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }
}

impl Daemon {
    /// SIGKILL: the daemon dies as in a crash.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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

/// `rocex run --socket SOCK -- PROGRAM ARGS...`, not yet started.
pub(crate) fn under_rocex(sock: &Path, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new(&bins().0);
    c.arg("run")
        .arg("--socket")
        .arg(sock)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` at most [`LIMIT`], killing it and failing the test after that.
pub(crate) fn finish(child: Child, who: &str) -> Output {
    rocex_testkit::finish(child, LIMIT, who)
}

/// Both outputs as text.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Two daemons on `127.0.N.1` and `127.0.N.2` (each test its own `N`).
pub(crate) fn pair(n: u8) -> [Daemon; 2] {
    [
        Daemon::start(&format!("127.0.{n}.1")),
        Daemon::start(&format!("127.0.{n}.2")),
    ]
}

/// A client/server program run: the server under `rocex run` on daemon 1, then the
/// client on daemon 0, which connects to the server's out-of-band port on `127.0.N.2`.
/// Both must exit 0; returns (client, server) output.
pub(crate) fn client_server(
    d: &[Daemon; 2],
    n: u8,
    program: &str,
    server_args: &[&str],
    client_args: &[&str],
) -> (String, String) {
    let server = under_rocex(&d[1].sock, program, server_args)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let peer = format!("127.0.{n}.2");
    let mut cargs: Vec<&str> = client_args.to_vec();
    cargs.push(&peer);
    let client = under_rocex(&d[0].sock, program, &cargs).spawn().unwrap();
    let c = finish(client, &format!("{program} client"));
    let s = finish(server, &format!("{program} server"));
    let (ct, st) = (text(&c), text(&s));
    assert!(
        c.status.success() && s.status.success(),
        "{program} {client_args:?}: client {}:\n{ct}\nserver {}:\n{st}",
        c.status,
        s.status
    );
    (ct, st)
}
