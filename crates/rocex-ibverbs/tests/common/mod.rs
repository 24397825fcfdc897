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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// How long one program may run.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// `rocex` and `rocexd`, with the drop-in libraries beside them, built once.
pub(crate) fn bins() -> &'static (PathBuf, PathBuf) {
    static B: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    B.get_or_init(|| {
        let dir = rocex_testkit::bins::cargo_build(&[
            "-p",
            "rocex-cli",
            "-p",
            "rocex-daemon",
            "-p",
            "rocex-ibverbs",
            "-p",
            "rocex-dv-mlx5",
            "-p",
            "rocex-dv-efa",
        ]);
        (dir.join("rocex"), dir.join("rocexd"))
    })
}

/// The directory `rocex libdir` names: the drop-in libraries under their sonames.
pub(crate) fn libdir() -> String {
    let o = Command::new(&bins().0).arg("libdir").output().unwrap();
    assert!(o.status.success(), "rocex libdir: {}", text(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

/// Whether the test can run: the programs exist and rocexd may reach this user's memory.
/// Records the skip (or fails under `CI`) when not.
pub(crate) fn ready(programs: &[&str]) -> bool {
    let test = rocex_testkit::this_test();
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
    let test = rocex_testkit::this_test();
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

/// [`build_c`] linked against the drop-in libraries themselves: `-L` [`libdir`] and
/// `-l:SONAME` for each of `sonames`.
pub(crate) fn build_dropin(name: &str, source: &str, sonames: &[&str]) -> Option<CProgram> {
    let mut args = vec![format!("-L{}", libdir())];
    args.extend(sonames.iter().map(|s| format!("-l:{s}")));
    build_c(
        name,
        source,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    )
}

/// A test's own verbs program, once the test can run ([`ready`], then [`build_c`]).
pub(crate) fn verbs_program(name: &str, source: &str, cc_args: &[&str]) -> Option<CProgram> {
    if !ready(&[]) {
        return None;
    }
    build_c(name, source, cc_args)
}

/// [`verbs_program`] for a program built on `rc_loopback.h` (put ahead of `source`),
/// with `-O1 -libverbs` and `libs`.
pub(crate) fn loopback_program(name: &str, source: &str, libs: &[&str]) -> Option<CProgram> {
    let source = format!("{}{source}", include_str!("../rc_loopback.h"));
    verbs_program(name, &source, &[&["-O1", "-libverbs"], libs].concat())
}

/// [`loopback_program`] run to its end by [`CProgram::run_ok`] on a `rocexd` at `addr`:
/// its output.
pub(crate) fn run_loopback(name: &str, source: &str, libs: &[&str], addr: &str) -> Option<String> {
    Some(loopback_program(name, source, libs)?.run_ok(addr))
}

impl CProgram {
    /// The program under `rocex run`, with `env`, on a `rocexd` of its own at `addr`,
    /// waited for with [`finish`].
    pub(crate) fn run_on(&self, addr: &str, env: &[(&str, &str)]) -> Output {
        let d = Daemon::start(addr);
        let name = self.exe.file_name().unwrap().to_string_lossy();
        let child = under_rocex(&d.sock, self.exe.to_str().unwrap(), &[])
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        finish(child, &name)
    }

    /// [`CProgram::run_on`] with no `env`, which must exit 0: both outputs as text.
    pub(crate) fn run_ok(&self, addr: &str) -> String {
        let o = self.run_on(addr, &[]);
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        t
    }
}

/// The C side of a layout test: `rows` (`rocex_testkit::layout`) as a program named
/// `name`, built against the system's `header`, prints them; `None` after recording the
/// skip when it cannot be built.
pub(crate) fn c_layout(
    name: &str,
    header: &str,
    rows: &[rocex_testkit::layout::Row],
) -> Option<BTreeMap<String, usize>> {
    let src = rocex_testkit::layout::c_source(header, rows);
    let prog = build_c(name, &src, &[])?;
    let out = Command::new(&prog.exe).output().unwrap();
    assert!(out.status.success());
    Some(rocex_testkit::layout::parse(&out.stdout))
}

impl Drop for CProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `rocexd` of [`bins`] (`rocex_testkit::rocexd`), killed on drop with its socket's
/// directory; derefs to the fixture's daemon (`sock`, `kill`).
pub(crate) struct Daemon(rocex_testkit::rocexd::Daemon);

impl Daemon {
    /// `rocexd --addr addr` on a socket of its own, once the socket answers.
    pub(crate) fn start(addr: &str) -> Self {
        Self(
            rocex_testkit::rocexd::Rocexd::new(addr)
                .bin(&bins().1)
                .start(),
        )
    }
}

impl std::ops::Deref for Daemon {
    type Target = rocex_testkit::rocexd::Daemon;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
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

/// Waits until `server` (a program under `rocex run`, which execs it) listens on its
/// out-of-band TCP port, failing the test with what it said if it exits first.
pub(crate) fn listening(server: &mut Child, who: &str) {
    rocex_testkit::listen::wait_bound(server, rocex_testkit::listen::Proto::Tcp, LIMIT, who);
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

/// Starts `server`, then, once it listens, `client`; both must exit 0. Returns (server,
/// client) output.
pub(crate) fn serve_then_connect(
    what: &str,
    mut server: Command,
    mut client: Command,
) -> (String, String) {
    let mut s = server.spawn().unwrap();
    listening(&mut s, &format!("{what} server"));
    let c = finish(client.spawn().unwrap(), &format!("{what} client"));
    let s = finish(s, &format!("{what} server"));
    let (st, ct) = (text(&s), text(&c));
    assert!(
        s.status.success() && c.status.success(),
        "{what}: server {}:\n{st}\nclient {}:\n{ct}",
        s.status,
        c.status
    );
    (st, ct)
}

/// A client/server program run: the server under `rocex run` on daemon 1, then, once it
/// listens, the client on daemon 0, which connects to the server's out-of-band port on
/// `127.0.N.2`.
/// Both must exit 0; returns (client, server) output.
pub(crate) fn client_server(
    d: &[Daemon; 2],
    n: u8,
    program: &str,
    server_args: &[&str],
    client_args: &[&str],
) -> (String, String) {
    let server = under_rocex(&d[1].sock, program, server_args);
    let peer = format!("127.0.{n}.2");
    let mut cargs: Vec<&str> = client_args.to_vec();
    cargs.push(&peer);
    let client = under_rocex(&d[0].sock, program, &cargs);
    let (st, ct) = serve_then_connect(&format!("{program} {client_args:?}"), server, client);
    (ct, st)
}

/// An ibverbs-utils ping-pong (`ibv_*_pingpong`) by [`client_server`] on the daemons of
/// `pair(n)`, port `19500 + n`, `iters` iterations and `extra` on both ends, each of which
/// must report all of them. Returns (client, server) output.
pub(crate) fn pingpong(
    d: &[Daemon; 2],
    n: u8,
    program: &str,
    iters: &str,
    extra: &[&str],
) -> (String, String) {
    let port = (19500 + u16::from(n)).to_string();
    let mut args = vec!["-g", "1", "-n", iters, "-p", &port];
    args.extend_from_slice(extra);
    let (c, s) = client_server(d, n, program, &args, &args);
    for t in [&c, &s] {
        assert!(
            t.contains(&format!("{iters} iters in")),
            "{program} {extra:?}: {t}"
        );
    }
    (c, s)
}
