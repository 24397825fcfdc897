//! What the drop-in librdmacm tests share: rocex-ibverbs' test helpers (the binaries,
//! `ready`, C programs, bounded runs), the drop-in librdmacm built beside them, and two
//! rocex hosts: network namespaces joined by a veth pair (MTU 9000) with a rocexd in each,
//! where Debian's programs run under `rocex run` as on two machines. Each test has its own
//! pair (`rcmNa`/`rcmNb`, 198.18.(230+N).1 and .2), so that tests run side by side.
//!
//! Needs root and `ip`: without them a test prints `SKIPPED:`, or fails when `CI` is set.

#![allow(dead_code)]

#[path = "../../../rocex-ibverbs/tests/common/mod.rs"]
mod ibv;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rocex_testkit::capture;
use rocex_testkit::rocexd::{Daemon, Rocexd};

#[allow(unused_imports)]
pub(crate) use ibv::{LIMIT, build_dropin, c_layout, finish, ready, text};

/// `source`, a C program against the system's `<rdma/rdma_cma.h>`, built and linked with
/// the drop-in librdmacm and libibverbs; `None` after recording why it cannot be (the
/// header or `cc` missing: a skip, or a failure under `CI`).
pub(crate) fn build_cm_prog(name: &str, source: &str) -> Option<ibv::CProgram> {
    if !std::path::Path::new("/usr/include/rdma/rdma_cma.h").exists() {
        let test = std::thread::current().name().unwrap_or("rdmacm").to_owned();
        rocex_testkit::cannot_run(&test, "<rdma/rdma_cma.h> (Debian: librdmacm-dev)");
        return None;
    }
    bins();
    build_dropin(name, source, &["librdmacm.so.1", "libibverbs.so.1"])
}

/// `rocex` and `rocexd`, with every drop-in library (librdmacm too) beside them.
pub(crate) fn bins() -> &'static (PathBuf, PathBuf) {
    static RDMACM: OnceLock<()> = OnceLock::new();
    RDMACM.get_or_init(|| {
        rocex_testkit::bins::cargo_build(&["-p", "rocex-rdmacm"]);
    });
    ibv::bins()
}

/// The directory `rocex libdir` names, with librdmacm built there too.
pub(crate) fn libdir() -> String {
    bins();
    ibv::libdir()
}

fn ip(args: &[&str]) -> Output {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    o
}

/// Two namespaces joined by a veth pair, each with a rocexd; all removed on drop.
pub(crate) struct Hosts {
    ns: [String; 2],
    veth: [String; 2],
    /// The hosts' addresses.
    pub(crate) addr: [String; 2],
    daemons: Vec<Daemon>,
}

impl Hosts {
    /// Pair `n` (each test its own), or `None` after recording why it cannot run.
    pub(crate) fn up(n: u8, programs: &[&str]) -> Option<Self> {
        if !ready(programs) {
            return None;
        }
        let test = std::thread::current().name().unwrap_or("rdmacm").to_owned();
        rocex_testkit::require_root(&test)?;
        rocex_testkit::require_tool(&test, "ip")?;
        let ns = [format!("rcm{n}a"), format!("rcm{n}b")];
        let net = 230 + u16::from(n);
        let addr = [format!("198.18.{net}.1"), format!("198.18.{net}.2")];
        let veth = [format!("rcm{n}v0"), format!("rcm{n}v1")];
        let mut h = Self {
            ns,
            veth: veth.clone(),
            addr,
            daemons: Vec::new(),
        };
        h.remove();
        for ns in &h.ns {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", &veth[0], "netns", &h.ns[0], "type", "veth", "peer", "name", &veth[1],
            "netns", &h.ns[1],
        ]);
        for ((ns, addr), veth) in h.ns.iter().zip(&h.addr).zip(&veth) {
            let a = format!("{addr}/24");
            ip(&["-n", ns, "addr", "add", &a, "dev", veth]);
            ip(&["-n", ns, "link", "set", veth, "mtu", "9000", "up"]);
        }
        for i in 0..2 {
            let d = h.start_daemon(n, i);
            h.daemons.push(d);
        }
        Some(h)
    }

    /// Pair `n` ([`Hosts::up`], needing no Debian program) with `source` built for it
    /// ([`build_cm_prog`]); `None` after recording why either cannot be.
    pub(crate) fn with_prog(n: u8, name: &str, source: &str) -> Option<(Self, ibv::CProgram)> {
        let h = Self::up(n, &[])?;
        let prog = build_cm_prog(name, source)?;
        Some((h, prog))
    }

    fn start_daemon(&self, n: u8, i: usize) -> Daemon {
        Rocexd::new(&self.addr[i])
            .bin(&bins().1)
            .netns(&self.ns[i])
            .tag(&format!("rcm{n}-{i}"))
            .start()
    }

    /// `ip netns exec NS rocex run --socket S -- PROGRAM ARGS` on host `i`, not started.
    pub(crate) fn run(&self, i: usize, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i]])
            .arg(&bins().0)
            .arg("run")
            .arg("--socket")
            .arg(&self.daemons[i].sock)
            .arg("--")
            .arg(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// The server on host 1, then the client on host 0 (once the server listens); both
    /// bounded by [`LIMIT`]. Returns (client, server) output; neither is checked here.
    pub(crate) fn pair(&self, program: &str, server: &[&str], client: &[&str]) -> (Output, Output) {
        self.server_and_client((program, server), (program, client))
    }

    /// [`pair`](Self::pair) for a server and a client that are two programs, each given
    /// as (program, args).
    pub(crate) fn server_and_client(
        &self,
        (sp, sargs): (&str, &[&str]),
        (cp, cargs): (&str, &[&str]),
    ) -> (Output, Output) {
        let s = self.listening(1, self.run(1, sp, sargs));
        let c = finish(self.run(0, cp, cargs).spawn().unwrap(), cp);
        let s = finish(s, sp);
        (c, s)
    }

    /// The counter `name` of host `i`'s rocexd's own group (`rocex stat`'s `daemon`).
    pub(crate) fn daemon_counter(&self, i: usize, name: &str) -> u64 {
        let out = Command::new(&bins().0)
            .arg("stat")
            .arg("--json")
            .arg("--socket")
            .arg(&self.daemons[i].sock)
            .output()
            .unwrap();
        assert!(out.status.success(), "rocex stat: {}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["device"]["daemon"][name]
            .as_u64()
            .unwrap_or_else(|| panic!("no daemon.{name} in {v}"))
    }

    /// Starts `server` on host `i` and returns once host `i`'s rocexd has granted it an
    /// `rdma_listen` (its `cm_listens` grew), or once it has exited (a server that fails
    /// before listening: its client then finds no listener, as it would).
    pub(crate) fn listening(&self, i: usize, mut server: Command) -> std::process::Child {
        let before = self.daemon_counter(i, "cm_listens");
        let mut s = server.spawn().unwrap();
        let end = std::time::Instant::now() + LIMIT;
        while self.daemon_counter(i, "cm_listens") == before && s.try_wait().unwrap().is_none() {
            assert!(std::time::Instant::now() < end, "the server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// [`pair`](Self::pair) where both must exit 0: their output as text.
    pub(crate) fn both_pass(
        &self,
        program: &str,
        server: &[&str],
        client: &[&str],
    ) -> (String, String) {
        let (c, s) = self.pair(program, server, client);
        let (ct, st) = (text(&c), text(&s));
        assert!(
            c.status.success() && s.status.success(),
            "{program}: client {client:?} {}:\n{ct}\nserver {server:?} {}:\n{st}",
            c.status,
            s.status
        );
        (ct, st)
    }

    /// tcpdump on host `i`'s veth, writing `file`, once it listens; `None` after recording
    /// why it cannot run (no tcpdump or tshark, which reads the capture).
    pub(crate) fn capture(&self, i: usize, file: &std::path::Path) -> Option<Capture> {
        let test = std::thread::current().name().unwrap_or("rdmacm").to_owned();
        rocex_testkit::require_tool(&test, "tcpdump")?;
        rocex_testkit::require_tool(&test, "tshark")?;
        let cap = capture::start(&self.ns[i], &self.veth[i], file, &[]);
        Some(Capture(cap.expect("tcpdump")))
    }

    /// Host `i`'s rocexd control socket.
    pub(crate) fn socket(&self, i: usize) -> &std::path::Path {
        &self.daemons[i].sock
    }

    /// SIGKILL to host `i`'s rocexd: it dies as in a crash.
    pub(crate) fn kill_daemon(&mut self, i: usize) {
        self.daemons[i].kill();
    }

    fn remove(&self) {
        for ns in &self.ns {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A running tcpdump ([`Hosts::capture`]).
pub(crate) struct Capture(capture::Capture);

impl Capture {
    /// Stops tcpdump once the last packets reached the file.
    pub(crate) fn stop(self) {
        self.0.stop().expect("tcpdump stops");
    }
}

/// `tshark -r file -Y filter` with `fields`, one row per packet.
pub(crate) fn tshark(file: &std::path::Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(file).args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    let o = c.output().expect("run tshark");
    assert!(o.status.success(), "tshark: {}", text(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

impl Drop for Hosts {
    /// A failing test also prints each rocexd's `rocex stat` (its CM and QP counters),
    /// which tells a program stuck in its connection from one stuck in its transfer.
    fn drop(&mut self) {
        if std::thread::panicking() {
            for d in &self.daemons {
                let stat = Command::new(&bins().0)
                    .arg("stat")
                    .arg("--socket")
                    .arg(&d.sock)
                    .output();
                let stat = stat.map_or_else(|e| e.to_string(), |o| text(&o));
                eprintln!("rocex stat of {}:\n{stat}", d.sock.display());
            }
        }
        self.daemons.clear();
        self.remove();
    }
}
