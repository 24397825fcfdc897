//! A listener's end and a connected QP's attributes, through the drop-in librdmacm
//! (`reconnect.c`, built against the system's `<rdma/rdma_cma.h>`, on two rocex hosts):
//!
//! * `rdma_destroy_id` on a listening id stops the listen: a connect to the port then
//!   ends in `REJECTED` with reason 8 (invalid service ID), as the kernel's CM answers,
//!   not a connection or a hang, and a new id listens on the same
//!   port and accepts the next connect.
//! * `rdma_init_qp_attr` for an RC QP's RTR and RTS gives what the connection settled,
//!   under the kernel CM's masks (`cm_init_qp_rtr_attr`, `cm_init_qp_rts_attr`): each end's
//!   destination QPN is the other's QP number, its receive PSN the other's send PSN, its
//!   destination GID the other's address. On the passive side before `rdma_accept` it
//!   gives the same values (the kernel's CM answers from the REQ in its REQ_RCVD state),
//!   and a QP the program moves to RTR with them itself is accepted and connects.
//! * The passive side's `rdma_get_dst_port` is the port the client's REQ came from.

mod common;

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use common::{Hosts, finish, text};

/// `reconnect.c` behind what the rdma_cm programs share.
const RECONNECT: &str = concat!(include_str!("cm_prog.h"), include_str!("reconnect.c"));

/// A running program whose stdout is read line by line and whose stdin takes lines.
struct Prog {
    child: Child,
    out: Lines<BufReader<ChildStdout>>,
    input: Option<ChildStdin>,
    said: Vec<String>,
}

impl Prog {
    fn start(h: &Hosts, host: usize, exe: &str, args: &[&str]) -> Self {
        let mut child = h
            .run(host, exe, args)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let input = child.stdin.take();
        Self {
            child,
            out,
            input,
            said: Vec::new(),
        }
    }

    /// Reads lines until one starts with `prefix`, which it returns.
    fn until(&mut self, prefix: &str) -> String {
        for l in self.out.by_ref() {
            let l = l.unwrap();
            self.said.push(l.clone());
            if l.starts_with(prefix) {
                return l;
            }
        }
        panic!("no line starting {prefix:?} in:\n{}", self.said.join("\n"));
    }

    fn go(&mut self) {
        writeln!(self.input.as_mut().unwrap(), "go").unwrap();
    }

    /// Every line it printed, once it exited with status 0.
    fn done(mut self, who: &str) -> Vec<String> {
        self.said.extend(self.out.by_ref().map(Result::unwrap));
        drop(self.input.take());
        let o = finish(self.child, who);
        assert!(
            o.status.success(),
            "{who}: {}\n{}",
            self.said.join("\n"),
            text(&o)
        );
        self.said
    }
}

/// The value after `key` on the line of `lines` that starts with `head`.
fn field<'a>(lines: &'a [String], head: &str, key: &str) -> &'a str {
    let l = lines.iter().find(|l| l.starts_with(head)).expect(head);
    let w: Vec<&str> = l.split_whitespace().collect();
    let i = w.iter().position(|x| *x == key).expect(key);
    w[i + 1]
}

#[test]
fn a_destroyed_listener_stops_and_connected_attributes_are_the_connections() {
    let Some((h, prog)) = Hosts::with_prog(9, "rdmacm_reconnect", RECONNECT) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let (ca, sa) = (h.addr[0].as_str(), h.addr[1].as_str());
    let mut s = Prog::start(&h, 1, exe, &["server", sa, "7999"]);
    assert_eq!(s.until("destroy_listener"), "destroy_listener 0 ok");
    let mut c = Prog::start(&h, 0, exe, &["client", sa, "7999"]);
    let first = c.until("event RDMA_CM_EVENT_REJECTED");
    s.go();
    assert_eq!(s.until("listen_again"), "listen_again 0 ok");
    c.go();
    // Both ends read their attributes before the client disconnects, which moves the QPs
    // on to ERROR.
    s.until("rts");
    c.until("rts");
    c.go();
    let (c, s) = (c.done("reconnect client"), s.done("reconnect server"));
    for step in [
        "pre_init_rtr",
        "pre_init_rts",
        "modify_rtr_before_accept",
        "accept",
    ] {
        assert!(s.contains(&format!("{step} 0 ok")), "{step}: {s:?}");
    }
    // The request's attributes are the connection's: every value, and the masks.
    for (pre, post) in [("pre_rtr", "rtr"), ("pre_rts", "rts"), ("pre_qpn", "qpn")] {
        let line = |head: &str| -> String {
            let l = s.iter().find(|l| l.starts_with(head)).expect(head);
            l.split_once(' ').unwrap().1.to_owned()
        };
        assert_eq!(line(pre), line(post), "{s:?}");
    }
    // Both connects came from one client port (each id binds its own); the second's
    // is the one the server saw.
    let src_ports: Vec<_> = c.iter().filter(|l| l.starts_with("src_port")).collect();
    assert_eq!(
        field(&s, "dst_port", "dst_port"),
        field(&[src_ports[1].clone()], "src_port", "src_port"),
        "{s:?} {c:?}"
    );
    // The CM's answer for a port nobody listens on: reason 8, invalid service ID.
    assert_eq!(first, "event RDMA_CM_EVENT_REJECTED 8", "{c:?}");
    for (me, peer, peer_addr) in [(&c, &s, sa), (&s, &c, ca)] {
        assert!(me.contains(&"init_rtr 0 ok".into()), "{me:?}");
        assert!(me.contains(&"init_rts 0 ok".into()), "{me:?}");
        assert_eq!(field(me, "rtr", "mask"), "kernel", "{me:?}");
        assert_eq!(field(me, "rts", "mask"), "kernel", "{me:?}");
        assert_eq!(field(me, "rtr", "state"), "2");
        assert_eq!(field(me, "rts", "state"), "3");
        assert_eq!(field(me, "rtr", "dest_qpn"), field(peer, "qpn", "qpn"));
        assert_eq!(field(me, "rtr", "rq_psn"), field(peer, "rts", "sq_psn"));
        assert_eq!(field(me, "rtr", "global"), "1");
        assert_eq!(field(me, "rtr", "dgid"), peer_addr);
        assert_eq!(field(me, "rtr", "mtu"), field(peer, "rtr", "mtu"));
    }
}

/// A program that destroys its event channel under a listening id (perftest's error path
/// after a failed connect): the listen ends with the channel, as the kernel destroys the
/// ids of a closing rdma_cm file, so a connect to the port is rejected (reason 8) rather
/// than handed to the freed channel, and the id can still be destroyed.
#[test]
fn a_channel_destroyed_under_a_listener_ends_the_listen() {
    let Some((h, prog)) = Hosts::with_prog(11, "rdmacm_orphan", RECONNECT) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let sa = h.addr[1].as_str();
    let mut s = Prog::start(&h, 1, exe, &["orphan", sa, "7997"]);
    assert_eq!(s.until("channel"), "channel_destroyed");
    let c = Prog::start(&h, 0, exe, &["connect", sa, "7997"]);
    let c = c.done("reconnect connect");
    assert!(
        c.contains(&"event RDMA_CM_EVENT_REJECTED 8".into()),
        "{c:?}"
    );
    s.go();
    let s = s.done("reconnect orphan");
    assert!(s.contains(&"destroy_orphan 0 ok".into()), "{s:?}");
}

/// A program that blocks SIGUSR2 and takes it from a signalfd, as tgtd does, keeps its
/// signal once the library's CM event thread runs: a signal raised at the process goes
/// to a thread that does not block it, so a library thread must block them all (killed
/// by SIGUSR2's default action otherwise).
#[test]
fn the_event_thread_takes_no_signal_the_program_blocks() {
    let Some((h, prog)) = Hosts::with_prog(12, "rdmacm_signal", RECONNECT) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let s = Prog::start(&h, 1, exe, &["signal", h.addr[1].as_str(), "7996"]);
    let s = s.done("reconnect signal");
    assert!(s.contains(&"listen 0 ok".into()), "{s:?}");
    assert!(s.contains(&"signalfd got 12".into()), "{s:?}");
}

/// tgtd's passive listeners: `[::]` with `RDMA_OPTION_ID_AFONLY` and `0.0.0.0`, on one
/// port. The kernel's rdma_cm lets two family-only ids of different families share a port
/// (`cma_check_port`), and a request to an IPv4 address goes to the IPv4 listener.
#[test]
fn family_only_listeners_of_two_families_share_a_port() {
    let Some((h, prog)) = Hosts::with_prog(13, "rdmacm_families", RECONNECT) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let sa = h.addr[1].as_str();
    let mut s = Prog::start(&h, 1, exe, &["families", sa, "7995"]);
    s.until("listening");
    let c = Prog::start(&h, 0, exe, &["connect", sa, "7995"]).done("reconnect connect");
    let s = s.done("reconnect families");
    for step in ["afonly", "bind6", "listen6", "bind4", "listen4", "reject"] {
        assert!(s.contains(&format!("{step} 0 ok")), "{step}: {s:?}");
    }
    assert!(
        s.contains(&"event RDMA_CM_EVENT_CONNECT_REQUEST on v4".into()),
        "{s:?}"
    );
    assert!(
        c.contains(&"event RDMA_CM_EVENT_REJECTED 28".into()),
        "{c:?}"
    );
}
