//! `rocex perf`: perftest's bandwidth and latency tests (`ib_{write,read,send,atomic}_{bw,lat}`)
//! on rocex, with perftest's out-of-band exchange, so that either side can be the stock tool.
//!
//! The exchange (module `exchange`) fixes how many handshakes each test makes and when; the
//! data path follows perftest's: one-sided tests have a passive server that only waits for
//! the client's "done" handshake, SEND tests a receiving server, and the WRITE and SEND
//! latency tests a ping-pong (who opens is perftest's choice per test). `-a` repeats the
//! measurement for every size from 2 to 2^23 bytes where perftest does, with its exchanges
//! between sizes (only the SEND tests have any); `-D` runs each side to its own deadline.
//! The options, under perftest's names and ranges, are checked first (module `options`).
//!
//! Verification writes a known pattern and checks it where the data lands (the WRITE and
//! SEND receiver, the READ requester, the atomic requester's returned values). perftest
//! fills its buffers with `rand()`, so against a stock tool there is nothing to check
//! against; two rocex ends also exchange their verdicts at the end.
//!
//! The tests run on a [`Nic`]: an engine in this process on the exchange's address
//! (`local`), or the `rocexd` at `--socket` / `$ROCEX_SOCKET` (`daemon`), whose GID is
//! its own address, whatever address the exchange runs over.

mod bw;
mod daemon;
mod exchange;
mod lat;
mod local;
mod nic;
mod options;
mod report;

use crate::device::mtu_of;
use std::io;
use std::process::ExitCode;
use std::time::Duration;

use rocex_proto::Access;
use rocex_proto::verbs::{AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, Remote, Sge};

use crate::oob;
use exchange::{KeyMsg, Oob, Verdict};
use nic::Nic;
use options::params;
pub(crate) use options::{Args, AtomicType, Params};

/// The operation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Op {
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// SEND.
    Send,
    /// Atomic compare-and-swap or fetch-and-add.
    Atomic,
}

/// Bandwidth or latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Test {
    /// Many requests in flight; bytes per second.
    Bw,
    /// One request at a time; microseconds.
    Lat,
}

/// READs and atomics rocex accepts as responder (rxe's `max_qp_rd_atom`).
const OUT_READS: u32 = 128;
/// Recv or READ slots are capped at this many bytes per QP.
const SLOT_BYTES: u64 = 64 << 20;
/// Most QPs a run makes: rocexd's default per-client limit.
const MAX_QPS: u32 = 4096;
/// The deepest CQ made: rxe's limit, which the engine keeps (rocexd's is larger). QPs share
/// CQs in groups that fit, as many as a CQ of this depth holds.
const MAX_CQE: u32 = 1 << 15;
/// With more than one QP, what the depths per QP are cut to fit (perftest's 128 per QP on
/// 4096 QPs would be 32 GiB of 64 KiB WRITEs in flight, far beyond any socket buffer):
/// bytes and requests in flight over all QPs, and receives posted over all QPs.
const IN_FLIGHT_BYTES: u64 = 16 << 20;
const IN_FLIGHT_MAX: u64 = 8192;
const RECVS_MAX: u32 = 8192;

/// Requests of `size` bytes a bandwidth client keeps in flight over all its QPs.
pub(crate) fn in_flight(size: u32) -> u64 {
    (IN_FLIGHT_BYTES / u64::from(size.max(1))).clamp(1, IN_FLIGHT_MAX)
}

/// `depth` per QP cut so that `qps` QPs together stay within `total` (one at least).
fn share(depth: u32, qps: u32, total: u64) -> u32 {
    if qps <= 1 {
        return depth;
    }
    let each = (total / u64::from(qps)).max(1);
    depth.min(u32::try_from(each).unwrap_or(u32::MAX))
}

/// The pattern a rocex writer or READ target holds: not constant, and not zero, so that a
/// misplaced or missing byte shows.
pub(crate) fn pattern(offset: u64) -> u8 {
    ((offset.wrapping_mul(131).wrapping_add(17)) ^ (offset >> 8) ^ (offset >> 16)) as u8
}

/// The 8-byte word a rocex atomic target starts with.
pub(crate) const ATOMIC_START: u64 = 0x0102_0304_0506_0708;

/// One QP and its memory (MR `i` of QP `i`): `[0, buf)` local source or sink,
/// `[buf, 2 buf)` the remote-accessible area the key message advertises (perftest's
/// layout), then `slots` message-sized slots for receives, READ results and atomic
/// results, so that no two outstanding requests share bytes.
pub(crate) struct QpRes {
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    pub(crate) base: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) peer: Option<KeyMsg>,
}

/// The device, its QPs and the layout they share.
pub(crate) struct Ctx {
    pub(crate) nic: Box<dyn Nic>,
    pub(crate) qps: Vec<QpRes>,
    /// perftest's `BUFF_SIZE`: the message size rounded up to the cycle buffer.
    pub(crate) buf: u64,
    /// Slots of the current size, at most `want`, in `slot_area` bytes.
    pub(crate) slots: u32,
    /// The current message size (each in turn with `-a`).
    pub(crate) size: u32,
    slot_area: u64,
    want: u32,
    /// Receives posted per QP for the current size: no more than the peer sends.
    pub(crate) recvs: Vec<u64>,
}

impl Ctx {
    /// Address of the local area.
    pub(crate) fn local(&self, qp: usize) -> u64 {
        self.qps[qp].base
    }
    /// Address of the remote-accessible area.
    pub(crate) fn remote_area(&self, qp: usize) -> u64 {
        self.qps[qp].base + self.buf
    }
    /// Address of slot `k`.
    pub(crate) fn slot(&self, qp: usize, k: u32) -> u64 {
        self.qps[qp].base + 2 * self.buf + u64::from(k % self.slots) * self.slot_len()
    }
    /// Bytes per slot (at least 8, for atomic results).
    pub(crate) fn slot_len(&self) -> u64 {
        u64::from(self.size).max(8)
    }
    /// Lays the slots out for messages of `size` bytes, at most the size the memory was
    /// registered for (`-a` goes through the sizes, with as many slots as fit).
    pub(crate) fn set_size(&mut self, size: u32) {
        self.size = size;
        self.slots = (self.slot_area / self.slot_len()).clamp(1, u64::from(self.want)) as u32;
    }
    pub(crate) fn sge(&self, qp: usize, addr: u64, len: u32) -> Sge {
        Sge {
            addr,
            length: len,
            lkey: self.qps[qp].lkey,
        }
    }
    /// The peer's advertised area of QP `qp`.
    pub(crate) fn peer_remote(&self, qp: usize) -> Remote {
        let p = self.qps[qp].peer.unwrap_or(KeyMsg {
            lid: 0,
            out_reads: 0,
            qpn: 0,
            psn: 0,
            rkey: 0,
            vaddr: 0,
            gid: [0; 16],
            srqn: 0,
        });
        Remote {
            addr: p.vaddr,
            rkey: p.rkey,
        }
    }
    /// Reads bytes of QP `qp`'s region at application address `addr`.
    pub(crate) fn read_mem(&self, qp: usize, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        self.nic.read(qp, addr - self.qps[qp].base, buf)
    }
    pub(crate) fn write_mem(&self, qp: usize, addr: u64, data: &[u8]) -> io::Result<()> {
        self.nic.write(qp, addr - self.qps[qp].base, data)
    }
    /// The key messages this side sends.
    fn keys(&self, gid: [u8; 16]) -> Vec<KeyMsg> {
        (0..self.qps.len())
            .map(|i| KeyMsg {
                lid: 0,
                out_reads: OUT_READS,
                qpn: self.qps[i].qpn,
                psn: self.qps[i].psn,
                rkey: self.qps[i].rkey,
                vaddr: self.remote_area(i),
                gid,
                srqn: 0,
            })
            .collect()
    }
    /// Lets the engine answer the peer for a moment: what every wait does.
    pub(crate) fn pump(&mut self) -> io::Result<()> {
        self.nic.wait(Duration::from_millis(1))
    }
}

/// `p.qps` RC QPs in INIT on `nic`, their memory laid out as perftest's and filled for
/// the test.
fn open(mut nic: Box<dyn Nic>, p: &Params, cycle_buffer: u32) -> io::Result<Ctx> {
    let cycle = u64::from(cycle_buffer.max(4096));
    let buf = u64::from(p.size).div_ceil(cycle).max(1) * cycle;
    let slot_len = u64::from(p.size).max(8);
    let want = p.tx_depth.max(p.rx_depth).max(1);
    let slots = (SLOT_BYTES / slot_len).clamp(1, u64::from(want)) as u32;
    let len = 2 * buf + u64::from(slots) * slot_len;
    let depth = if p.test == Test::Lat {
        256
    } else {
        p.tx_depth.max(1)
    };
    let cqe_per_qp = depth + p.rx_depth + 16;
    let qps_per_cq = (MAX_CQE / cqe_per_qp).max(1);
    let mut qps = Vec::new();
    for i in 0..p.qps as usize {
        // The QPs from here on share a new CQ.
        if i as u32 % qps_per_cq == 0 {
            nic.create_cq(cqe_per_qp * qps_per_cq.min(p.qps - i as u32))?;
        }
        let keys = nic.reg_mr(len)?;
        let cap = QpCap {
            // A ping-pong has one message in flight, but its completion can trail the
            // peer's answer when an ACK is lost.
            max_send_wr: if p.test == Test::Lat {
                256
            } else {
                p.tx_depth.max(1)
            },
            max_recv_wr: p.rx_depth.max(1),
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: p.inline,
        };
        let qpn = nic.create_qp(cap)?;
        let init = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            ..QpAttr::default()
        };
        nic.modify_qp(
            i,
            &init,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        )?;
        let psn = nic.random_psn();
        // The writer's source and the READ target hold the pattern; a WRITE target starts
        // zeroed so that missing bytes show; an atomic target holds a known word.
        let pat: Vec<u8> = (0..buf).map(pattern).collect();
        nic.write(i, 0, &pat)?;
        match p.op {
            Op::Read => nic.write(i, buf, &pat)?,
            Op::Atomic => nic.write(i, buf, &ATOMIC_START.to_ne_bytes())?,
            Op::Write | Op::Send => {}
        }
        qps.push(QpRes {
            qpn,
            psn,
            base: keys.addr,
            lkey: keys.lkey,
            rkey: keys.rkey,
            peer: None,
        });
    }
    Ok(Ctx {
        nic,
        qps,
        buf,
        slots,
        size: p.size,
        slot_area: u64::from(slots) * slot_len,
        want,
        recvs: vec![0; p.qps as usize],
    })
}

/// RTR and RTS with perftest's attributes (`ctx_connect`): RNR timer 12, timeout 14,
/// retry and RNR retry 7, the peer's OUT_READS as our READ/atomic depth.
fn connect(ctx: &mut Ctx, mtu: Mtu) -> io::Result<()> {
    for i in 0..ctx.qps.len() {
        let q = &ctx.qps[i];
        let peer = q
            .peer
            .ok_or_else(|| io::Error::other("no key message for a QP"))?;
        let to_rts = QpAttr {
            path_mtu: mtu,
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: OUT_READS.min(255) as u8,
            min_rnr_timer: 12,
            ah_attr: Some(AddressVector {
                dest: oob::ip_of(peer.gid),
            }),
            sq_psn: q.psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: peer.out_reads.clamp(1, 128) as u8,
            ..QpAttr::default()
        };
        // The QP is in INIT since `open`.
        let [_init, rtr, rts] = to_rts.rc_steps();
        for (a, mask) in [rtr, rts] {
            ctx.nic.modify_qp(i, &a, mask)?;
        }
    }
    Ok(())
}

/// What the run measured, for the report.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Iterations completed (all QPs).
    pub(crate) iters: u64,
    pub(crate) seconds: f64,
    /// Peak bandwidth in MB/s (2^20), when measured.
    pub(crate) peak_mbs: f64,
    /// Per-operation latencies in microseconds (one-way for the ping-pongs).
    pub(crate) lat_us: Vec<f64>,
    /// This side's verification.
    pub(crate) verdict: Verdict,
    /// Whether this side only waited (a passive server): its numbers are the peer's.
    pub(crate) passive: bool,
}

/// How many handshakes perftest 6.24 makes before the run, and what it does after, per
/// test (from its `main`s; the counts are for one QP, which is all a stock lat test uses).
fn pre_handshakes(op: Op, test: Test, all: bool) -> usize {
    match (op, test) {
        (Op::Write | Op::Read | Op::Atomic, Test::Bw) => 3,
        // With `-a`, the SEND tests' fourth is made per size, after its receives.
        (Op::Send, _) if all => 3,
        _ => 4,
    }
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let _ = (&a.ib_dev, a.gid_index, a.ib_port, a.cpu_freq);
    // What can be refused is refused before any exchange or wait: the options, then the
    // daemon a server would serve from.
    let p = match params(a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rocex perf: {e}");
            return ExitCode::from(2);
        }
    };
    let daemon = match crate::device::daemon_socket(a.socket.as_deref()) {
        // Latency tests busy-poll, as perftest's do (its CQ polling never sleeps).
        Some(path) => match daemon::DaemonNic::open(&path, p.test == Test::Lat) {
            Ok(nic) => Some(nic),
            Err(e) => {
                eprintln!("rocex perf: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    match perf(a, p, daemon) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rocex perf: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the test on `daemon`, or else on an engine in this process; returns whether
/// verification (when asked for) passed.
fn perf(a: &Args, p: Params, daemon: Option<daemon::DaemonNic>) -> io::Result<bool> {
    let mtu = mtu_of(a.mtu)?;
    let wait = Duration::from_secs_f64(a.connect_timeout);
    let stream = match &a.server {
        Some(server) => oob::connect("rocex perf", server, a.port, wait)?,
        None => {
            if !p.json {
                println!(
                    "\n************************************\n* Waiting for client to connect... *\n************************************"
                );
            }
            oob::accept(a.port)?
        }
    };
    let nic: Box<dyn Nic> = match daemon {
        Some(nic) => Box::new(nic),
        None => Box::new(local::LocalNic::open(
            stream.local_addr()?.ip(),
            p.test == Test::Lat,
            &a.io,
            a.inject,
        )?),
    };
    let peer = stream.peer_addr()?;
    session(stream, nic, p, mtu)
        .map_err(|e| io::Error::new(e.kind(), format!("{e} (peer {})", peer.ip())))
}

/// The exchange and the test with the peer at the other end of `stream`.
fn session(
    stream: std::net::TcpStream,
    nic: Box<dyn Nic>,
    mut p: Params,
    mtu: Mtu,
) -> io::Result<bool> {
    let gid = nic.gid();
    let local = oob::ip_of(gid);
    let mtu = mtu.min(nic.port_mtu());
    let mut oob = Oob::new(stream, p.client)?;
    let pre = oob.prelude(mtu as u8)?;
    p.peer_rocex = pre.peer_is_rocex;
    let mtu = Mtu::from_ibv(pre.mtu_enum).unwrap_or(mtu);
    let mut ctx = open(nic, &p, pre.cycle_buffer)?;
    let mine = ctx.keys(gid);
    let peers = {
        let c = &mut ctx;
        oob.handshake(&mine, &mut || c.pump())?
    };
    for (q, k) in ctx.qps.iter_mut().zip(peers) {
        if oob::ip_of(k.gid).is_ipv4() != local.is_ipv4() {
            return Err(io::Error::other(
                "the peer's GID and ours are of different IP versions; use the same IP version on both sides",
            ));
        }
        q.peer = Some(k);
    }
    connect(&mut ctx, mtu)?;
    if p.op == Op::Send && !p.all {
        bw::post_all_recvs(&mut ctx, &p)?;
    }
    for _ in 1..pre_handshakes(p.op, p.test, p.all) {
        let c = &mut ctx;
        oob.handshake(&mine, &mut || c.pump())?;
    }
    if !p.json {
        report::print_header(&p, &pre, mtu, &ctx, local);
    }
    let mut progress = report::Progress::new(&p);
    // With `-a` each size's row is printed as it ends, under the titles printed once.
    let rows = p.all && (p.client || p.op == Op::Send || p.op == Op::Write && p.test == Test::Lat);
    if rows {
        report::print_columns(&p);
    }
    let mut row = |q: &Params, o: &Outcome| report::print_row(q, o);
    let result = match p.test {
        Test::Bw => bw::run(&mut ctx, &p, &mut oob, &mine, &mut progress, &mut row),
        Test::Lat => lat::run(&mut ctx, &p, &mut oob, &mine, &mut row),
    };
    progress.finish();
    let mut out = result?;
    if p.verify && !pre.peer_is_rocex {
        eprintln!(
            "rocex perf: --verify checks data only between two rocex ends (perftest fills its buffers with rand()); nothing was verified"
        );
    }
    if pre.peer_is_rocex {
        let c = &mut ctx;
        let theirs = oob.verdicts(out.verdict, &mut || c.pump())?;
        out.verdict = Verdict {
            checked: out.verdict.checked || theirs.checked,
            errors: out.verdict.errors + theirs.errors,
        };
    }
    // The peer's last request may still need our ACK, and a lost one an answer again.
    ctx.nic.linger(Duration::from_millis(300))?;
    crate::device::report_faults("rocex perf", ctx.nic.fault_counters());
    if let Some(n) = ctx.nic.kernel_dropped().filter(|&n| n > 0) {
        // Each one was resent (go-back-N resends what followed it too).
        eprintln!(
            "rocex perf: the kernel dropped {n} datagrams at this engine's socket (receive queue full: \
             without CAP_NET_ADMIN its size stops at net.core.rmem_max)"
        );
    }
    p.iters = out.iters;
    if rows {
        report::print_footer(&p, &out, ctx.nic.counters().as_ref());
    } else {
        report::print(&p, &out, ctx.nic.counters().as_ref());
    }
    Ok(!p.verify || (out.verdict.checked && out.verdict.errors == 0))
}
