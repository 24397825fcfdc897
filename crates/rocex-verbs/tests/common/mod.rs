//! What the direct-context tests share: an engine in this process on its own 127.0.19.x
//! address (as a granted context runs), an RC QP with a 2 MiB region, and the moves of a
//! program that posts, polls or only watches its memory.

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use rocex_io::UdpPort;
use rocex_proto::Config;
use rocex_testkit::rc::rc_attrs;
use rocex_verbs::verbs::{Access, Mtu, QpAttr, QpCap, QpType, SendOp, SendWr, WcStatus};
use rocex_verbs::{CompChannel, Context, Cq, Mr, Pd, Qp, QpInitAttr};

/// Long enough for anything on a loaded machine; reaching it is a failure, not a result.
pub(crate) const LIMIT: Duration = Duration::from_secs(20);

pub(crate) const MIB: usize = 1 << 20;

/// One end: a direct context and an RC QP with a 2 MiB region. Fields drop in order: the
/// QP before its CQ and region, the context last.
pub(crate) struct End {
    pub(crate) qp: Qp,
    pub(crate) cq: Cq,
    pub(crate) mr: Mr,
    pub(crate) _pd: Pd,
    pub(crate) ctx: Context,
}

pub(crate) fn open(ip: &str, seed: u8) -> Context {
    let ip: IpAddr = ip.parse().unwrap();
    let port = UdpPort::bind(ip).expect("bind the address's port 4791");
    let mut config = Config::new(ip, [seed; 32]);
    config.port_mtu = Mtu::M1024;
    Context::in_process(port, config).expect("start the engine")
}

pub(crate) fn end(ctx: Context) -> End {
    end_on(ctx, None)
}

/// An end whose CQ signals `channel` (its own private one without).
pub(crate) fn end_on(ctx: Context, channel: Option<&CompChannel>) -> End {
    assert!(ctx.is_direct());
    let pd = ctx.alloc_pd().unwrap();
    let access =
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = pd.alloc_mr(2 * MIB, access).unwrap();
    let cq = ctx.create_cq(256, channel).unwrap();
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
        _pd: pd,
        ctx,
    }
}

/// Takes both QPs to RTS towards each other; `tune` changes A's attributes.
pub(crate) fn connect(a: &End, b: &End, tune: impl Fn(QpAttr) -> QpAttr) {
    let (pa, pb) = (0x1000, 0x2000);
    to_rts(&a.qp, pa, (b.ctx.gid_addr(), b.qp.qpn(), pb), tune);
    to_rts(&b.qp, pb, (a.ctx.gid_addr(), a.qp.qpn(), pa), |x| x);
}

/// Takes `qp` to RTS with send PSN `psn` towards `peer` (address, QPN, its send PSN).
pub(crate) fn to_rts(qp: &Qp, psn: u32, peer: (IpAddr, u32, u32), tune: impl Fn(QpAttr) -> QpAttr) {
    let access = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let attr = tune(rc_attrs(psn, peer, Mtu::M1024, access));
    for (step, mask) in attr.rc_steps() {
        qp.modify(&step, mask).unwrap();
    }
}

pub(crate) fn pair(a: &str, b: &str) -> (End, End) {
    let (a, b) = (end(open(a, 1)), end(open(b, 2)));
    connect(&a, &b, |x| x);
    (a, b)
}

/// Polls `cq` until one completion comes.
pub(crate) fn one(cq: &mut Cq) -> rocex_verbs::Wc {
    cq.poll_wait(LIMIT).expect("a completion")
}

/// The direct path's own counter `name` (group `direct`).
pub(crate) fn direct_counter(ctx: &Context, name: &str) -> u64 {
    let stats = ctx.stats().unwrap();
    let group = stats.groups.iter().find(|g| g.name == "direct").unwrap();
    group.counters.iter().find(|(n, _)| n == name).unwrap().1
}

/// Where a ping-pong's WRITEs come from in their sender's region (they land at offset 0).
pub(crate) const SOURCE: usize = MIB;

/// WRITEs `len` bytes of `byte` from `from`'s [`SOURCE`] to `to`, and polls (no other
/// verb) until it completes.
pub(crate) fn write_bytes(
    from: &mut End,
    to: rocex_verbs::verbs::Remote,
    len: usize,
    byte: u8,
    id: u64,
) {
    from.mr.write(SOURCE, &vec![byte; len]).unwrap();
    let op = SendOp::Write(to);
    from.qp
        .post_send(&[SendWr::new(
            id,
            op,
            [from.mr.sge(SOURCE as u64, len as u32)],
        )])
        .unwrap();
    let end = Instant::now() + LIMIT;
    loop {
        if let Some(wc) = from.cq.poll(1).unwrap().pop() {
            assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success));
            return;
        }
        assert!(Instant::now() < end, "the WRITE never completed");
    }
}

/// Whether the last of `len` bytes at `mr`'s offset 0 is `byte` (a WRITE lands in order).
pub(crate) fn landed(mr: &Mr, len: usize, byte: u8) -> bool {
    let mut got = [0u8];
    mr.read(len - 1, &mut got).unwrap();
    got[0] == byte
}

/// Spins, calling no verb, until the last of `len` bytes at `mr`'s offset 0 is `byte`.
pub(crate) fn spin_for(mr: &Mr, len: usize, byte: u8) {
    let end = Instant::now() + LIMIT;
    while !landed(mr, len, byte) {
        assert!(Instant::now() < end, "the peer's WRITE never landed");
    }
}
