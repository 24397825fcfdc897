//! Bad input to the drop-in librdmacm (`bad_input.c`, built against the system's
//! `<rdma/rdma_cma.h>` and run under `rocex run`, which gives it rocex's librdmacm and
//! libibverbs, the one rdma_get_devices opens) gets rdma-core's answers on kernel rxe:
//! the errno of the kernel's checks (`ucma_set_option_id`, `rdma_bind_addr`,
//! `rdma_connect`'s state and private-data length), an `ADDR_ERROR` event for an address
//! no route reaches, and for a host where nothing listens the peer CM's REJ (reason 8,
//! invalid service ID) as a `REJECTED` event, not a hang, and for a UD id the SIDR_REP's
//! status 1 (service ID not supported) as an `UNREACHABLE` event. Multicast, which rocex
//! does not have, says so (`EOPNOTSUPP`), also to Debian's mckey.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::{Hosts, build_dropin, finish, libdir, text};

#[test]
fn rdma_cm_refuses_bad_input_as_rdma_core_does() {
    let Some((h, prog)) = Hosts::with_prog(1, "rdmacm_bad_input", include_str!("bad_input.c"))
    else {
        return;
    };
    let exe = prog.exe.to_str().unwrap();
    let o = finish(
        h.run(
            0,
            exe,
            &[&h.addr[1], "198.19.255.1", "198.18.99.1", &libdir()],
        )
        .spawn()
        .unwrap(),
        "bad_input",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let want = "devices 1 rocex0\n\
                librdmacm rocex 1\n\
                libibverbs rocex 1\n\
                get_event_empty -1 Resource temporarily unavailable\n\
                create_id_bad_ps -1 Invalid argument\n\
                create_id 0 ok\n\
                option_unknown_name -1 Function not implemented\n\
                option_unknown_level -1 Function not implemented\n\
                option_tos_bad_len -1 Invalid argument\n\
                option_tos 0 ok\n\
                option_reuseaddr 0 ok\n\
                bind_foreign -1 Cannot assign requested address\n\
                resolve_unrouted 0 ok\n\
                unrouted_event RDMA_CM_EVENT_ADDR_ERROR Network is unreachable\n\
                resolve 0 ok\n\
                event RDMA_CM_EVENT_ADDR_RESOLVED 0\n\
                connect_before_route -1 Invalid argument\n\
                resolve_route 0 ok\n\
                event RDMA_CM_EVENT_ROUTE_RESOLVED 0\n\
                connect_without_qp -1 Invalid argument\n\
                create_qp 0 ok\n\
                connect_57_bytes -1 Invalid argument\n\
                connect 0 ok\n\
                connect_event RDMA_CM_EVENT_REJECTED 8\n\
                disconnect_rejected 0 ok\n\
                resolve_destroyed -1 Invalid argument\n\
                destroy_destroyed -1 Invalid argument\n\
                create_id_udp 0 ok\n\
                create_qp_ud 0 ok\n\
                connect_ud_181_bytes -1 Invalid argument\n\
                connect_ud 0 ok\n\
                connect_ud_event RDMA_CM_EVENT_UNREACHABLE 1\n\
                create_id_ipoib -1 Operation not supported\n\
                join_multicast -1 Operation not supported\n\
                librdmacm (rocex): RDMA_PS_IPOIB needs IPoIB's multicast groups, which rocex \
                does not have (docs/verbs.md)\n\
                librdmacm (rocex): rdma_join_multicast: rocex has no multicast groups \
                (docs/verbs.md)\n";
    assert_eq!(t, want);
}

/// Multicast (mckey) is not in rocex: Debian's mckey stops at once with "Operation not
/// supported" from `rdma_join_multicast`, and the library says why on stderr, not a hang.
#[test]
fn mckey_says_what_rocex_lacks() {
    let Some(h) = Hosts::up(7, &["mckey"]) else {
        return;
    };
    let why = "librdmacm (rocex): rdma_join_multicast: rocex has no multicast groups \
               (docs/verbs.md)";
    let peer = h.addr[1].as_str();
    let o = finish(h.run(0, "mckey", &["-m", peer]).spawn().unwrap(), "mckey");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains(why), "{t}");
    assert!(t.contains("Operation not supported"), "{t}");
}

/// rocexd killed under a listening rping: the listener gets `DEVICE_REMOVAL`, as the
/// kernel's ids do when their device goes, and rping ends with its message rather than
/// waiting forever for a client. A device listed while the daemon lived and opened after
/// it died fails with the socket's own errno, not a generic one: `ECONNREFUSED` while the
/// dead daemon's socket file is left, `ENOENT` once it is gone.
#[test]
fn a_dead_daemon_is_device_removal() {
    let Some(mut h) = Hosts::up(8, &["rping"]) else {
        return;
    };
    let Some(prog) = build_dropin(
        "rdmacm_open_after_death",
        include_str!("open_after_death.c"),
        &["libibverbs.so.1"],
    ) else {
        return;
    };
    let a = h.addr[1].clone();
    let server = h.listening(1, h.run(1, "rping", &["-s", "-v", "-a", &a]));
    let mut opener = h
        .run(1, prog.exe.to_str().unwrap(), &[])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(opener.stdout.take().unwrap()).lines();
    let mut ask = opener.stdin.take().unwrap();
    assert_eq!(said.next().unwrap().unwrap(), "listed 1");
    let mut open = || {
        writeln!(ask, "open").unwrap();
        said.next().unwrap().unwrap()
    };
    assert_eq!(open(), "open ok");
    h.kill_daemon(1);
    let o = finish(server, "rping -s");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("cma detected device removal"), "{t}");
    assert_eq!(open(), "open: Connection refused");
    std::fs::remove_file(h.socket(1)).unwrap();
    assert_eq!(open(), "open: No such file or directory");
    drop(ask);
    assert!(finish(opener, "open_after_death").status.success());
}
