//! Private data in the REP and the REJ reaches the connecting side as rdma-core's
//! librdmacm hands it on from the kernel's rdma_cm (`cma_ib_handler`): a C program built
//! against the system's `<rdma/rdma_cma.h>` runs on both rocex hosts under `rocex run`.
//!
//! * `rdma_reject` with 148 bytes: the client's `REJECTED` event (status 28, consumer)
//!   carries the REJ's whole 148-byte field, those bytes; 149 bytes: `EINVAL`.
//! * `rdma_accept` with 196 bytes: the client's `ESTABLISHED` event carries the REP's
//!   196; 197 bytes: `EINVAL`. The server's own `ESTABLISHED` (the RTU) carries none.
//! * The REQ's 5 bytes reach the server's `CONNECT_REQUEST` in the REQ's 56-byte field
//!   after rdma_cm's header, zero-filled.
//! * Over UD (SIDR, `cma_sidr_rep_handler`): `rdma_reject` with 136 bytes is the client's
//!   `UNREACHABLE` with status 2 (rejected) and the SIDR_REP's 136 bytes; `rdma_accept`
//!   with 136 its `ESTABLISHED` with those bytes, the server QP's number, rdma_cm's Q_Key
//!   and a global address vector; 137 bytes: `EINVAL`. The SIDR_REQ's 5 bytes reach the
//!   server in its 180-byte field after rdma_cm's header.

mod common;

use std::io::Write;
use std::process::{Child, Output, Stdio};

use common::{Hosts, finish, text};

/// `private_data.c` behind what the rdma_cm programs share.
const PRIVATE_DATA: &str = concat!(include_str!("cm_prog.h"), include_str!("private_data.c"));

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The line of `out` that starts with `head`, fields split on spaces.
fn line<'a>(out: &'a str, head: &str) -> Vec<&'a str> {
    out.lines()
        .find(|l| l.starts_with(head))
        .unwrap_or_else(|| panic!("no {head:?} in:\n{out}"))
        .split(' ')
        .collect()
}

fn passed(c: Child, who: &str) -> (Output, String) {
    let o = finish(c, who);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{who}: {t}\n{}", text(&o));
    (o, t)
}

#[test]
fn rep_and_rej_private_data_reach_the_connecting_side() {
    let Some((h, prog)) = Hosts::with_prog(10, "rdmacm_private_data", PRIVATE_DATA) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let sa = h.addr[1].as_str();
    let s = h.listening(1, h.run(1, exe, &["server", sa, "7998"]));
    let c = h.run(0, exe, &["client", sa, "7998"]).spawn().unwrap();
    let (_, ct) = passed(c, "private_data client");
    let (_, st) = passed(s, "private_data server");

    let rej: Vec<u8> = (0..148u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(1))
        .collect();
    let rep: Vec<u8> = (0..196u8).map(|i| 255 - i).collect();
    assert_eq!(
        line(&st, "reject_149"),
        ["reject_149", "-1", "Invalid", "argument"]
    );
    assert_eq!(line(&st, "reject_148"), ["reject_148", "0", "ok"]);
    assert_eq!(
        line(&st, "accept_197"),
        ["accept_197", "-1", "Invalid", "argument"]
    );
    assert_eq!(line(&st, "accept_196"), ["accept_196", "0", "ok"]);
    let r = line(&ct, "event RDMA_CM_EVENT_REJECTED");
    assert_eq!(r[2..], ["28", "148", &hex(&rej)], "{ct}");
    let e = line(&ct, "event RDMA_CM_EVENT_ESTABLISHED");
    assert_eq!(e[2..], ["0", "196", &hex(&rep)], "{ct}");
    let e = line(&st, "event RDMA_CM_EVENT_ESTABLISHED");
    assert_eq!(e[2..], ["0", "0", ""], "{st}");
    let mut req = b"hello".to_vec();
    req.resize(56, 0);
    let q = line(&st, "event RDMA_CM_EVENT_CONNECT_REQUEST");
    assert_eq!(q[2..], ["0", "56", &hex(&req)], "{st}");
}

#[test]
fn sidr_rep_private_data_qpn_and_qkey_reach_the_resolving_side() {
    let Some((h, prog)) = Hosts::with_prog(18, "rdmacm_private_data_ud", PRIVATE_DATA) else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let sa = h.addr[1].as_str();
    let mut server = h.run(1, exe, &["udserver", sa, "7994"]);
    server.stdin(Stdio::piped());
    let mut s = h.listening(1, server);
    let c = h.run(0, exe, &["udclient", sa, "7994"]).spawn().unwrap();
    let (_, ct) = passed(c, "private_data udclient");
    writeln!(s.stdin.take().unwrap(), "go").unwrap();
    let (_, st) = passed(s, "private_data udserver");

    let rej: Vec<u8> = (0..136u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(1))
        .collect();
    let rep: Vec<u8> = (0..136u8).map(|i| 255 - i).collect();
    for (step, want) in [
        ("reject_137", "-1"),
        ("reject_136", "0"),
        ("accept_137", "-1"),
        ("accept_136", "0"),
    ] {
        assert_eq!(line(&st, step)[1], want, "{step}: {st}");
    }
    let r = line(&ct, "event RDMA_CM_EVENT_UNREACHABLE");
    assert_eq!(r[2..], ["2", "136", &hex(&rej)], "{ct}");
    let e = line(&ct, "event RDMA_CM_EVENT_ESTABLISHED");
    assert_eq!(e[2..], ["0", "136", &hex(&rep)], "{ct}");
    let qpn = line(&st, "qpn")[1];
    assert_eq!(
        line(&ct, "ud qpn"),
        ["ud", "qpn", qpn, "qkey", "0x1234567", "global", "1"],
        "{ct}"
    );
    let mut req = b"hello".to_vec();
    req.resize(180, 0);
    let q = line(&st, "event RDMA_CM_EVENT_CONNECT_REQUEST");
    assert_eq!(q[2..], ["0", "180", &hex(&req)], "{st}");
}
