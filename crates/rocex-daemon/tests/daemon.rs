//! End-to-end tests over real `rocexd` processes, real UDP sockets on loopback addresses
//! and real shared memory: a rocex-verbs client on each daemon.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use common::{T, daemon, end, every_op, loopback, ok, pair, pattern, post_garbage_slots};
use common::{post_undefined_opcode, ring_daemon, send_recv, write_burst};
use rocex_verbs::verbs::{QpState, SendOp, SendWr, WcOpcode, WcStatus};

#[test]
fn two_daemons_send_write_read_atomics() {
    let cap = std::env::temp_dir().join(format!("rocexd-test-{}.pcap", std::process::id()));
    let mut da = daemon("127.0.5.1", &["--pcap", cap.to_str().unwrap()]);
    let mut db = daemon("127.0.5.2", &[]);
    let mut a = end(&da.sock);
    let mut b = end(&db.sock);
    assert_eq!(a.ctx.gid_addr(), IpAddr::from([127, 0, 5, 1]));
    assert_eq!(a.ctx.query_port(1).unwrap().state, 4);
    pair(&a, &b);
    let (attr, _) = a.qp.query().unwrap();
    assert_eq!(attr.qp_state, QpState::Rts);
    assert_eq!(attr.dest_qp_num, b.qp.qpn());

    // Every operation, each checked where its data lands.
    every_op(&mut a, &mut b);

    // Many signaled WRITEs in flight, more than one ring's worth over time.
    for round in 0..4u64 {
        let wrs: Vec<SendWr> = (0..64)
            .map(|i| {
                SendWr::new(
                    100 + round * 64 + i,
                    SendOp::Write(b.mr.remote(i * 4096)),
                    vec![a.mr.sge(i * 4096, 4096)],
                )
            })
            .collect();
        a.qp.post_send(&wrs).unwrap();
        for i in 0..64 {
            ok(&mut a.cq, 100 + round * 64 + i, WcOpcode::RdmaWrite);
        }
    }

    drop((a, b));
    assert!(da.stop(), "daemon a did not shut down cleanly");
    assert!(db.stop(), "daemon b did not shut down cleanly");

    // The capture holds every frame both ways, as Ethernet/IPv4/UDP RoCE v2 frames whose
    // ICRCs check.
    assert!(cap.exists(), "no capture at {}", cap.display());
    let frames = rocex_dump::capture::read(&cap).expect("readable capture");
    let _ = std::fs::remove_file(&cap);
    assert!(frames.len() > 300, "{} frames", frames.len());
    for f in &frames {
        let parsed = rocex_wire::frame::Frame::parse(&f.data).expect("a RoCE v2 frame");
        assert!(
            matches!(parsed.check_icrc(), rocex_wire::frame::IcrcCheck::Valid(_)),
            "bad ICRC in the capture"
        );
    }
}

/// Run as a child process by `killed_client_leaves_daemon_serving`: streams WRITEs on a
/// loopback pair forever, after printing "running".
#[test]
fn child_client_entry() {
    let Some(sock) = std::env::var_os("ROCEX_TEST_CHILD_SOCKET") else {
        return;
    };
    let (mut x, y) = loopback(&PathBuf::from(sock));
    println!("running");
    let mut id = 0u64;
    loop {
        let _ = write_burst(&mut x, &y, &mut id);
    }
}

#[test]
fn killed_client_leaves_daemon_serving() {
    let mut d = daemon("127.0.5.3", &[]);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_client_entry", "--nocapture"])
        .env("ROCEX_TEST_CHILD_SOCKET", &d.sock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    while !line.contains("running") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "child exited early");
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(d.alive(), "daemon died with its client");
    let (mut x, mut y) = loopback(&d.sock);
    for id in 1..=5 {
        send_recv(&mut x, &mut y, id);
    }
    drop((x, y));
    assert!(d.stop());
}

#[test]
fn hostile_client_gets_errors_and_others_are_unaffected() {
    let mut d = ring_daemon("127.0.5.4", &[]);
    let (mut good_x, mut good_y) = loopback(&d.sock);
    let (mut bad, _bad_peer) = loopback(&d.sock);

    // An undefined opcode: completes with LOC_QP_OP_ERR, QP to error.
    post_undefined_opcode(&mut bad);
    // Reserved bits set on an otherwise valid SEND.
    let mut slot = [0u8; 128];
    slot[..8].copy_from_slice(&78u64.to_ne_bytes());
    slot[8] = 2;
    slot[10] = 0xf0;
    bad.qp.post_raw_send_slot(&slot).unwrap();
    let wc = bad.cq.poll_wait(T).unwrap();
    assert_eq!(wc.wr_id, 78);
    assert_ne!(wc.status, WcStatus::Success);
    // Random garbage slots: each completes with an error (the QP is in error now).
    post_garbage_slots(&mut bad, 0x1234_5678_9abc_def0, 20);
    // A producer index far ahead of anything posted: the ring is refused.
    bad.qp.corrupt_sq_producer(0x8000_0000).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(d.alive(), "daemon died on a hostile ring");

    // The other client works as before.
    for id in 1..=5 {
        send_recv(&mut good_x, &mut good_y, id);
    }
    // A garbage control frame closes only that connection.
    {
        use std::io::Write;
        let mut s = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
        let _ = s.write_all(&[0xff; 64]);
    }
    send_recv(&mut good_x, &mut good_y, 6);
    drop((good_x, good_y, bad));
    assert!(d.stop());
}

/// `--inject`: two daemons that lose 10%, duplicate 5% and reorder 10% of what they send
/// still move every WRITE and READ intact.
#[test]
fn injected_faults_are_survived() {
    let faults = ["--inject", "loss=0.1,dup=0.05,reorder=0.1,seed=3"];
    let mut da = daemon("127.0.5.5", &faults);
    let mut db = daemon("127.0.5.6", &faults);
    let mut a = end(&da.sock);
    let b = end(&db.sock);
    pair(&a, &b);
    for i in 0..40u64 {
        let data = pattern(i as u8, 16_384);
        let at = 16_384 * (i as usize % 16);
        a.mr.write(at, &data).unwrap();
        a.post(i, SendOp::Write(b.mr.remote(at as u64)), at as u64, 16_384);
        ok(&mut a.cq, i, WcOpcode::RdmaWrite);
        let mut got = vec![0; 16_384];
        b.mr.read(at, &mut got).unwrap();
        assert!(got == data, "WRITE {i} differs");
        a.post(
            100 + i,
            SendOp::Read(b.mr.remote(at as u64)),
            500_000,
            16_384,
        );
        ok(&mut a.cq, 100 + i, WcOpcode::RdmaRead);
        a.mr.read(500_000, &mut got).unwrap();
        assert!(got == data, "READ {i} differs");
    }
    assert!(da.stop() && db.stop());
}

#[test]
fn mr_bytes_at_any_offset_and_length() {
    let d = daemon("127.0.5.9", &[]);
    let e = end(&d.sock);
    let base = pattern(9, 64);
    for off in 0..9 {
        for len in 0..14 {
            e.mr.write(0, &base).unwrap();
            let data = pattern((off * 16 + len) as u8, len);
            e.mr.write(off, &data).unwrap();
            let mut want = base.clone();
            want[off..off + len].copy_from_slice(&data);
            let mut got = vec![0; 64];
            e.mr.read(0, &mut got).unwrap();
            assert_eq!(got, want, "write of {len} bytes at {off}");
            let mut part = vec![0; len];
            e.mr.read(off, &mut part).unwrap();
            assert_eq!(part, data, "read of {len} bytes at {off}");
        }
    }
}
