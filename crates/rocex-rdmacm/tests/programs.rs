//! Debian's rdma_cm programs, unmodified, on two rocex hosts (`common::Hosts`), each end
//! under `rocex run` with the drop-in librdmacm and libibverbs: rping checks the data it
//! reads back (`-V`), ucmatose and rdma_server/rdma_client exchange messages over their
//! connections and report success, perftest's `-R` makes its connections with rdma_cm,
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

#[test]
fn rdma_server_and_rdma_client_exchange_a_message() {
    let Some(h) = Hosts::up(4, &["rdma_server", "rdma_client"]) else {
        return;
    };
    let s = h.run(1, "rdma_server", &[]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let c = common::finish(
        h.run(0, "rdma_client", &["-s", &h.addr[1]])
            .spawn()
            .unwrap(),
        "rdma_client",
    );
    let s = common::finish(s, "rdma_server");
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
