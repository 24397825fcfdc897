//! Two rocex hosts: network namespaces `ribA` and `ribB` joined by a veth pair
//! (198.18.210.1 and .2/24, MTU 9000), a rocexd in each, and Debian's programs run under
//! `rocex run` inside each namespace, as on two machines: the device shows the veth's MAC
//! as its node GUID and link-local GID, and ibv_rc_pingpong, ibv_ud_pingpong and
//! ib_write_bw run across the link.
//!
//! Needs root and `ip`: without them it prints `SKIPPED:`, or fails when `CI` is set.

mod common;

use std::net::Ipv6Addr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{LIMIT, bins, finish, ready, text};

const NS: [&str; 2] = ["ribA", "ribB"];
const VETH: [&str; 2] = ["ribv0", "ribv1"];
const ADDR: [&str; 2] = ["198.18.210.1", "198.18.210.2"];

fn ip(args: &[&str]) -> Output {
    let o = Command::new("ip").args(args).output().expect("run ip");
    assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    o
}

/// The namespaces and the veth pair, removed on drop.
struct Net;

impl Net {
    fn up() -> Option<Self> {
        rocex_testkit::require_root("the namespace test")?;
        rocex_testkit::require_tool("the namespace test", "ip")?;
        Self::down();
        for ns in NS {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "link", "add", VETH[0], "netns", NS[0], "type", "veth", "peer", "name", VETH[1],
            "netns", NS[1],
        ]);
        for i in 0..2 {
            ip(&[
                "-n",
                NS[i],
                "addr",
                "add",
                &format!("{}/24", ADDR[i]),
                "dev",
                VETH[i],
            ]);
            ip(&["-n", NS[i], "link", "set", VETH[i], "mtu", "9000", "up"]);
        }
        Some(Self)
    }

    fn down() {
        for ns in NS {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        Self::down();
    }
}

/// rocexd in namespace `i`, killed on drop.
struct NsDaemon(std::process::Child, std::path::PathBuf);

impl NsDaemon {
    fn start(i: usize) -> Self {
        let dir = std::env::temp_dir().join(format!("rocex-ibv-ns{i}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("d.sock");
        let child = Command::new("ip")
            .args(["netns", "exec", NS[i]])
            .arg(&bins().1)
            .args(["--addr", ADDR[i], "--socket"])
            .arg(&sock)
            .args(["--spin-limit", "200"])
            .env("RUST_LOG", "warn")
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(Instant::now() < end, "rocexd in {} did not start", NS[i]);
            std::thread::sleep(Duration::from_millis(20));
        }
        Self(child, sock)
    }
}

impl Drop for NsDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if let Some(d) = self.1.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// `ip netns exec NS rocex run --socket S -- PROGRAM ARGS`.
fn in_ns(i: usize, d: &NsDaemon, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", NS[i]])
        .arg(&bins().0)
        .arg("run")
        .arg("--socket")
        .arg(&d.1)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Server in namespace 1, client in namespace 0 connecting to it; both must succeed.
fn across(d: &[NsDaemon; 2], program: &str, args: &[&str]) -> String {
    let server = in_ns(1, &d[1], program, args).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let mut cargs = args.to_vec();
    cargs.push(ADDR[1]);
    let c = finish(in_ns(0, &d[0], program, &cargs).spawn().unwrap(), program);
    let s = finish(server, program);
    assert!(
        c.status.success() && s.status.success(),
        "{program} {args:?} (limit {LIMIT:?}):\n{}\n{}",
        text(&c),
        text(&s)
    );
    text(&c)
}

#[test]
fn two_hosts_on_a_veth_pair() {
    if !ready(&[
        "ibv_devinfo",
        "ibv_rc_pingpong",
        "ibv_ud_pingpong",
        "ib_write_bw",
    ]) {
        return;
    }
    let Some(_net) = Net::up() else { return };
    let d = [NsDaemon::start(0), NsDaemon::start(1)];

    // GID 0 is fe80::EUI-64 of the veth's MAC and the node GUID that EUI-64, as with rxe:
    // both read off the link-local address the kernel itself made from the MAC (its
    // default address generation in a fresh namespace).
    let br = text(&ip(&[
        "-n", NS[0], "-6", "-br", "addr", "show", "dev", VETH[0], "scope", "link",
    ]));
    let ll = br
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.split_once('/'))
        .unwrap_or_else(|| panic!("no link-local address on {}: {br}", VETH[0]))
        .0;
    let eui = &ll.parse::<Ipv6Addr>().unwrap().octets()[8..];
    let guid = format!(
        "{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}",
        eui[0], eui[1], eui[2], eui[3], eui[4], eui[5], eui[6], eui[7]
    );
    let o = finish(
        in_ns(0, &d[0], "ibv_devinfo", &["-v"]).spawn().unwrap(),
        "ibv_devinfo",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains(&format!("node_guid:\t\t\t{guid}")),
        "GUID {guid}:\n{t}"
    );
    assert!(
        t.contains(&format!("GID[  0]:\t\t{ll}, RoCE v2")),
        "{ll}:\n{t}"
    );
    assert!(
        t.contains("GID[  1]:\t\t::ffff:198.18.210.1, RoCE v2"),
        "{t}"
    );

    let c = across(
        &d,
        "ibv_rc_pingpong",
        &["-g", "1", "-n", "500", "-s", "8192", "-m", "4096"],
    );
    assert!(c.contains("500 iters in"), "{c}");
    let c = across(
        &d,
        "ibv_ud_pingpong",
        &["-g", "1", "-n", "500", "-s", "2048"],
    );
    assert!(c.contains("500 iters in"), "{c}");
    let c = across(&d, "ib_write_bw", &["-n", "2000", "-q", "2"]);
    assert!(
        c.lines()
            .any(|l| l.split_whitespace().take(2).eq(["65536", "4000"])),
        "{c}"
    );
}
