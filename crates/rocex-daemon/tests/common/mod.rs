//! What the daemon tests share: `rocexd` child processes (`rocex_testkit::rocexd`), one
//! rocex-verbs endpoint (context, PD, MR, CQ, RC QP), connecting two of them, checking
//! completions, and data patterns; two daemons in two network namespaces (`netns`) and `rocex perf` between
//! them (`perf`).

// Each test crate uses its own subset.
#![allow(dead_code, unused_imports)]

pub(crate) mod netns;
pub(crate) mod perf;

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use rocex_verbs::verbs::{Mtu, QpAttr, QpCap, QpType, WcOpcode};
use rocex_verbs::verbs::{RecvWr, SendData, SendOp, SendWr, WcStatus};
use rocex_verbs::{Access, Context, Cq, Mr, Pd, Qp, QpInitAttr};

pub(crate) use rocex_testkit::rocexd::{Daemon, Rocexd, socket_in};

/// How long a test waits for one completion, or for anything else.
pub(crate) const T: Duration = Duration::from_secs(10);

/// Local write, remote write and read: no atomics.
pub(crate) const RDMA_ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

pub(crate) const ACCESS: Access = RDMA_ACCESS.union(Access::REMOTE_ATOMIC);

/// This package's `rocexd` on `addr` (`rocex_testkit::rocexd`).
pub(crate) fn rocexd(addr: &str) -> Rocexd {
    Rocexd::new(addr).bin(env!("CARGO_BIN_EXE_rocexd"))
}

/// `rocexd --addr addr --spin-limit 200 extra...` on a socket of its own, once it answers.
pub(crate) fn daemon(addr: &str, extra: &[&str]) -> Daemon {
    rocexd(addr).args(extra).start()
}

/// [`daemon`] serving `sock` (in a directory of its own: see `socket_in`).
pub(crate) fn daemon_at(addr: &str, sock: &Path, extra: &[&str]) -> Daemon {
    rocexd(addr).socket(sock).args(extra).start()
}

/// [`daemon`] that grants no direct slots even under `ROCEX_TEST_DIRECT=1`, for a test of
/// what the daemon does with its clients' rings, objects, limits and counters, or of its
/// CM: its clients always post through it.
pub(crate) fn ring_daemon(addr: &str, extra: &[&str]) -> Daemon {
    rocexd(addr).daemon_path().args(extra).start()
}

/// [`ring_daemon`] serving `sock`.
pub(crate) fn ring_daemon_at(addr: &str, sock: &Path, extra: &[&str]) -> Daemon {
    rocexd(addr).socket(sock).daemon_path().args(extra).start()
}

/// One endpoint: context, PD, MR, CQ, QP (dropped in that order).
pub(crate) struct End {
    pub(crate) qp: Qp,
    pub(crate) cq: Cq,
    pub(crate) mr: Mr,
    pub(crate) _pd: Pd,
    pub(crate) ctx: Context,
}

impl End {
    /// Posts work request `id` of `op` on `len` bytes of this end's MR at `at`.
    pub(crate) fn post(&mut self, id: u64, op: SendOp, at: u64, len: u32) {
        let sge = self.mr.sge(at, len);
        self.qp
            .post_send(&[SendWr::new(id, op, vec![sge])])
            .unwrap();
    }
}

/// An endpoint on the daemon at `sock` with a 1 MiB MR and 128-deep queues.
pub(crate) fn end(sock: &Path) -> End {
    let cap = QpCap {
        max_send_wr: 128,
        max_recv_wr: 128,
        ..QpCap::default()
    };
    end_with(sock, 1 << 20, 256, cap, ACCESS)
}

/// An endpoint on the daemon at `sock` with a 64 KiB MR without atomics, a 64-entry CQ
/// and default queues.
pub(crate) fn small_end(sock: &Path) -> End {
    end_with(sock, 1 << 16, 64, QpCap::default(), RDMA_ACCESS)
}

/// An endpoint with an MR of `mr_len` bytes and `access`, a CQ of `cqe` entries and a QP
/// of `cap`.
pub(crate) fn end_with(sock: &Path, mr_len: usize, cqe: u32, cap: QpCap, access: Access) -> End {
    let ctx = Context::open(sock).expect("open");
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.alloc_mr(mr_len, access).unwrap();
    let cq = ctx.create_cq(cqe, None).unwrap();
    let qp = pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            cap,
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
    connect_with(qp, my_psn, peer, mtu, ACCESS);
}

/// `connect` granting the peer `access`.
pub(crate) fn connect_with(
    qp: &Qp,
    my_psn: u32,
    peer: (IpAddr, u32, u32),
    mtu: Mtu,
    access: Access,
) {
    for (a, mask) in rc_attrs(my_psn, peer, mtu, access).rc_steps() {
        qp.modify(&a, mask).unwrap();
    }
}

/// The attributes `connect_with` takes a QP through to RTS: `rocex_testkit`'s with local
/// ACK timeout 10.
pub(crate) fn rc_attrs(my_psn: u32, peer: (IpAddr, u32, u32), mtu: Mtu, access: Access) -> QpAttr {
    QpAttr {
        timeout: 10,
        ..rocex_testkit::rc::rc_attrs(my_psn, peer, mtu, access)
    }
}

/// Connects `a` and `b` to each other at `mtu`.
pub(crate) fn pair_at(a: &End, b: &End, mtu: Mtu) {
    pair_with(a, b, mtu, ACCESS);
}

/// `pair_at`, each granting the other `access`.
pub(crate) fn pair_with(a: &End, b: &End, mtu: Mtu, access: Access) {
    let (pa, pb) = (0x1234, 0xabcde);
    connect_with(&a.qp, pa, (b.ctx.gid_addr(), b.qp.qpn(), pb), mtu, access);
    connect_with(&b.qp, pb, (a.ctx.gid_addr(), a.qp.qpn(), pa), mtu, access);
}

/// Connects `a` and `b` to each other at path MTU 1024.
pub(crate) fn pair(a: &End, b: &End) {
    pair_at(a, b, Mtu::M1024);
}

/// Two `end`s on one daemon, connected (their packets go through its UDP socket).
pub(crate) fn loopback(sock: &Path) -> (End, End) {
    let x = end(sock);
    let y = end(sock);
    pair(&x, &y);
    (x, y)
}

/// Two `small_end`s on one daemon, connected at path MTU 1024.
pub(crate) fn small_loopback(sock: &Path) -> (End, End) {
    let x = small_end(sock);
    let y = small_end(sock);
    pair_with(&x, &y, Mtu::M1024, RDMA_ACCESS);
    (x, y)
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

/// [`ok`] for a completion that carries the immediate `imm`.
pub(crate) fn ok_imm(cq: &mut Cq, id: u64, op: WcOpcode, imm: u32) -> u32 {
    let wc = cq.poll_wait(T).expect("completion");
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode, wc.imm_data),
        (id, WcStatus::Success, op, Some(imm)),
        "{wc:?}"
    );
    wc.byte_len
}

/// The counter `name` of group `group` in the statistics of `ctx`'s daemon.
pub(crate) fn counter(ctx: &Context, group: &str, name: &str) -> u64 {
    let stats = ctx.stats().expect("stats");
    stats
        .get_counter(group, name)
        .unwrap_or_else(|| panic!("no counter {group}.{name}"))
}

/// `n` bytes that differ per `seed` and per position.
pub(crate) fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// One 3000-byte SEND from `x` to `y`, checked byte for byte.
pub(crate) fn send_recv(x: &mut End, y: &mut End, id: u64) {
    send_checked(x, y, id, &pattern(id as u8, 3000), 4096);
}

/// One SEND of `len` bytes from `x` to `y` into a receive of just that size, checked
/// byte for byte.
pub(crate) fn send_recv_len(x: &mut End, y: &mut End, id: u64, len: u32) {
    let msg: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ id as u8)
        .collect();
    send_checked(x, y, id, &msg, len);
}

/// SENDs `msg` from the start of `x`'s MR into a receive of `room` bytes at the start of
/// `y`'s, and checks what arrives.
fn send_checked(x: &mut End, y: &mut End, id: u64, msg: &[u8], room: u32) {
    let len = msg.len() as u32;
    x.mr.write(0, msg).unwrap();
    y.qp.post_recv(&[RecvWr {
        wr_id: id,
        sges: vec![y.mr.sge(0, room)].into(),
    }])
    .unwrap();
    x.post(id, SendOp::Send, 0, len);
    ok(&mut x.cq, id, WcOpcode::Send);
    assert_eq!(ok(&mut y.cq, id, WcOpcode::Recv), len);
    let mut got = vec![0; msg.len()];
    y.mr.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}

/// Posts 16 WRITEs of 64 KiB from `a` into `b` (work request IDs after `*id`) and, once
/// they are taken, waits for their 16 completions whatever their status: a child
/// client's load until it is killed.
pub(crate) fn write_burst(a: &mut End, b: &End, id: &mut u64) -> rocex_verbs::Result<()> {
    let wrs: Vec<SendWr> = (0..16)
        .map(|i| {
            *id += 1;
            SendWr::new(
                *id,
                SendOp::Write(b.mr.remote(i * 65_536)),
                vec![a.mr.sge(i * 65_536, 65_536)],
            )
        })
        .collect();
    a.qp.post_send(&wrs)?;
    for _ in 0..16 {
        let _ = a.cq.poll_wait(T);
    }
    Ok(())
}

/// Posts a slot whose opcode (200) is undefined: it completes with LOC_QP_OP_ERR and
/// moves `e`'s QP to the error state.
pub(crate) fn post_undefined_opcode(e: &mut End) {
    let mut slot = [0u8; 128];
    slot[..8].copy_from_slice(&77u64.to_ne_bytes());
    slot[8] = 200; // opcode
    e.qp.post_raw_send_slot(&slot).unwrap();
    let wc = e.cq.poll_wait(T).unwrap();
    assert_eq!((wc.wr_id, wc.status), (77, WcStatus::LocQpOpErr));
}

/// Posts `n` slots of xorshift garbage from `seed` (work request IDs from 1000), then
/// checks that each completes with an error.
pub(crate) fn post_garbage_slots(e: &mut End, seed: u64, n: u64) {
    let mut x = seed;
    for i in 0..n {
        let mut slot = [0u8; 256];
        for b in slot.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        slot[..8].copy_from_slice(&(1000 + i).to_ne_bytes());
        e.qp.post_raw_send_slot(&slot).unwrap();
    }
    for _ in 0..n {
        let wc = e.cq.poll_wait(T).unwrap();
        assert_ne!(wc.status, WcStatus::Success, "{wc:?}");
    }
}

/// Posts one receive of `len` bytes at `at` on `e`.
pub(crate) fn recv(e: &mut End, id: u64, at: u64, len: u32) {
    e.qp.post_recv(&[RecvWr {
        wr_id: id,
        sges: vec![e.mr.sge(at, len)].into(),
    }])
    .unwrap();
}

pub(crate) fn read_back(e: &End, at: usize, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    e.mr.read(at, &mut v).unwrap();
    v
}

/// SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, CMP_SWAP, FETCH_ADD and an inline
/// SEND from `a` to `b`, each checked where its data lands.
pub(crate) fn every_op(a: &mut End, b: &mut End) {
    // SEND of several packets.
    let msg = pattern(1, 10_000);
    a.mr.write(0, &msg).unwrap();
    recv(b, 10, 0, 16_384);
    a.post(1, SendOp::Send, 0, 10_000);
    ok(&mut a.cq, 1, WcOpcode::Send);
    assert_eq!(ok(&mut b.cq, 10, WcOpcode::Recv), 10_000);
    assert!(read_back(b, 0, 10_000) == msg, "SEND data differs");

    // SEND_WITH_IMM: the immediate arrives with the receive.
    let msg = pattern(2, 5000);
    a.mr.write(16_384, &msg).unwrap();
    recv(b, 11, 16_384, 8192);
    a.post(2, SendOp::SendWithImm(0x1234_5678), 16_384, 5000);
    ok(&mut a.cq, 2, WcOpcode::Send);
    assert_eq!(ok_imm(&mut b.cq, 11, WcOpcode::Recv, 0x1234_5678), 5000);
    assert!(
        read_back(b, 16_384, 5000) == msg,
        "SEND_WITH_IMM data differs"
    );

    // WRITE of 200 KB.
    let data = pattern(3, 200_000);
    a.mr.write(32_768, &data).unwrap();
    a.post(3, SendOp::Write(b.mr.remote(65_536)), 32_768, 200_000);
    ok(&mut a.cq, 3, WcOpcode::RdmaWrite);
    assert!(read_back(b, 65_536, 200_000) == data, "WRITE data differs");

    // WRITE_WITH_IMM: the data lands in place and the immediate consumes a receive.
    let data = pattern(4, 30_000);
    a.mr.write(300_000, &data).unwrap();
    recv(b, 12, 0, 0);
    a.post(
        4,
        SendOp::WriteWithImm(b.mr.remote(300_000), 0xfeed),
        300_000,
        30_000,
    );
    ok(&mut a.cq, 4, WcOpcode::RdmaWrite);
    ok_imm(&mut b.cq, 12, WcOpcode::RecvRdmaWithImm, 0xfeed);
    assert!(
        read_back(b, 300_000, 30_000) == data,
        "WRITE_WITH_IMM data differs"
    );

    // READ of 100 KB from b.
    let data = pattern(5, 100_000);
    b.mr.write(400_000, &data).unwrap();
    a.post(5, SendOp::Read(b.mr.remote(400_000)), 600_000, 100_000);
    ok(&mut a.cq, 5, WcOpcode::RdmaRead);
    assert!(read_back(a, 600_000, 100_000) == data, "READ data differs");

    // CMP_SWAP then FETCH_ADD on b's word.
    b.mr.write_u64(1024, 0x1111).unwrap();
    let cas = SendOp::CompareSwap {
        remote: b.mr.remote(1024),
        compare: 0x1111,
        swap: 0x2222,
    };
    a.post(6, cas, 2048, 8);
    ok(&mut a.cq, 6, WcOpcode::CompSwap);
    assert_eq!(a.mr.read_u64(2048).unwrap(), 0x1111);
    assert_eq!(b.mr.read_u64(1024).unwrap(), 0x2222);
    let faa = SendOp::FetchAdd {
        remote: b.mr.remote(1024),
        add: 5,
    };
    a.post(7, faa, 2056, 8);
    ok(&mut a.cq, 7, WcOpcode::FetchAdd);
    assert_eq!(a.mr.read_u64(2056).unwrap(), 0x2222);
    assert_eq!(b.mr.read_u64(1024).unwrap(), 0x2227);

    // Inline SEND: the bytes travel in the descriptor, not through an SGE.
    recv(b, 13, 800_000, 256);
    let mut wr = SendWr::new(8, SendOp::Send, vec![]);
    wr.data = SendData::Inline(pattern(8, 200));
    a.qp.post_send(&[wr]).unwrap();
    ok(&mut a.cq, 8, WcOpcode::Send);
    assert_eq!(ok(&mut b.cq, 13, WcOpcode::Recv), 200);
    assert_eq!(read_back(b, 800_000, 200), pattern(8, 200));
}
