//! `rocex top` against a `rocexd` holding QPs this test made: into a pipe it prints one
//! view, with the daemon's totals, a line for this test's process (its QPs and queued
//! work requests) and a line per QP showing its type, state, queue depths, retries left
//! and owner as the test set them; on a terminal (`script` gives it one) it redraws
//! the view in place every interval; a QP whose SEND found no receive shows its RNR NAKs
//! and the packets it sent again. Daemons on 127.0.6.21 to 127.0.6.23.

mod common;
mod run;

use std::net::IpAddr;
use std::process::Command;
use std::time::Duration;

use common::{daemon, rc_qp};
use rocex_verbs::verbs::{QpAttr, RecvWr, SendOp, SendWr, WcStatus};
use rocex_verbs::{Access, Context, Qp};

const LIMIT: Duration = Duration::from_secs(30);

/// RESET → INIT → RTR → RTS towards `peer` (address, QPN), retry counts 6 and 5.
fn connect(qp: &Qp, peer: (IpAddr, u32)) {
    let to_rts = QpAttr {
        retry_cnt: 6,
        rnr_retry: 5,
        ..common::rc_attrs(0, (peer.0, peer.1, 0), Access::LOCAL_WRITE)
    };
    common::connect(qp, &to_rts);
}

/// The QP lines of a view, by QPN as `top` prints it: TYPE STATE TX RX INFLIGHT SQ RQ
/// RETRY RNR RETX RNR-IN RNR-OUT SEQ-IN SEQ-OUT DUP PID.
fn qp_line(view: &str, qpn: u32) -> Vec<&str> {
    let key = format!("{qpn:#x}");
    view.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&key.as_str()))
        .unwrap_or_else(|| panic!("no line for QP {key} in:\n{view}"))
}

#[test]
fn a_piped_top_prints_one_view_of_the_qps() {
    let d = daemon("127.0.6.21", &[]);
    let ctx = Context::open(&d.sock).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 16, Access::LOCAL_WRITE).unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    let (x, mut y, idle) = (rc_qp(&pd, &cq), rc_qp(&pd, &cq), rc_qp(&pd, &cq));
    connect(&x, (ctx.gid_addr(), y.qpn()));
    connect(&y, (ctx.gid_addr(), x.qpn()));
    let recvs: Vec<RecvWr> = (0..5).map(|i| RecvWr::new(i, [mr.sge(0, 64)])).collect();
    y.post_recv(&recvs).unwrap();

    let r = run::run(
        &["top", "--socket", d.sock.to_str().unwrap(), "-d", "0.2"],
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{r}");
    let head = format!("rocexd 127.0.6.21 ({})  clients 2  qps 3", d.sock.display());
    assert!(r.stdout.starts_with(&head), "{r}");
    assert!(
        !r.stdout.contains('\x1b'),
        "no terminal codes into a pipe: {r}"
    );
    assert_eq!(
        r.stdout.matches("QPN TYPE STATE").count(),
        1,
        "one view: {r}"
    );
    let pid = std::process::id().to_string();
    let ly = qp_line(&r.stdout, y.qpn());
    assert_eq!(
        (ly[1], ly[2], ly[7], ly[8], ly[9], ly[16]),
        ("RC", "RTS", "5", "6", "5", pid.as_str()),
        "{r}"
    );
    // This process's line: PID COMMAND QPS TX RX SQ RQ, its command as the kernel names
    // it (the first 15 bytes of the test binary's name).
    let me: Vec<&str> = r
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&pid.as_str()))
        .unwrap_or_else(|| panic!("no line for this process in {r}"));
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!((me[1], me[2], me[6]), (comm.trim(), "3", "5"), "{r}");
    assert_eq!(&qp_line(&r.stdout, x.qpn())[1..3], ["RC", "RTS"], "{r}");
    assert_eq!(qp_line(&r.stdout, idle.qpn())[2], "RESET", "{r}");
}

#[test]
fn top_shows_each_qps_rnr_naks_and_the_packets_it_sent_again() {
    let d = daemon("127.0.6.23", &[]);
    let ctx = Context::open(&d.sock).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 16, Access::LOCAL_WRITE).unwrap();
    let mut cq = ctx.create_cq(64, None).unwrap();
    let (mut x, y) = (rc_qp(&pd, &cq), rc_qp(&pd, &cq));
    connect(&x, (ctx.gid_addr(), y.qpn()));
    connect(&y, (ctx.gid_addr(), x.qpn()));
    // y posts no receive: x's SEND gets an RNR NAK, and so does each of its five RNR
    // retries (rnr_retry 5); the sixth NAK fails it.
    let send = SendWr::new(1, SendOp::Send, [mr.sge(0, 64)]);
    x.post_send(&[send]).unwrap();
    let wc = cq.poll_wait(LIMIT).unwrap();
    assert_eq!(
        (wc.wr_id, wc.status),
        (1, WcStatus::RnrRetryExcErr),
        "{wc:?}"
    );

    let r = run::run(
        &["top", "--socket", d.sock.to_str().unwrap(), "-d", "0.1"],
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{r}");
    // RETX RNR-IN RNR-OUT SEQ-IN SEQ-OUT DUP.
    let lx = qp_line(&r.stdout, x.qpn());
    assert_eq!(
        (lx[2], &lx[10..16]),
        ("ERR", &["5", "6", "0", "0", "0", "0"][..]),
        "{r}"
    );
    let ly = qp_line(&r.stdout, y.qpn());
    assert_eq!(&ly[10..16], ["0", "0", "6", "0", "0", "0"], "{r}");
}

#[test]
fn top_on_a_terminal_redraws_in_place() {
    let test = "top_on_a_terminal_redraws_in_place";
    let Some(script) = rocex_testkit::require_tool(test, "script") else {
        return;
    };
    let d = daemon("127.0.6.22", &[]);
    let cmd = format!(
        "'{}' top --socket '{}' -d 0.1 -n 3",
        env!("CARGO_BIN_EXE_rocex"),
        d.sock.display()
    );
    let r = run::finish(
        run::spawn(Command::new(script).args(["-qfec", &cmd, "/dev/null"])),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{r}");
    assert_eq!(
        r.stdout.matches("\x1b[H\x1b[2Jrocexd 127.0.6.22").count(),
        3,
        "{r}"
    );
}
