//! Two rocex hosts: network namespaces `ribA` and `ribB` joined by a veth pair
//! (198.18.210.1 and .2/24, MTU 9000), a rocexd in each, and Debian's programs run under
//! `rocex run` inside each namespace, as on two machines: the device shows the veth's MAC
//! as its node GUID and link-local GID, and ibv_rc_pingpong, ibv_ud_pingpong and
//! ib_write_bw run across the link.
//!
//! Needs root and `ip`: without them it prints `SKIPPED:`, or fails when `CI` is set.

mod common;

use std::net::Ipv6Addr;
use std::process::{Command, Stdio};

use common::{bins, finish, ready, serve_then_connect, text};
use rocex_testkit::rocexd::{Daemon, Rocexd};
use rocex_testkit::veth::{Layout, VethPair, ip};

const LAYOUT: Layout = Layout {
    ns: ["ribA", "ribB"],
    veth: ["ribv0", "ribv1"],
    addr: ["198.18.210.1", "198.18.210.2"],
};
const NS: [&str; 2] = LAYOUT.ns;
const VETH: [&str; 2] = LAYOUT.veth;
const ADDR: [&str; 2] = LAYOUT.addr;

/// rocexd in namespace `i`, killed on drop.
fn daemon(i: usize) -> Daemon {
    Rocexd::new(ADDR[i])
        .bin(&bins().1)
        .netns(NS[i])
        .tag(&format!("ibv-ns{i}"))
        .start()
}

/// `ip netns exec NS rocex run --socket S -- PROGRAM ARGS`.
fn in_ns(i: usize, d: &Daemon, program: &str, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", NS[i]])
        .arg(&bins().0)
        .arg("run")
        .arg("--socket")
        .arg(&d.sock)
        .arg("--")
        .arg(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Server in namespace 1, client in namespace 0 connecting to it; both must succeed.
fn across(d: &[Daemon; 2], program: &str, args: &[&str]) -> String {
    let mut cargs = args.to_vec();
    cargs.push(ADDR[1]);
    let server = in_ns(1, &d[1], program, args);
    let client = in_ns(0, &d[0], program, &cargs);
    serve_then_connect(&format!("{program} {args:?}"), server, client).1
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
    let Some(_net) = VethPair::up("two_hosts_on_a_veth_pair", LAYOUT, 9000) else {
        return;
    };
    let d = [daemon(0), daemon(1)];

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
