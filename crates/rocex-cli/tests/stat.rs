//! `rocex stat --json` against a `rocexd` that moved data: the engine's counters (rxe's
//! names) count the packets both ways, the daemon's count its clients and registered
//! bytes, each QP shows its state and PSNs, and `--qp` and `--inject` add what they
//! should. Daemons on 127.0.6.7 and 127.0.6.8.
//!
//! The daemon is `$ROCEXD`, else the `rocexd` built next to the `rocex` under test.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{connect, daemon, rc_attrs, rc_qp};
use rocex_verbs::verbs::{RecvWr, SendOp, SendWr, WcOpcode, WcStatus};
use rocex_verbs::{Access, Context, Cq, Mr, Pd, Qp};
use serde_json::Value;

const T: Duration = Duration::from_secs(10);

const ACCESS: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE);

struct End {
    qp: Qp,
    cq: Cq,
    mr: Mr,
    _pd: Pd,
    ctx: Context,
}

fn end(sock: &Path) -> End {
    let ctx = Context::open(sock).expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 16, ACCESS).unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    let qp = rc_qp(&pd, &cq);
    End {
        qp,
        cq,
        mr,
        _pd: pd,
        ctx,
    }
}

/// Two connected endpoints on one daemon: x sends from PSN 0x1234, y from 0xabcde.
fn loopback(sock: &Path) -> (End, End) {
    let (x, y) = (end(sock), end(sock));
    connect(
        &x.qp,
        &rc_attrs(0x1234, (y.ctx.gid_addr(), y.qp.qpn(), 0xabcde), ACCESS),
    );
    connect(
        &y.qp,
        &rc_attrs(0xabcde, (x.ctx.gid_addr(), x.qp.qpn(), 0x1234), ACCESS),
    );
    (x, y)
}

fn ok(cq: &mut Cq, id: u64, op: WcOpcode) {
    let wc = cq.poll_wait(T).expect("completion");
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (id, WcStatus::Success, op),
        "{wc:?}"
    );
}

/// `n` SENDs of 3000 bytes (three packets each at MTU 1024) from x to y, data checked.
fn sends(x: &mut End, y: &mut End, n: u64) {
    for id in 1..=n {
        let msg: Vec<u8> = (0..3000u32).map(|i| (i as u8) ^ id as u8).collect();
        x.mr.write(0, &msg).unwrap();
        let recv = RecvWr {
            wr_id: id,
            sges: vec![y.mr.sge(0, 3000)].into(),
        };
        y.qp.post_recv(&[recv]).unwrap();
        let send = SendWr::new(id, SendOp::Send, vec![x.mr.sge(0, 3000)]);
        x.qp.post_send(&[send]).unwrap();
        ok(&mut x.cq, id, WcOpcode::Send);
        ok(&mut y.cq, id, WcOpcode::Recv);
        let mut got = vec![0; 3000];
        y.mr.read(0, &mut got).unwrap();
        assert_eq!(got, msg);
    }
}

fn stat(sock: &Path, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_rocex"))
        .args(["stat", "--json", "--socket"])
        .arg(sock)
        .args(extra)
        .output()
        .expect("run rocex stat");
    assert!(
        out.status.success(),
        "rocex stat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a counter"))
}

#[test]
fn stat_json_counts_the_traffic_moved() {
    let d = daemon("127.0.6.7", &[]);
    let (mut x, mut y) = loopback(&d.sock);
    let before = stat(&d.sock, &[]);
    let msgs = 20;
    sends(&mut x, &mut y, msgs);
    // A retransmission on a busy machine can leave a duplicate and its ACK in flight
    // after the last completion: read until every packet sent has arrived.
    let mut v = stat(&d.sock, &[]);
    for _ in 0..100 {
        let e = &v["device"]["engine"];
        if e["sent_pkts"] == e["rcvd_pkts"] {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        v = stat(&d.sock, &[]);
    }
    let (e, was) = (&v["device"]["engine"], &before["device"]["engine"]);
    let grew = |name: &str| n(&e[name]) - n(&was[name]);
    // Both ends are on this device: every packet sent over loopback comes back in.
    assert!(grew("sent_pkts") > msgs * 3, "{e}");
    assert_eq!(grew("sent_pkts"), grew("rcvd_pkts"), "{e}");
    assert_eq!(grew("rdma_sends"), msgs);
    assert_eq!(grew("rdma_recvs"), msgs);
    for none in ["send_err", "drop_icrc", "drop_malformed", "drop_no_qp"] {
        assert_eq!(n(&e[none]), 0, "{none}: {e}");
    }

    // The backend handed over and sent exactly what the engine counted.
    let (b, bwas) = (&v["device"]["backend"], &before["device"]["backend"]);
    let bgrew = |name: &str| n(&b[name]) - n(&bwas[name]);
    assert_eq!(bgrew("tx_packets"), grew("sent_pkts"), "{b}");
    assert_eq!(bgrew("rx_packets"), grew("rcvd_pkts"), "{b}");

    let dm = &v["device"]["daemon"];
    assert_eq!(n(&dm["clients"]), 3, "two ends and rocex stat itself: {dm}");
    assert_eq!(n(&dm["request_errors"]), 0, "{dm}");
    assert_eq!(n(&dm["qps"]), 2);
    assert_eq!(n(&dm["registered_bytes"]), 2 << 16);
    assert!(v["device"].get("inject").is_none());

    let all = v["qps"].as_array().unwrap();
    // The daemon's own QP 1 (GSI, UD) carries the connection manager's MADs.
    let (gsi, qps): (Vec<_>, Vec<_>) = all.iter().partition(|q| n(&q["qpn"]) == 1);
    assert_eq!(gsi.len(), 1, "{v}");
    assert_eq!(gsi[0]["type"].as_str(), Some("UD"));
    assert_eq!(qps.len(), 2);
    for q in &qps {
        assert_eq!(
            (q["type"].as_str(), q["state"].as_str()),
            (Some("RC"), Some("RTS"))
        );
        assert_eq!(q["sq_psn"], q["unacked_psn"], "all acknowledged: {q}");
        assert_eq!(n(&q["sq_wqes"]), 0);
    }
    // Each QP's share of the transport's counters: together, the device's.
    for name in [
        "retransmitted_pkts",
        "rcvd_rnr_err",
        "send_rnr_err",
        "rcvd_seq_err",
        "nak_psn_sequence",
        "duplicate_request",
    ] {
        let per_qp: u64 = all.iter().map(|q| n(&q[name])).sum();
        assert_eq!(per_qp, n(&e[name]), "{name}: {v}");
    }
    let find = |qpn: u32| qps.iter().find(|q| n(&q["qpn"]) == u64::from(qpn)).unwrap();
    let (xq, yq) = (find(x.qp.qpn()), find(y.qp.qpn()));
    assert_eq!(n(&xq["sq_psn"]), 0x1234 + msgs * 3);
    assert_eq!(yq["rq_psn"], xq["sq_psn"]);
    assert_eq!(n(&yq["msn"]), msgs);

    // --qp: the device's groups and that QP only.
    let one = stat(&d.sock, &["--qp", &format!("{:#x}", y.qp.qpn())]);
    assert_eq!(one["qps"].as_array().unwrap().len(), 1);
    assert_eq!(one["qps"][0]["qpn"], yq["qpn"]);
    assert!(one["device"]["engine"]["sent_pkts"].is_u64());

    // Text names the counters as `rdma statistic` does.
    let out = Command::new(env!("CARGO_BIN_EXE_rocex"))
        .args(["stat", "--socket"])
        .arg(&d.sock)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(" engine sent_pkts "), "{text}");
    assert!(text.contains(" type RC state RTS sq_psn "), "{text}");

    // A QP that does not exist is an error, not an empty answer.
    let out = Command::new(env!("CARGO_BIN_EXE_rocex"))
        .args(["stat", "--qp", "0xfffff", "--socket"])
        .arg(&d.sock)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn stat_shows_injected_faults() {
    let d = daemon("127.0.6.8", &["--inject", "loss=0.2,seed=3"]);
    let (mut x, mut y) = loopback(&d.sock);
    sends(&mut x, &mut y, 20);
    let v = stat(&d.sock, &[]);
    let inj = &v["device"]["inject"];
    let lost = n(&inj["lost"]);
    assert!(lost > 0, "{inj}");
    let e = &v["device"]["engine"];
    // What was lost on the way out never came back in, and the losses were made good.
    assert!(n(&e["rcvd_pkts"]) + lost <= n(&e["sent_pkts"]), "{v}");
    assert!(n(&e["retransmitted_pkts"]) > 0, "{e}");
    assert_eq!(n(&e["send_err"]), 0, "{e}");
}
