//! What the daemon tests share: one rocex-verbs endpoint (context, PD, MR, CQ, RC QP),
//! connecting two of them, checking completions, and data patterns.

// Each test crate uses its own subset.
#![allow(dead_code)]

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use rocex_verbs::verbs::{AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, WcOpcode};
use rocex_verbs::verbs::{RecvWr, SendOp, SendWr, WcStatus};
use rocex_verbs::{Access, Context, Cq, Mr, Pd, Qp, QpInitAttr};

/// How long a test waits for one completion.
pub(crate) const T: Duration = Duration::from_secs(10);

pub(crate) const ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// One endpoint: context, PD, MR, CQ, QP (dropped in that order).
pub(crate) struct End {
    pub(crate) qp: Qp,
    pub(crate) cq: Cq,
    pub(crate) mr: Mr,
    pub(crate) _pd: Pd,
    pub(crate) ctx: Context,
}

/// An endpoint on the daemon at `sock` with a 1 MiB MR and 128-deep queues.
pub(crate) fn end(sock: &Path) -> End {
    let ctx = Context::open(sock).expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(1 << 20, ACCESS).unwrap();
    let cq = ctx.create_cq(256, None).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            cap: QpCap {
                max_send_wr: 128,
                max_recv_wr: 128,
                ..QpCap::default()
            },
        })
        .unwrap();
    End {
        qp,
        cq,
        mr,
        _pd: pd,
        ctx,
    }
}

/// RESET → INIT → RTR → RTS towards `peer` (address, QPN, its send PSN) at `mtu`.
pub(crate) fn connect(qp: &Qp, my_psn: u32, peer: (IpAddr, u32, u32), mtu: Mtu) {
    let mut a = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: ACCESS,
        ..QpAttr::default()
    };
    qp.modify(
        &a,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    a.qp_state = QpState::Rtr;
    a.ah_attr = Some(AddressVector { dest: peer.0 });
    a.path_mtu = mtu;
    a.dest_qp_num = peer.1;
    a.rq_psn = peer.2;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    qp.modify(
        &a,
        AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN
            | AttrMask::MAX_DEST_RD_ATOMIC
            | AttrMask::MIN_RNR_TIMER,
    )
    .unwrap();
    a.qp_state = QpState::Rts;
    a.sq_psn = my_psn;
    a.timeout = 10;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    qp.modify(
        &a,
        AttrMask::STATE
            | AttrMask::SQ_PSN
            | AttrMask::TIMEOUT
            | AttrMask::RETRY_CNT
            | AttrMask::RNR_RETRY
            | AttrMask::MAX_QP_RD_ATOMIC,
    )
    .unwrap();
}

/// Connects `a` and `b` to each other at `mtu`.
pub(crate) fn pair_at(a: &End, b: &End, mtu: Mtu) {
    let (pa, pb) = (0x1234, 0xabcde);
    connect(&a.qp, pa, (b.ctx.gid_addr(), b.qp.qpn(), pb), mtu);
    connect(&b.qp, pb, (a.ctx.gid_addr(), a.qp.qpn(), pa), mtu);
}

/// Connects `a` and `b` to each other at path MTU 1024.
pub(crate) fn pair(a: &End, b: &End) {
    pair_at(a, b, Mtu::M1024);
}

/// Waits for the next completion and checks it is `id`'s, successful, of `op`; returns
/// its byte count.
pub(crate) fn ok(cq: &mut Cq, id: u64, op: WcOpcode) -> u32 {
    let wc = cq.poll_wait(T).expect("completion");
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (id, WcStatus::Success, op),
        "{wc:?}"
    );
    wc.byte_len
}

/// `n` bytes that differ per `seed` and per position.
pub(crate) fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// One 3000-byte SEND from `x` to `y`, checked byte for byte.
pub(crate) fn send_recv(x: &mut End, y: &mut End, id: u64) {
    let msg = pattern(id as u8, 3000);
    x.mr.write(0, &msg).unwrap();
    y.qp.post_recv(&[RecvWr {
        wr_id: id,
        sges: vec![y.mr.sge(0, 4096)],
    }])
    .unwrap();
    x.qp.post_send(&[SendWr::new(id, SendOp::Send, vec![x.mr.sge(0, 3000)])])
        .unwrap();
    ok(&mut x.cq, id, WcOpcode::Send);
    assert_eq!(ok(&mut y.cq, id, WcOpcode::Recv), 3000);
    let mut got = vec![0; 3000];
    y.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}
