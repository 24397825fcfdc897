//! `rocex probe`: the rxe lab probe (`proto-tests/rxe-lab/probe/probe.c`, `rxe-probe` in the
//! guest). One verb at a time over an RC (or UC) QP, every completion printed, with the
//! probe's out-of-band line protocol (version 1, TCP port 18600), so that either side can
//! be the C probe on kernel rxe. See docs/rxe-lab.md, "The probe" and "Probe out-of-band
//! protocol (version 1)".

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use rocex_io::Driver;
use rocex_proto::verbs::{
    AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, Remote, SendOp, SendWr,
    Sge, WcOpcode, WcStatus, WorkCompletion,
};
use rocex_proto::{Access, Engine, PdId, QpInit, Region, VecRegion};

use crate::oob;

const PROTO_VERSION: u32 = 1;
const LINE_MAX_LEN: usize = 512;
const ATOMIC_AREA: u64 = 64;
const ATOMIC_INIT: u64 = 0x1000;
const ATOMIC_WRITE_VALUE: u64 = 0xa5a5_a5a5_5a5a_5a5a;
const IMM_BASE: u32 = 0x1234_5600;
/// The application address of the probe's buffer.
const BASE: u64 = 0x0000_5600_0000_0000;
/// `IBV_WC_WITH_IMM`, `IBV_WC_WITH_INV`.
const WC_WITH_IMM: u32 = 1 << 1;
const WC_WITH_INV: u32 = 1 << 3;
const DEFAULT_OPS: &str = "send,send_imm,write,write_imm,read,cas,faa";

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    role: Role,
}

#[derive(clap::Subcommand)]
enum Role {
    /// The responder: takes its parameters from the client's PLAN line.
    Server(ServerArgs),
    /// The requester: runs the operations against PEER.
    Client(ClientArgs),
}

#[derive(clap::Args)]
struct ServerArgs {
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long, default_value_t = 18600)]
    port: u16,
    /// Device name (accepted for compatibility).
    #[arg(short = 'd', long = "dev")]
    dev: Option<String>,
    /// GID index (accepted for compatibility; the GID is the address the exchange uses).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Receive timeout of the out-of-band exchange, in seconds.
    #[arg(long, default_value_t = 60)]
    wait: u64,
    /// Fault injection on every packet this side sends (rocexd's syntax):
    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N`; printed on stderr at the end.
    #[arg(long, value_name = "SPEC")]
    inject: Option<rocex_io::Faults>,
}

#[derive(clap::Args)]
struct ClientArgs {
    /// The server's address.
    peer: String,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long, default_value_t = 18600)]
    port: u16,
    /// Device name (accepted for compatibility).
    #[arg(short = 'd', long = "dev")]
    dev: Option<String>,
    /// GID index (accepted for compatibility; the GID is the address the exchange uses).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Operations in order: send send_imm send_inv write write_imm read cas faa
    /// atomic_write flush, or all (comma-separated).
    #[arg(long, default_value = DEFAULT_OPS)]
    ops: String,
    /// Message size in bytes (rounded up to a multiple of 8, at least 8).
    #[arg(long, default_value_t = 64)]
    size: u64,
    /// Iterations of each operation (send_inv runs once).
    #[arg(long, default_value_t = 1)]
    iters: u32,
    /// Path MTU (256, 512, 1024, 2048 or 4096).
    #[arg(long, default_value_t = 1024)]
    mtu: u32,
    /// Starting PSN of both sides (decimal or 0x hex); random by default.
    #[arg(long, value_parser = parse_num)]
    psn: Option<i64>,
    /// Local ACK timeout exponent.
    #[arg(long, default_value_t = 17)]
    timeout: u8,
    /// Retry count.
    #[arg(long, default_value_t = 7)]
    retry: u8,
    /// RNR retry count.
    #[arg(long = "rnr-retry", default_value_t = 7)]
    rnr_retry: u8,
    /// The responder's min_rnr_timer.
    #[arg(long = "min-rnr", default_value_t = 12)]
    min_rnr: u8,
    /// Have the server post its receives this many ms after READY.
    #[arg(long = "rnr-delay", default_value_t = 0)]
    rnr_delay: u32,
    /// Unreliable Connected QPs.
    #[arg(long)]
    uc: bool,
    /// Flip bits 8-23 of the rkey (implies --expect rem_access).
    #[arg(long = "bad-rkey")]
    bad_rkey: bool,
    /// FLUSH placement type.
    #[arg(long = "flush-type", default_value = "global", value_parser = ["global", "persistent"])]
    flush_type: String,
    /// An error status that is the success condition: rem_access rem_inv_req rem_op
    /// retry_exc rnr_retry_exc loc_prot wr_flush, or a number.
    #[arg(long)]
    expect: Option<String>,
    /// Receive timeout of the out-of-band exchange, in seconds.
    #[arg(long, default_value_t = 60)]
    wait: u64,
    /// Fault injection on every packet this side sends (rocexd's syntax):
    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N`; printed on stderr at the end.
    #[arg(long, value_name = "SPEC")]
    inject: Option<rocex_io::Faults>,
}

fn parse_num(s: &str) -> Result<i64, String> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else {
        t.parse()
    }
    .map_err(|e| format!("{s}: {e}"))?;
    Ok(if neg { -v } else { v })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    Cas,
    Faa,
    AtomicWrite,
    Flush,
}

const ALL_OPS: [Op; 10] = [
    Op::Send,
    Op::SendImm,
    Op::SendInv,
    Op::Write,
    Op::WriteImm,
    Op::Read,
    Op::Cas,
    Op::Faa,
    Op::AtomicWrite,
    Op::Flush,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::SendImm => "send_imm",
            Self::SendInv => "send_inv",
            Self::Write => "write",
            Self::WriteImm => "write_imm",
            Self::Read => "read",
            Self::Cas => "cas",
            Self::Faa => "faa",
            Self::AtomicWrite => "atomic_write",
            Self::Flush => "flush",
        }
    }
}

/// A fatal error: printed as `FATAL`, exit status 2.
struct Fatal(String);

impl From<io::Error> for Fatal {
    fn from(e: io::Error) -> Self {
        Self(e.to_string())
    }
}

impl From<rocex_proto::VerbsError> for Fatal {
    fn from(e: rocex_proto::VerbsError) -> Self {
        Self(e.to_string())
    }
}

type Res<T> = Result<T, Fatal>;

fn fatal<T>(msg: impl Into<String>) -> Res<T> {
    Err(Fatal(msg.into()))
}

fn parse_ops(list: &str) -> Res<Vec<Op>> {
    let mut ops = Vec::new();
    for t in list.split(',').filter(|t| !t.is_empty()) {
        if t == "all" {
            ops.extend(ALL_OPS);
            continue;
        }
        match ALL_OPS.iter().find(|o| o.name() == t) {
            Some(&o) if ops.len() < 32 => ops.push(o),
            Some(_) => {}
            None => return fatal(format!("unknown op {t}")),
        }
    }
    if ops.is_empty() {
        return fatal("no ops");
    }
    Ok(ops)
}

fn status_from_name(s: &str) -> Res<i32> {
    let named = [
        ("rem_access", WcStatus::RemAccessErr),
        ("rem_inv_req", WcStatus::RemInvReqErr),
        ("rem_op", WcStatus::RemOpErr),
        ("retry_exc", WcStatus::RetryExcErr),
        ("rnr_retry_exc", WcStatus::RnrRetryExcErr),
        ("loc_prot", WcStatus::LocProtErr),
        ("wr_flush", WcStatus::WrFlushErr),
    ];
    if let Some((_, v)) = named.iter().find(|(n, _)| *n == s) {
        return Ok(*v as i32);
    }
    match parse_num(s) {
        Ok(v) => Ok(v as i32),
        Err(_) => fatal(format!("unknown status {s}")),
    }
}

/// `ibv_wc_status_str`.
fn status_str(s: i32) -> &'static str {
    const NAMES: [&str; 22] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "operation aborted",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    ];
    usize::try_from(s)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("unknown")
}

fn opcode_str(o: WcOpcode) -> &'static str {
    match o {
        WcOpcode::Send => "SEND",
        WcOpcode::RdmaWrite => "RDMA_WRITE",
        WcOpcode::RdmaRead => "RDMA_READ",
        WcOpcode::CompSwap => "COMP_SWAP",
        WcOpcode::FetchAdd => "FETCH_ADD",
        WcOpcode::BindMw => "BIND_MW",
        WcOpcode::LocalInv => "LOCAL_INV",
        WcOpcode::Flush => "FLUSH",
        WcOpcode::AtomicWrite => "ATOMIC_WRITE",
        WcOpcode::Recv => "RECV",
        WcOpcode::RecvRdmaWithImm => "RECV_RDMA_WITH_IMM",
    }
}

fn pat_client(i: u64) -> u8 {
    (i.wrapping_mul(13).wrapping_add(0x22)) as u8
}

fn pat_server(i: u64) -> u8 {
    (i.wrapping_mul(7).wrapping_add(0x11)) as u8
}

fn mtu_of(bytes: u32) -> Res<Mtu> {
    [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() == bytes)
        .map_or_else(|| fatal(format!("bad mtu {bytes}")), Ok)
}

/// What both sides agree on through the PLAN line, and the local QP settings.
#[derive(Debug, Clone)]
struct Plan {
    ops: Vec<Op>,
    size: u64,
    iters: u32,
    mtu: u32,
    uc: bool,
    bad_rkey: bool,
    rnr_delay: u32,
    min_rnr: u8,
    psn: Option<u32>,
    expect: Option<i32>,
    timeout: u8,
    retry: u8,
    rnr_retry: u8,
    flush_persistent: bool,
}

impl Plan {
    fn has(&self, op: Op) -> bool {
        self.ops.contains(&op)
    }

    fn recvs(&self) -> u32 {
        self.ops
            .iter()
            .map(|o| match o {
                Op::SendInv => 1,
                Op::Send | Op::SendImm | Op::WriteImm => self.iters,
                _ => 0,
            })
            .sum()
    }

    fn ops_list(&self) -> String {
        self.ops
            .iter()
            .map(|o| o.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn flags(&self) -> String {
        let mut f = Vec::new();
        if self.uc {
            f.push("uc".to_string());
        }
        if self.bad_rkey {
            f.push("badrkey".to_string());
        }
        if self.rnr_delay != 0 {
            f.push(format!("rnrdelay={}", self.rnr_delay));
        }
        if self.min_rnr != 12 {
            f.push(format!("minrnr={}", self.min_rnr));
        }
        if let Some(p) = self.psn {
            f.push(format!("psn=0x{p:06x}"));
        }
        if let Some(e) = self.expect {
            f.push(format!("expect={e}"));
        }
        if f.is_empty() {
            "-".to_string()
        } else {
            f.join(",")
        }
    }
}

/// The out-of-band connection: lines in, lines out. Once the device runs, every wait for
/// a line keeps the engine answering its peer.
struct Line {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Line {
    fn new(stream: TcpStream, timeout: Duration) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            stream,
            buf: Vec::new(),
            timeout,
        })
    }

    fn send(&mut self, line: &str) -> Res<()> {
        let mut data = line.as_bytes().to_vec();
        data.truncate(LINE_MAX_LEN - 2);
        data.push(b'\n');
        let mut off = 0;
        let start = WallClock::now();
        while off < data.len() {
            match self.stream.write(&data[off..]) {
                Ok(0) => return fatal("oob write: connection closed"),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if start.elapsed() > self.timeout {
                        return fatal("oob write: timeout");
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return fatal(format!("oob write: {e}")),
            }
        }
        Ok(())
    }

    /// The next line, pumping `driver` (if any) while none is there.
    fn recv(&mut self, mut driver: Option<&mut Driver>) -> Res<String> {
        let start = WallClock::now();
        let mut tmp = [0u8; 512];
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let mut line = String::from_utf8_lossy(&line[..i]).into_owned();
                line.truncate(LINE_MAX_LEN - 1);
                return Ok(line);
            }
            match self.stream.read(&mut tmp) {
                Ok(0) => return fatal("oob: peer closed the connection"),
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return fatal(format!("oob read: {e}")),
            }
            if start.elapsed() > self.timeout {
                return fatal("oob read: timeout");
            }
            match driver.as_deref_mut() {
                Some(d) => d.wait(Duration::from_millis(2))?,
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

fn gid_hex(g: &[u8; 16]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

/// The peer's QP line.
#[derive(Debug, Clone, Copy)]
struct PeerInfo {
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
    rkey: u32,
    vaddr: u64,
    len: u64,
}

fn parse_qp_line(line: &str) -> Option<PeerInfo> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 7 || f[0] != "QP" || f[3].len() != 32 {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(f[3].get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(PeerInfo {
        qpn: u32::from_str_radix(f[1], 16).ok()?,
        psn: u32::from_str_radix(f[2], 16).ok()?,
        gid,
        rkey: u32::from_str_radix(f[4], 16).ok()?,
        vaddr: u64::from_str_radix(f[5], 16).ok()?,
        len: f[6].parse().ok()?,
    })
}

/// The device, its QP and its memory.
struct Ctx {
    role: &'static str,
    driver: Driver,
    pd: PdId,
    cq: u32,
    qpn: u32,
    region: Arc<VecRegion>,
    lkey: u32,
    rkey: u32,
    len: u64,
}

macro_rules! say {
    ($ctx_role:expr, $($t:tt)*) => {
        println!("[{}] {}", $ctx_role, format_args!($($t)*))
    };
}

impl Ctx {
    /// `setup()` of the C probe: memory filled with the side's pattern, MR, CQ, QP in INIT.
    fn setup(
        role: &'static str,
        local: IpAddr,
        p: &Plan,
        server: bool,
        inject: Option<rocex_io::Faults>,
    ) -> Res<Self> {
        let mut e = Engine::new(crate::device::config(local));
        let pd = e.alloc_pd();
        let depth = p.ops.len() as u32 * p.iters + 16;
        let cq = e.create_cq((depth * 2 + 16) as usize)?;
        let nrecv = if server { p.recvs() } else { 0 };
        let s = p.size;
        let len = 2 * s + ATOMIC_AREA + u64::from(nrecv) * s;
        let mut mem: Vec<u8> = (0..len)
            .map(|i| {
                if server {
                    pat_server(i % s)
                } else {
                    pat_client(i % s)
                }
            })
            .collect();
        if server {
            mem[..s as usize].fill(0);
            mem[(2 * s + ATOMIC_AREA) as usize..].fill(0);
        } else {
            mem[s as usize..2 * s as usize].fill(0);
        }
        let a = (2 * s) as usize;
        let init = if server { ATOMIC_INIT } else { 0 };
        mem[a..a + 8].copy_from_slice(&init.to_ne_bytes());
        mem[a + 8..a + 16].fill(0);
        let region = Arc::new(VecRegion::new(len as usize));
        region.write(0, &mem);

        let mut access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        if !p.uc {
            access |= Access::REMOTE_ATOMIC;
        }
        if server && p.has(Op::SendInv) {
            access |= Access::MW_BIND;
        }
        if server && p.has(Op::Flush) {
            access |= Access::FLUSH_GLOBAL;
        }
        let keys = match e.reg_mr(pd, BASE, len, access, region.clone()) {
            Ok(k) => k,
            Err(err) => return fatal(format!("reg_mr(access=0x{:x}): {err}", access.bits())),
        };
        let qpn = e.create_qp(QpInit {
            qp_type: if p.uc { QpType::Uc } else { QpType::Rc },
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap {
                max_send_wr: depth,
                max_recv_wr: nrecv + 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        })?;
        let mut qp_access = Access::REMOTE_WRITE | Access::REMOTE_READ;
        if !p.uc {
            qp_access |= Access::REMOTE_ATOMIC;
        }
        // rxe checks FLUSH against the QP's access flags, then the MR's.
        if server && p.has(Op::Flush) {
            qp_access |= Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT;
        }
        let at = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            qp_access_flags: qp_access,
            ..QpAttr::default()
        };
        if let Err(err) = e.modify_qp(
            qpn,
            &at,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        ) {
            return fatal(format!("modify INIT: {err}"));
        }
        let driver = crate::device::driver(e, local, inject)?;
        Ok(Self {
            role,
            driver,
            pd,
            cq,
            qpn,
            region,
            lkey: keys.lkey,
            rkey: keys.rkey,
            len,
        })
    }

    fn connect(&mut self, p: &Plan, rem: &PeerInfo, my_psn: u32) -> Res<()> {
        let e = &mut self.driver.engine;
        let mut at = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: mtu_of(p.mtu)?,
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            max_dest_rd_atomic: 16,
            min_rnr_timer: p.min_rnr,
            ah_attr: Some(AddressVector {
                dest: oob::ip_of(rem.gid),
            }),
            ..QpAttr::default()
        };
        let mut mask = AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN;
        if !p.uc {
            mask = mask | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
        }
        if let Err(err) = e.modify_qp(self.qpn, &at, mask) {
            return fatal(format!("modify RTR: {err}"));
        }
        at.qp_state = QpState::Rts;
        at.sq_psn = my_psn;
        at.timeout = p.timeout;
        at.retry_cnt = p.retry;
        at.rnr_retry = p.rnr_retry;
        at.max_rd_atomic = 16;
        let mut mask = AttrMask::STATE | AttrMask::SQ_PSN;
        if !p.uc {
            mask = mask
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC;
        }
        if let Err(err) = e.modify_qp(self.qpn, &at, mask) {
            return fatal(format!("modify RTS: {err}"));
        }
        Ok(())
    }

    fn send_qp_line(&self, line: &mut Line, local: IpAddr, psn: u32, rkey: u32) -> Res<()> {
        let gh = gid_hex(&oob::gid_of(local));
        line.send(&format!(
            "QP {:06x} {:06x} {gh} {rkey:08x} {BASE:016x} {}",
            self.qpn, psn, self.len
        ))?;
        say!(
            self.role,
            "local  QPN 0x{:06x} PSN 0x{psn:06x} GID {gh} (index 1) rkey 0x{rkey:08x}",
            self.qpn
        );
        Ok(())
    }

    fn recv_qp_line(&mut self, line: &mut Line, pump: bool) -> Res<PeerInfo> {
        let l = line.recv(if pump { Some(&mut self.driver) } else { None })?;
        let Some(p) = parse_qp_line(&l) else {
            return fatal(format!("bad QP line: {l}"));
        };
        say!(
            self.role,
            "remote QPN 0x{:06x} PSN 0x{:06x} GID {} rkey 0x{:08x} vaddr 0x{:x} len {}",
            p.qpn,
            p.psn,
            gid_hex(&p.gid),
            p.rkey,
            p.vaddr,
            p.len
        );
        Ok(p)
    }

    fn post_recvs(&mut self, p: &Plan, n: u32) -> Res<()> {
        for i in 0..n {
            let now = self.driver.now();
            let wr = RecvWr::new(
                1000 + u64::from(i),
                [Sge {
                    addr: BASE + 2 * p.size + ATOMIC_AREA + u64::from(i) * p.size,
                    length: p.size as u32,
                    lkey: self.lkey,
                }],
            );
            if let Err(err) = self.driver.engine.post_recv(now, self.qpn, wr) {
                return fatal(format!("post_recv: {err}"));
            }
        }
        say!(self.role, "posted {n} receives");
        Ok(())
    }

    /// One completion within `timeout`, the engine running meanwhile.
    fn get_wc(&mut self, timeout: Duration) -> Res<Option<WorkCompletion>> {
        let cq = self.cq;
        Ok(self.driver.run_until(timeout, |e| e.poll_cq(cq))?)
    }

    fn print_wc(&self, what: &str, wc: &WorkCompletion) {
        let mut flags = 0;
        let mut extra = String::new();
        if let Some(imm) = wc.imm_data {
            flags |= WC_WITH_IMM;
            extra = format!(" imm=0x{imm:08x}");
        }
        if let Some(r) = wc.invalidated_rkey {
            flags |= WC_WITH_INV;
            if extra.is_empty() {
                extra = format!(" inv_rkey=0x{r:08x}");
            }
        }
        let ok = wc.status == WcStatus::Success;
        say!(
            self.role,
            "CQE {what} status={}({}) opcode={} byte_len={} qp=0x{:06x} flags=0x{flags:x}{extra}",
            status_str(wc.status as i32),
            wc.status as i32,
            if ok { opcode_str(wc.opcode) } else { "-" },
            wc.byte_len,
            wc.qp_num
        );
    }

    fn read_mem(&self, off: u64, len: u64) -> Vec<u8> {
        let mut b = vec![0u8; len as usize];
        self.region.read(off, &mut b);
        b
    }

    fn read_u64(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.region.read(off, &mut b);
        u64::from_ne_bytes(b)
    }
}

fn pick_psn(p: &Plan, e: &mut Engine) -> u32 {
    match p.psn {
        Some(v) => v & 0xff_ffff,
        None => e.random_psn(),
    }
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let (role, r) = match &a.role {
        Role::Server(s) => {
            let _ = (&s.dev, s.gid_idx);
            ("server", run_server(s))
        }
        Role::Client(c) => {
            let _ = (&c.dev, c.gid_idx);
            ("client", run_client(c))
        }
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Fatal(m)) => {
            say!(role, "FATAL: {m}");
            ExitCode::from(2)
        }
    }
}

fn tcp_connect(host: &str, port: u16, wait_s: u64) -> Res<TcpStream> {
    let end = WallClock::now() + Duration::from_secs(wait_s);
    loop {
        if let Ok(s) = TcpStream::connect((host, port)) {
            return Ok(s);
        }
        if WallClock::now() >= end {
            return fatal(format!("cannot connect to {host}:{port}"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn tcp_accept(port: u16) -> Res<TcpStream> {
    // Dual-stack where the system allows it (bindv6only 0), else IPv4.
    let l = TcpListener::bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))));
    let l = match l {
        Ok(l) => l,
        Err(e) => return fatal(format!("listen on {port}: {e}")),
    };
    say!("server", "listening on tcp port {port}");
    match l.accept() {
        Ok((s, _)) => Ok(s),
        Err(e) => fatal(format!("accept: {e}")),
    }
}

fn run_client(a: &ClientArgs) -> Res<bool> {
    const ROLE: &str = "client";
    let mut size = a.size.max(8);
    if size % 8 != 0 {
        size += 8 - size % 8;
    }
    let mut expect = match &a.expect {
        Some(s) => Some(status_from_name(s)?),
        None => None,
    };
    if a.bad_rkey && expect.is_none() {
        expect = Some(WcStatus::RemAccessErr as i32);
    }
    let p = Plan {
        ops: parse_ops(&a.ops)?,
        size,
        iters: a.iters,
        mtu: a.mtu,
        uc: a.uc,
        bad_rkey: a.bad_rkey,
        rnr_delay: a.rnr_delay,
        min_rnr: a.min_rnr,
        psn: a.psn.map(|v| (v as u32) & 0xff_ffff),
        expect,
        timeout: a.timeout,
        retry: a.retry,
        rnr_retry: a.rnr_retry,
        flush_persistent: a.flush_type == "persistent",
    };
    mtu_of(p.mtu)?;
    let stream = tcp_connect(&a.peer, a.port, a.wait)?;
    let local = canonical(stream.local_addr()?.ip());
    let mut line = Line::new(stream, Duration::from_secs(a.wait))?;
    line.send(&format!("ROCEX-PROBE {PROTO_VERSION}"))?;
    line.send(&format!(
        "PLAN {} {} {} {} {}",
        p.ops_list(),
        p.size,
        p.iters,
        p.mtu,
        p.flags()
    ))?;

    let mut c = Ctx::setup(ROLE, local, &p, false, a.inject)?;
    let psn = pick_psn(&p, &mut c.driver.engine);
    c.send_qp_line(&mut line, local, psn, c.rkey)?;
    let rem = c.recv_qp_line(&mut line, true)?;
    c.connect(&p, &rem, psn)?;
    let l = line.recv(Some(&mut c.driver))?;
    let inv_rkey = match l
        .strip_prefix("READY ")
        .and_then(|h| u32::from_str_radix(h.trim(), 16).ok())
    {
        Some(k) => k,
        None => return fatal(format!("bad READY line: {l}")),
    };

    let rkey = if p.bad_rkey {
        rem.rkey ^ 0x00ff_ff00
    } else {
        rem.rkey
    };
    if p.bad_rkey {
        say!(
            ROLE,
            "using bad rkey 0x{rkey:08x} (valid: 0x{:08x})",
            rem.rkey
        );
    }
    let s = p.size;
    let r_write = rem.vaddr;
    let r_read = rem.vaddr + s;
    let r_atom = rem.vaddr + 2 * s;
    let (l_send, l_read, l_atom) = (BASE, BASE + s, BASE + 2 * s);
    let mut atomic_cur = ATOMIC_INIT;
    let mut imm = IMM_BASE;
    let (mut n_ok, mut n_err) = (0u32, 0u32);
    let (mut ok, mut expect_seen, mut stop) = (true, false, false);

    for (k, &op) in p.ops.iter().enumerate() {
        if stop {
            break;
        }
        let iters = if op == Op::SendInv { 1 } else { p.iters };
        for it in 0..iters {
            let what = format!("{}#{it}", op.name());
            let (cmp, swp, add) = (atomic_cur, atomic_cur.wrapping_add(0x1000), 1u64);
            let mut sge = Sge {
                addr: l_send,
                length: s as u32,
                lkey: c.lkey,
            };
            let remote = |addr| Remote { addr, rkey };
            let sop = match op {
                Op::Send => SendOp::Send,
                Op::SendImm => SendOp::SendWithImm(imm),
                Op::SendInv => SendOp::SendWithInv(inv_rkey),
                Op::Write => SendOp::Write(remote(r_write)),
                Op::WriteImm => SendOp::WriteWithImm(remote(r_write), imm),
                Op::Read => {
                    c.region.write(s, &vec![0u8; s as usize]);
                    sge.addr = l_read;
                    SendOp::Read(remote(r_read))
                }
                Op::Cas => {
                    sge.addr = l_atom;
                    sge.length = 8;
                    SendOp::CompareSwap {
                        remote: remote(r_atom),
                        compare: cmp,
                        swap: swp,
                    }
                }
                Op::Faa => {
                    sge.addr = l_atom;
                    sge.length = 8;
                    SendOp::FetchAdd {
                        remote: remote(r_atom),
                        add,
                    }
                }
                Op::AtomicWrite => SendOp::AtomicWrite {
                    remote: remote(r_atom + 8),
                    value: ATOMIC_WRITE_VALUE,
                },
                Op::Flush => SendOp::Flush {
                    remote: remote(r_write),
                    len: s as u32,
                    placement: if p.flush_persistent { 2 } else { 1 },
                    selectivity: 0,
                },
            };
            let sges = if matches!(op, Op::AtomicWrite | Op::Flush) {
                Vec::new()
            } else {
                vec![sge]
            };
            let wr = SendWr::new(k as u64 * 1000 + u64::from(it), sop, sges);
            let now = c.driver.now();
            if let Err(e) = c.driver.engine.post_send(now, c.qpn, wr) {
                return fatal(format!("post {what}: {e}"));
            }
            let Some(wc) = c.get_wc(Duration::from_secs(60))? else {
                say!(ROLE, "CQE {what}: no completion within 60 s");
                ok = false;
                stop = true;
                break;
            };
            c.print_wc(&what, &wc);
            if wc.status != WcStatus::Success {
                n_err += 1;
                if p.expect == Some(wc.status as i32) {
                    expect_seen = true;
                    say!(
                        ROLE,
                        "expected status {} seen",
                        status_str(wc.status as i32)
                    );
                } else {
                    ok = false;
                }
                stop = true; // the QP is in error now
                break;
            }
            n_ok += 1;
            if matches!(op, Op::SendImm | Op::WriteImm) {
                imm = imm.wrapping_add(1);
            }
            if op == Op::Read {
                let got = c.read_mem(s, s);
                if let Some(i) = (0..s).find(|&i| got[i as usize] != pat_server(i % s)) {
                    say!(
                        ROLE,
                        "READ data wrong at offset {i}: 0x{:02x}",
                        got[i as usize]
                    );
                    ok = false;
                }
            }
            if matches!(op, Op::Cas | Op::Faa) {
                let got = c.read_u64(2 * s);
                if got != atomic_cur {
                    say!(ROLE, "{what} returned 0x{got:x}, expected 0x{atomic_cur:x}");
                    ok = false;
                } else {
                    say!(ROLE, "{what} returned 0x{got:x}");
                }
                atomic_cur = if op == Op::Cas {
                    swp
                } else {
                    atomic_cur.wrapping_add(add)
                };
            }
        }
    }
    // Late completions (flushes after an error).
    while let Some(wc) = c.get_wc(Duration::from_millis(200))? {
        c.print_wc("extra", &wc);
    }
    if let Some(e) = p.expect
        && !expect_seen
    {
        say!(ROLE, "expected status {} not seen", status_str(e));
        ok = false;
    }

    line.send(&format!("DONE {n_ok} {n_err} {atomic_cur:016x}"))?;
    let l = line.recv(Some(&mut c.driver))?;
    let f: Vec<&str> = l.split_whitespace().collect();
    let (srv_rc, srv_n) = match (f.first(), f.get(1), f.get(2)) {
        (Some(&"RESULT"), Some(rc), Some(n)) => match (rc.parse::<i32>(), n.parse::<i32>()) {
            (Ok(rc), Ok(n)) => (rc, n),
            _ => return fatal(format!("bad RESULT line: {l}")),
        },
        _ => return fatal(format!("bad RESULT line: {l}")),
    };
    if srv_rc != 0 {
        ok = false;
    }
    say!(
        ROLE,
        "client {}: {n_ok} ok, {n_err} errors; server {} ({srv_n} receive completions)",
        if ok { "ok" } else { "FAILED" },
        if srv_rc != 0 { "FAILED" } else { "ok" }
    );
    // Answer what the peer may still retransmit (a lost ACK of ours).
    c.driver.linger(Duration::from_millis(200))?;
    crate::device::report_faults("rocex probe", c.driver.fault_counters());
    Ok(ok)
}

fn run_server(a: &ServerArgs) -> Res<bool> {
    const ROLE: &str = "server";
    let stream = tcp_accept(a.port)?;
    let local = canonical(stream.local_addr()?.ip());
    let mut line = Line::new(stream, Duration::from_secs(a.wait))?;
    let l = line.recv(None)?;
    if l.trim() != format!("ROCEX-PROBE {PROTO_VERSION}") {
        return fatal(format!("bad hello: {l}"));
    }
    let l = line.recv(None)?;
    let f: Vec<&str> = l.split_whitespace().collect();
    if f.len() != 6 || f[0] != "PLAN" {
        return fatal(format!("bad PLAN line: {l}"));
    }
    let bad = || Fatal(format!("bad PLAN line: {l}"));
    let mut p = Plan {
        ops: parse_ops(f[1])?,
        size: f[2].parse().map_err(|_| bad())?,
        iters: f[3].parse().map_err(|_| bad())?,
        mtu: f[4].parse().map_err(|_| bad())?,
        uc: false,
        bad_rkey: false,
        rnr_delay: 0,
        min_rnr: 12,
        psn: None,
        expect: None,
        timeout: 17,
        retry: 7,
        rnr_retry: 7,
        flush_persistent: false,
    };
    for t in f[5].split(',') {
        if t == "uc" {
            p.uc = true;
        } else if t == "badrkey" {
            p.bad_rkey = true;
        } else if let Some(v) = t.strip_prefix("rnrdelay=") {
            p.rnr_delay = v.parse().unwrap_or(0);
        } else if let Some(v) = t.strip_prefix("minrnr=") {
            p.min_rnr = v.parse().unwrap_or(12);
        } else if let Some(v) = t.strip_prefix("psn=") {
            p.psn = parse_num(v).ok().map(|v| (v as u32) & 0xff_ffff);
        } else if let Some(v) = t.strip_prefix("expect=") {
            p.expect = v.parse().ok();
        }
    }
    if p.size == 0 || p.size % 8 != 0 {
        return fatal(format!("bad size in PLAN line: {l}"));
    }
    say!(
        ROLE,
        "plan: ops={} size={} iters={} mtu={} flags={}",
        f[1],
        p.size,
        p.iters,
        p.mtu,
        f[5]
    );

    let mut c = Ctx::setup(ROLE, local, &p, true, a.inject)?;
    let psn = pick_psn(&p, &mut c.driver.engine);
    let rem = c.recv_qp_line(&mut line, true)?;
    c.send_qp_line(&mut line, local, psn, c.rkey)?;
    c.connect(&p, &rem, psn)?;

    let nrecv = p.recvs();
    if p.rnr_delay == 0 {
        c.post_recvs(&p, nrecv)?;
    }
    let mut inv_rkey = 0u32;
    if p.has(Op::SendInv) {
        // A type-2 memory window over the WRITE area, for SEND_WITH_INV.
        let mw = c.driver.engine.alloc_mw(c.pd);
        let mw = match mw {
            Ok(k) => k,
            Err(e) => return fatal(format!("alloc_mw: {e}")),
        };
        match c.driver.engine.bind_mw(
            c.pd,
            mw,
            c.lkey,
            BASE,
            p.size,
            Access::REMOTE_WRITE | Access::REMOTE_READ,
        ) {
            Ok(k) => inv_rkey = k,
            Err(e) => return fatal(format!("bind_mw: {e}")),
        }
        say!(
            ROLE,
            "CQE bind_mw status=success(0) opcode=BIND_MW byte_len=0 qp=0x{:06x} flags=0x0",
            c.qpn
        );
        say!(ROLE, "memory window rkey 0x{inv_rkey:08x}");
    }
    line.send(&format!("READY {inv_rkey:08x}"))?;
    if p.rnr_delay != 0 {
        say!(ROLE, "posting receives after {} ms (RNR)", p.rnr_delay);
        c.driver
            .linger(Duration::from_millis(u64::from(p.rnr_delay)))?;
        c.post_recvs(&p, nrecv)?;
    }

    // Receive completions wait in the CQ while the client runs; DONE says it has finished.
    let l = line.recv(Some(&mut c.driver))?;
    let f: Vec<&str> = l.split_whitespace().collect();
    let atomic_expect = match (f.first(), f.len()) {
        (Some(&"DONE"), 4) if f[1].parse::<u32>().is_ok() && f[2].parse::<u32>().is_ok() => {
            u64::from_str_radix(f[3], 16).map_err(|_| Fatal(format!("bad DONE line: {l}")))?
        }
        _ => return fatal(format!("bad DONE line: {l}")),
    };
    let want = if p.bad_rkey || p.expect.is_some() {
        0
    } else {
        nrecv as usize
    };
    let (mut got, mut errors, mut imm_ok, mut inv_seen, mut data_bad) = (0, 0, true, false, 0);
    let mut imm_next = IMM_BASE;
    while got < want {
        let Some(wc) = c.get_wc(Duration::from_secs(5))? else {
            break;
        };
        got += 1;
        c.print_wc("recv", &wc);
        if wc.status != WcStatus::Success {
            errors += 1;
            continue;
        }
        if let Some(imm) = wc.imm_data {
            if imm != imm_next {
                imm_ok = false;
            }
            imm_next = imm_next.wrapping_add(1);
        }
        if inv_rkey != 0 && wc.imm_data.is_none() && wc.invalidated_rkey == Some(inv_rkey) {
            inv_seen = true;
        }
        if wc.opcode == WcOpcode::Recv && (1000..1000 + u64::from(nrecv)).contains(&wc.wr_id) {
            let off = 2 * p.size + ATOMIC_AREA + (wc.wr_id - 1000) * p.size;
            let rb = c.read_mem(off, u64::from(wc.byte_len));
            if rb
                .iter()
                .enumerate()
                .any(|(i, &b)| b != pat_client(i as u64))
            {
                data_bad += 1;
            }
        }
    }
    // Whatever else is there (errors after a NAK, flushes).
    while let Some(wc) = c.get_wc(Duration::from_millis(300))? {
        c.print_wc("extra", &wc);
    }

    let mut ok = true;
    let mut why = String::new();
    if got < want {
        ok = false;
        why = format!("only {got} of {want} receive completions");
    }
    if errors > 0 && want > 0 {
        ok = false;
        why = format!("{errors} receive errors");
    }
    if !imm_ok {
        ok = false;
        why = "immediate data out of order".into();
    }
    if !p.bad_rkey && p.expect.is_none() {
        if p.has(Op::Write) || p.has(Op::WriteImm) {
            let w = c.read_mem(0, p.size);
            if let Some(i) = (0..p.size).find(|&i| w[i as usize] != pat_client(i)) {
                ok = false;
                why = format!("WRITE data wrong at {i}");
            }
        }
        if data_bad > 0 {
            ok = false;
            why = format!("{data_bad} received messages with wrong data");
        }
        let a0 = c.read_u64(2 * p.size);
        let a1 = c.read_u64(2 * p.size + 8);
        if (p.has(Op::Cas) || p.has(Op::Faa)) && a0 != atomic_expect {
            ok = false;
            why = format!("atomic word 0x{a0:x} expected 0x{atomic_expect:x}");
        }
        if p.has(Op::AtomicWrite) && a1 != ATOMIC_WRITE_VALUE {
            ok = false;
            why = format!("atomic_write word 0x{a1:x}");
        }
        if p.has(Op::SendInv) && !inv_seen {
            ok = false;
            why = format!("no completion invalidating 0x{inv_rkey:08x}");
        }
    }
    say!(
        ROLE,
        "server {}: {got} receive completions{}{why}",
        if ok { "ok" } else { "FAILED" },
        if why.is_empty() { "" } else { ", " }
    );
    line.send(&format!("RESULT {} {got}", if ok { 0 } else { 1 }))?;
    // The client may still retransmit a request whose ACK was lost.
    c.driver.linger(Duration::from_millis(300))?;
    crate::device::report_faults("rocex probe", c.driver.fault_counters());
    Ok(ok)
}
