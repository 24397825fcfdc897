//! What the limit and lifecycle tests share: a `rocexd` child process that can be killed
//! with SIGKILL, and a loopback RC pair on one daemon.

#![allow(dead_code)] // each test binary uses its own part

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use rocex_verbs::verbs::{
    AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendOp, SendWr, WcOpcode,
    WcStatus,
};
use rocex_verbs::{Access, Context, Cq, Mr, Pd, Qp, QpInitAttr};

/// How long anything may take before the test fails.
pub(crate) const T: Duration = Duration::from_secs(10);

/// A daemon process, killed on drop.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) sock: PathBuf,
}

/// A socket path in a fresh directory of its own.
pub(crate) fn socket_in(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocexd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("d.sock")
}

impl Daemon {
    /// `rocexd --addr addr --socket sock extra...`, once its socket answers.
    pub(crate) fn start(addr: &str, sock: &Path, extra: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_rocexd"))
            .args(["--addr", addr, "--socket"])
            .arg(sock)
            .args(["--spin-limit", "200"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .spawn()
            .expect("start rocexd");
        let mut d = Self {
            child,
            sock: sock.to_owned(),
        };
        let end = Instant::now() + T;
        while std::os::unix::net::UnixStream::connect(sock).is_err() {
            assert!(d.alive(), "rocexd on {addr} exited at start");
            assert!(Instant::now() < end, "rocexd on {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    pub(crate) fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGKILL: no clean shutdown, the socket file stays behind.
    pub(crate) fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        if let Some(d) = self.sock.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub(crate) const ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// One endpoint: context, PD, MR, CQ, QP (dropped in that order).
pub(crate) struct End {
    pub(crate) qp: Qp,
    pub(crate) cq: Cq,
    pub(crate) mr: Mr,
    pub(crate) pd: Pd,
    pub(crate) ctx: Context,
}

pub(crate) fn end(sock: &Path) -> End {
    let ctx = Context::open(sock).expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 16, ACCESS).unwrap();
    let cq = ctx.create_cq(64, None).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            cap: QpCap::default(),
        })
        .unwrap();
    End {
        qp,
        cq,
        mr,
        pd,
        ctx,
    }
}

/// RESET → INIT → RTR → RTS towards `peer` (address, QPN, its send PSN).
fn connect(qp: &Qp, my_psn: u32, peer: (IpAddr, u32, u32)) {
    let mut a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: ACCESS,
        ..QpAttr::default()
    };
    let init = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
    qp.modify(&a, init).unwrap();
    a.qp_state = QpState::Rtr;
    a.ah_attr = Some(AddressVector { dest: peer.0 });
    a.path_mtu = Mtu::M1024;
    a.dest_qp_num = peer.1;
    a.rq_psn = peer.2;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    let rtr = AttrMask::STATE
        | AttrMask::AV
        | AttrMask::PATH_MTU
        | AttrMask::DEST_QPN
        | AttrMask::RQ_PSN
        | AttrMask::MAX_DEST_RD_ATOMIC
        | AttrMask::MIN_RNR_TIMER;
    qp.modify(&a, rtr).unwrap();
    a.qp_state = QpState::Rts;
    a.sq_psn = my_psn;
    a.timeout = 10;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    let rts = AttrMask::STATE
        | AttrMask::SQ_PSN
        | AttrMask::TIMEOUT
        | AttrMask::RETRY_CNT
        | AttrMask::RNR_RETRY
        | AttrMask::MAX_QP_RD_ATOMIC;
    qp.modify(&a, rts).unwrap();
}

/// Two connected endpoints on one daemon (their packets go through its UDP socket).
pub(crate) fn loopback(sock: &Path) -> (End, End) {
    let x = end(sock);
    let y = end(sock);
    let (px, py) = (0x1234, 0xabcde);
    connect(&x.qp, px, (y.ctx.gid_addr(), y.qp.qpn(), py));
    connect(&y.qp, py, (x.ctx.gid_addr(), x.qp.qpn(), px));
    (x, y)
}

fn ok(cq: &mut Cq, id: u64, op: WcOpcode) -> u32 {
    let wc = cq.poll_wait(T).expect("completion");
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (id, WcStatus::Success, op),
        "{wc:?}"
    );
    wc.byte_len
}

/// One SEND of `len` bytes from x to y, checked byte for byte.
pub(crate) fn send_recv(x: &mut End, y: &mut End, id: u64, len: u32) {
    let msg: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ id as u8)
        .collect();
    x.mr.write(0, &msg).unwrap();
    y.qp.post_recv(&[RecvWr {
        wr_id: id,
        sges: vec![y.mr.sge(0, len)],
    }])
    .unwrap();
    x.qp.post_send(&[SendWr::new(id, SendOp::Send, vec![x.mr.sge(0, len)])])
        .unwrap();
    ok(&mut x.cq, id, WcOpcode::Send);
    assert_eq!(ok(&mut y.cq, id, WcOpcode::Recv), len);
    let mut got = vec![0; len as usize];
    y.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}
