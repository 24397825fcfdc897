//! Debian's rdma_cm programs, unmodified, on two rocex hosts (`common::Hosts`), each end
//! under `rocex run` with the drop-in librdmacm and libibverbs: rping checks the data it
//! reads back (`-V`), ucmatose and rdma_server/rdma_client exchange messages over their
//! connections and report success, udaddy resolves UD services with SIDR and exchanges
//! datagrams, perftest's `-R` makes its connections with rdma_cm,
//! and fio's rdma engine moves its blocks with RDMA WRITE and RDMA READ.

mod common;

use common::Hosts;

#[test]
fn rping_validates_ten_pings() {
    let Some(h) = Hosts::up(2, &["rping"]) else {
        return;
    };
    let a = h.addr[1].as_str();
    let (c, s) = h.both_pass(
        "rping",
        &["-s", "-v", "-V", "-C", "10", "-a", a],
        &["-c", "-v", "-V", "-C", "10", "-a", a],
    );
    // rping's pattern in its 64-byte buffer: "rdma-ping-i: ", then characters from
    // 'A' + i cycling over 'A'..='z' up to the terminating NUL.
    for i in 0..10u8 {
        let head = format!("rdma-ping-{i}: ");
        let data: String = (0..(63 - head.len()) as u8)
            .map(|k| char::from(b'A' + (i + k) % (b'z' - b'A' + 1)))
            .collect();
        let line = format!("ping data: {head}{data}");
        assert!(c.lines().any(|l| l == line), "client lacks {line:?}:\n{c}");
        assert!(
            s.lines().any(|l| l == format!("server {line}")),
            "server lacks {line:?}:\n{s}"
        );
    }
}

#[test]
fn ucmatose_completes_four_connections() {
    let Some(h) = Hosts::up(3, &["ucmatose"]) else {
        return;
    };
    let (c, s) = h.both_pass(
        "ucmatose",
        &["-c", "4", "-C", "20"],
        &["-c", "4", "-C", "20", "-s", &h.addr[1]],
    );
    for t in [&c, &s] {
        assert!(t.contains("data transfers complete"), "{t}");
        assert!(t.contains("test complete\nreturn status 0"), "{t}");
    }
}

/// rdma_cm over UD: udaddy's client resolves the server's UD QP with SIDR (rocexd's CM
/// sends the SIDR_REQ, the server's answers its `rdma_accept` with the QPN and Q_Key),
/// then both ends exchange datagrams through address handles made from the
/// `ESTABLISHED` event's and the completions' address vectors. On the wire, as tshark
/// decodes the MADs on QP1: four SIDR_REQs (CM class 7, version 2, Send, attribute 0x17)
/// for the UDP port space's service ID of udaddy's port 7174, each answered by a SIDR_REP
/// (attribute 0x18) echoing its request ID with status 0, a QPN and rdma_cm's Q_Key
/// 0x01234567 (IBTA tables 113 and 114); the client's datagrams go to those QPNs with
/// that Q_Key.
#[test]
fn udaddy_resolves_four_ud_services_and_exchanges_datagrams() {
    let Some(h) = Hosts::up(14, &["udaddy"]) else {
        return;
    };
    let pcap = std::env::temp_dir().join(format!("rocex-udaddy-{}.pcap", std::process::id()));
    let Some(cap) = h.capture(0, &pcap) else {
        return;
    };
    let (c, s) = h.both_pass(
        "udaddy",
        &["-c", "4", "-C", "20"],
        &["-c", "4", "-C", "20", "-s", &h.addr[1]],
    );
    cap.stop();
    for t in [&c, &s] {
        assert!(t.contains("data transfers complete"), "{t}");
        assert!(t.contains("test complete\nreturn status 0"), "{t}");
    }
    assert!(c.contains("receiving data transfers"), "{c}");
    let mads = common::tshark(
        &pcap,
        "infiniband.mad.mgmtclass == 0x07",
        &[
            "ip.src",
            "infiniband.mad.classversion",
            "infiniband.mad.method",
            "infiniband.mad.attributeid",
            "infiniband.mad.data",
        ],
    );
    let data = |r: &Vec<String>| -> Vec<u8> {
        let hex = r[4].replace(':', "");
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let of = |attr: &str| -> Vec<Vec<u8>> {
        mads.iter()
            .filter(|r| r[3] == attr)
            .map(|r| {
                assert_eq!((r[1].as_str(), r[2].as_str()), ("0x02", "0x03"), "{r:?}");
                data(r)
            })
            .collect()
    };
    let (reqs, reps) = (of("0x0017"), of("0x0018"));
    assert_eq!((reqs.len(), reps.len()), (4, 4), "{mads:?}");
    let mut qpns = Vec::new();
    for req in &reqs {
        assert_eq!(req[8..16], 0x0111_1c06u64.to_be_bytes(), "service ID");
        let rep = reps
            .iter()
            .find(|r| r[..4] == req[..4])
            .expect("a SIDR_REP with the request's ID");
        assert_eq!(rep[4], 0, "status");
        assert_eq!(rep[12..20], req[8..16], "service ID");
        assert_eq!(rep[20..24], [0x01, 0x23, 0x45, 0x67], "Q_Key");
        qpns.push(u32::from_be_bytes([0, rep[8], rep[9], rep[10]]));
    }
    let sends = common::tshark(
        &pcap,
        &format!("ip.src == {} && infiniband.deth", h.addr[0]),
        &["infiniband.bth.destqp", "infiniband.deth.q_key"],
    );
    // The daemon sends runs of datagrams as one UDP GSO send, which the capture on the
    // veth holds as one frame: tshark decodes the first datagram of each.
    let sends: Vec<_> = sends.iter().filter(|r| r[0] != "0x000001").collect();
    assert!(!sends.is_empty(), "no datagram from the client");
    let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap();
    for r in sends {
        assert!(
            qpns.contains(&(hex(&r[0]) as u32)),
            "{r:?} not among {qpns:x?}"
        );
        assert_eq!(hex(&r[1]), 0x0123_4567, "{r:?}");
    }
    let _ = std::fs::remove_file(&pcap);
}

/// `RDMA_OPTION_ID_TOS` (ucmatose's `-t`, set by the client only) is the traffic class of
/// the path: the REQ carries it in its primary path (tshark's `prim_tfcclass`) and both
/// QPs' packets leave with it as their IP TOS byte, as on the kernel's rdma_cm, where the
/// passive side takes the REQ's path.
#[test]
fn the_tos_option_is_both_ends_ip_tos() {
    let Some(h) = Hosts::up(16, &["ucmatose"]) else {
        return;
    };
    let pcap = std::env::temp_dir().join(format!("rocex-tos-{}.pcap", std::process::id()));
    let Some(cap) = h.capture(0, &pcap) else {
        return;
    };
    let (c, s) = h.both_pass(
        "ucmatose",
        &["-c", "2", "-C", "10"],
        &["-c", "2", "-C", "10", "-t", "184", "-s", &h.addr[1]],
    );
    cap.stop();
    for t in [&c, &s] {
        assert!(t.contains("test complete\nreturn status 0"), "{t}");
    }
    let reqs = common::tshark(
        &pcap,
        "infiniband.cm.req",
        &["infiniband.cm.req.prim_tfcclass"],
    );
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    for r in &reqs {
        assert_eq!(r[0], "0xb8", "{reqs:?}");
    }
    let data = common::tshark(
        &pcap,
        "infiniband.bth && infiniband.bth.destqp != 1",
        &["ip.src", "ip.dsfield"],
    );
    for a in &h.addr {
        assert!(data.iter().any(|r| &r[0] == a), "none from {a}: {data:?}");
    }
    for r in &data {
        assert_eq!(r[1], "0xb8", "{data:?}");
    }
    let _ = std::fs::remove_file(&pcap);
}

/// Debian's cmtime (rdma-core 44): the client makes and ends 20 connections and prints its
/// table of step times. Its server never ends by design (it loops in `rdma_get_cm_event`
/// until that fails, on rxe too: docs/verbs.md); what it must do is handle every
/// `DISCONNECTED`, whose thread disconnects and destroys the id and its QP, so that its
/// rocexd holds none of its QPs once the client is done, while the server still runs.
#[test]
fn cmtime_connects_and_its_server_frees_every_connection() {
    let Some(h) = Hosts::up(17, &["cmtime"]) else {
        return;
    };
    let mut server = h.listening(1, h.run(1, "cmtime", &["-c", "20"]));
    let c = common::finish(
        h.run(0, "cmtime", &["-c", "20", "-s", &h.addr[1]])
            .spawn()
            .unwrap(),
        "cmtime",
    );
    let ct = common::text(&c);
    assert!(c.status.success(), "{ct}");
    for step in [
        "create id",
        "resolve addr",
        "resolve route",
        "create qp",
        "connect",
        "disconnect",
    ] {
        assert!(
            ct.lines().any(|l| l.starts_with(step) && l.contains(':')),
            "no {step} row: {ct}"
        );
    }
    // The server's QPs (the daemon's count of its clients' QPs) go as its disconnect
    // thread destroys them; bounded, as everything a test waits for.
    let qps = || h.daemon_counter(1, "qps");
    let end = std::time::Instant::now() + common::LIMIT;
    while qps() != 0 && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(qps(), 0, "the server kept QPs of ended connections");
    assert!(
        server.try_wait().unwrap().is_none(),
        "cmtime's server ended"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn rdma_server_and_rdma_client_exchange_a_message() {
    let Some(h) = Hosts::up(4, &["rdma_server", "rdma_client"]) else {
        return;
    };
    let (c, s) = h.server_and_client(("rdma_server", &[]), ("rdma_client", &["-s", &h.addr[1]]));
    let (ct, st) = (common::text(&c), common::text(&s));
    assert!(
        c.status.success() && ct.contains("rdma_client: end 0"),
        "{ct}\n{st}"
    );
    assert!(
        s.status.success() && st.contains("rdma_server: end 0"),
        "{ct}\n{st}"
    );
}

/// The result row of a perftest report: the first line whose first two columns are
/// `bytes` and `iterations`.
fn perftest_row<'a>(t: &'a str, bytes: &str, iters: &str) -> Option<&'a str> {
    t.lines()
        .find(|l| l.split_whitespace().take(2).eq([bytes, iters]))
}

#[test]
fn perftest_connects_with_rdma_cm() {
    let Some(h) = Hosts::up(5, &["ib_write_bw", "ib_send_lat"]) else {
        return;
    };
    let peer = h.addr[1].as_str();
    let (c, s) = h.both_pass(
        "ib_write_bw",
        &["-R", "-n", "1000"],
        &["-R", "-n", "1000", peer],
    );
    for t in [&c, &s] {
        assert!(t.contains("rdma_cm QPs\t : ON"), "{t}");
        assert!(perftest_row(t, "65536", "1000").is_some(), "{t}");
    }
    let (c, s) = h.both_pass(
        "ib_send_lat",
        &["-R", "-n", "200"],
        &["-R", "-n", "200", peer],
    );
    for t in [&c, &s] {
        assert!(perftest_row(t, "2", "200").is_some(), "{t}");
    }
    let (c, _) = h.both_pass(
        "ib_read_bw",
        &["-R", "-n", "500"],
        &["-R", "-n", "500", peer],
    );
    assert!(perftest_row(&c, "65536", "500").is_some(), "{c}");
    let (c, _) = h.both_pass(
        "ib_atomic_bw",
        &["-R", "-n", "200"],
        &["-R", "-n", "200", peer],
    );
    assert!(perftest_row(&c, "8", "200").is_some(), "{c}");
}

/// fio's rdma engine: a `rw=read` job serves (its buffers are the remote memory), a
/// `rw=write` job with `verb=VERB` drives the transfers. fio's engine is diskless, so
/// fio has nothing to verify against: the test checks that every block moved.
fn fio_moves_every_block(h: &Hosts, verb: &str) {
    let port = "--port=7471";
    let job = ["--bs=64k", "--size=4m", "--iodepth=4", "--thread"];
    let mut server = vec!["--name=srv", "--ioengine=rdma", port, "--rw=read"];
    server.extend(job);
    let host = format!("--hostname={}", h.addr[1]);
    let verb = format!("--verb={verb}");
    let mut client = vec![
        "--name=cli",
        "--ioengine=rdma",
        &host,
        port,
        &verb,
        "--rw=write",
    ];
    client.extend(job);
    let (c, s) = h.both_pass("fio", &server, &client);
    assert!(c.contains("cli: (groupid=0, jobs=1): err= 0"), "{c}");
    assert!(
        c.contains("issued rwts: total=0,64,0,0 short=0,0,0,0"),
        "{c}"
    );
    assert!(c.contains("io=4096KiB"), "{c}");
    assert!(s.contains("srv: (groupid=0, jobs=1): err= 0"), "{s}");
}

#[test]
fn fio_rdma_engine_writes_and_reads() {
    let Some(h) = Hosts::up(6, &["fio"]) else {
        return;
    };
    fio_moves_every_block(&h, "write");
    fio_moves_every_block(&h, "read");
}
