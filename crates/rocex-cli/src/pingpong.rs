//! `rocex pingpong`: libibverbs' `ibv_rc_pingpong` test (and with `--ud`,
//! `ibv_ud_pingpong`'s). Each side posts `rx_depth`
//! receives; the client sends first; each completed receive lets the next send go, until
//! each side has sent and received `iters` messages of `size` bytes. The QP attributes and
//! the out-of-band exchange are the stock tool's, so either side can be `ibv_rc_pingpong`.

use std::io;
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use rocex_io::Driver;
use rocex_proto::verbs::{
    AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendOp, SendWr, Sge,
    UdDest, WcStatus,
};
use rocex_proto::{Access, Engine, GRH_LEN, Region, VecRegion};

use crate::device::{self, Post, mtu_of, verbs_err};
use crate::oob::{self, Dest};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Server to connect to; without it, wait for a client.
    server: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    port: u16,
    /// Device name (accepted for compatibility; rocex has one device per address).
    #[arg(short = 'd', long = "ib-dev")]
    ib_dev: Option<String>,
    /// Port of the device: a rocex device has one, port 1.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=1))]
    ib_port: u8,
    /// GID index (accepted for compatibility; the GID is the address the exchange uses).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Message size in bytes [default: 4096; 2048 with --ud], at most 2 GiB (RC's largest
    /// message); with --ud at most the port MTU, 4096.
    #[arg(short = 's', long, value_parser = clap::value_parser!(u32).range(..=i64::from(MAX_MSG)))]
    size: Option<u32>,
    /// Path MTU (256, 512, 1024, 2048 or 4096).
    #[arg(short = 'm', long, default_value_t = 1024, value_parser = crate::device::parse_mtu)]
    mtu: u32,
    /// Receives posted at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_DEPTH)))]
    rx_depth: u32,
    /// Messages each way.
    #[arg(short = 'n', long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Service level, 0 to 15 (accepted for compatibility: RoCE v2 over a UDP socket
    /// carries none).
    #[arg(short = 'l', long = "sl", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=15))]
    sl: u8,
    /// Sleep on CQ events instead of polling (accepted for compatibility: the engine in
    /// this process always sleeps on its socket while there is nothing to do).
    #[arg(short = 'e', long)]
    events: bool,
    /// Validate the received buffer as the stock tools do: the client's buffer holds 0x7b
    /// with the first byte of each page set to 0; the server checks those bytes at the end
    /// and prints "invalid data in page N" for each that differs (and exits 1).
    #[arg(short = 'c', long)]
    chk: bool,
    /// Unreliable datagrams, as `ibv_ud_pingpong`: Q_Key 0x11111111, receive buffers with
    /// room for the 40-byte GRH, the size at most the port MTU.
    #[arg(long)]
    ud: bool,
    /// Seconds a client keeps trying while nothing listens at the server's port.
    #[arg(long, value_name = "SECS", default_value_t = oob::CONNECT_WAIT.as_secs_f64(),
          value_parser = crate::device::parse_secs)]
    connect_timeout: f64,
    /// Fault injection on every packet this side sends (rocexd's syntax):
    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N`. What was done is printed on stderr
    /// at the end.
    #[arg(long, value_name = "SPEC")]
    inject: Option<rocex_io::Faults>,
    /// Selective repeat towards the peer, which must be rocex with it on too (rocexd's
    /// `--selective-repeat`; docs/wire.md, "Selective repeat"): with only one end on, the
    /// first SEND or WRITE fails with a remote invalid request error.
    #[arg(long)]
    selective_repeat: bool,
}

/// RC's largest message (the IB limit, 2^31 bytes, which rxe keeps).
const MAX_MSG: u32 = 1 << 31;
/// The deepest receive queue (rxe's `max_qp_wr`).
const MAX_DEPTH: u32 = 1 << 14;
/// The port MTU of the engine in this process: the largest UD message.
const PORT_MTU: u32 = 4096;
/// What the stock tools fill their buffer with before a run.
const FILL: u8 = 0x7b;

impl Args {
    fn size(&self) -> u32 {
        self.size.unwrap_or(if self.ud { 2048 } else { 4096 })
    }
}

/// The Q_Key `ibv_ud_pingpong` uses.
const UD_QKEY: u32 = 0x1111_1111;

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

struct Ctx {
    driver: Driver,
    qpn: u32,
    cq: u32,
    /// Where sends come from: after the GRH room for UD.
    send_sge: Sge,
    /// Where receives go: with the GRH room for UD.
    recv_sge: Sge,
    /// Whether the QP is UD.
    ud_mode: bool,
    /// The UD destination, once known.
    ud: Option<UdDest>,
    /// The buffer sends come from and receives go to, as the stock tools' one buffer.
    buf: Arc<VecRegion>,
}

/// A device on `local` with one RC QP in INIT and `rx_depth` receives posted.
fn open(local: IpAddr, a: &Args) -> io::Result<Ctx> {
    let mut e = Engine::new(rocex_proto::Config {
        selective_repeat: a.selective_repeat,
        ..device::config(local)
    });
    let pd = e.alloc_pd();
    let grh = if a.ud { GRH_LEN as u32 } else { 0 };
    let len = a.size() + grh;
    let buf = Arc::new(VecRegion::new(len.max(1) as usize));
    // The stock tools' fill, a page at a time: a message may be 2 GiB.
    let page = vec![FILL; 4096];
    for at in (0..u64::from(len)).step_by(page.len()) {
        let n = (u64::from(len) - at).min(page.len() as u64) as usize;
        buf.write(at, &page[..n]);
    }
    const BUF_ADDR: u64 = 0x1000_0000;
    let keys = e
        .reg_mr(
            pd,
            BUF_ADDR,
            u64::from(len.max(1)),
            Access::LOCAL_WRITE,
            buf.clone(),
        )
        .map_err(verbs_err)?;
    let cq = e.create_cq(a.rx_depth as usize + 1).map_err(verbs_err)?;
    let cap = QpCap {
        max_send_wr: 1,
        max_recv_wr: a.rx_depth,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
    };
    let qpn = device::create_qp(
        &mut e,
        if a.ud { QpType::Ud } else { QpType::Rc },
        pd,
        cq,
        cap,
    )?;
    let init = QpAttr {
        qp_state: QpState::Init,
        qkey: UD_QKEY,
        ..QpAttr::default()
    };
    let last = if a.ud {
        AttrMask::QKEY
    } else {
        AttrMask::ACCESS_FLAGS
    };
    e.modify_qp(
        qpn,
        &init,
        AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | last,
    )
    .map_err(verbs_err)?;
    let driver = device::driver(e, local, a.inject)?;
    let recv_sge = Sge {
        addr: BUF_ADDR,
        length: len,
        lkey: keys.lkey,
    };
    let send_sge = Sge {
        addr: BUF_ADDR + u64::from(grh),
        length: a.size(),
        lkey: keys.lkey,
    };
    let mut ctx = Ctx {
        driver,
        qpn,
        cq,
        send_sge,
        recv_sge,
        ud_mode: a.ud,
        ud: None,
        buf,
    };
    for _ in 0..a.rx_depth {
        ctx.post_recv()?;
    }
    Ok(ctx)
}

impl Ctx {
    fn post_recv(&mut self) -> io::Result<()> {
        let wr = RecvWr::new(RECV_WRID, [self.recv_sge]);
        self.driver.post_recv(self.qpn, wr)
    }

    fn post_send(&mut self) -> io::Result<()> {
        let mut wr = SendWr::new(SEND_WRID, SendOp::Send, [self.send_sge]);
        wr.ud = self.ud;
        self.driver.post_send(self.qpn, wr)
    }

    /// RTR and RTS with ibv_rc_pingpong's attributes, or ibv_ud_pingpong's.
    fn connect(&mut self, me: &Dest, peer: &Dest, mtu: Mtu) -> io::Result<()> {
        let e = &mut self.driver.engine;
        if self.ud_mode {
            let mut a = QpAttr {
                qp_state: QpState::Rtr,
                ..QpAttr::default()
            };
            e.modify_qp(self.qpn, &a, AttrMask::STATE)
                .map_err(verbs_err)?;
            a.qp_state = QpState::Rts;
            a.sq_psn = me.psn;
            e.modify_qp(self.qpn, &a, AttrMask::STATE | AttrMask::SQ_PSN)
                .map_err(verbs_err)?;
            self.ud = Some(UdDest {
                dest: oob::ip_of(peer.gid),
                remote_qpn: peer.qpn,
                remote_qkey: UD_QKEY,
            });
            return Ok(());
        }
        let to_rts = QpAttr {
            path_mtu: mtu,
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: Some(AddressVector {
                dest: oob::ip_of(peer.gid),
            }),
            sq_psn: me.psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            ..QpAttr::default()
        };
        // The QP is in INIT since `open`.
        let [_init, rtr, rts] = to_rts.rc_steps();
        for (a, mask) in [rtr, rts] {
            e.modify_qp(self.qpn, &a, mask).map_err(verbs_err)?;
        }
        Ok(())
    }
}

/// Whether the peer closed the out-of-band connection (as ibv_rc_pingpong does on exit).
fn peer_closed(s: &mut std::net::TcpStream) -> bool {
    let mut b = [0u8; 16];
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let closed = matches!(io::Read::read(s, &mut b), Ok(0));
    let _ = s.set_nonblocking(false);
    closed
}

fn print_dest(label: &str, d: &Dest) {
    let gid = oob::ip_of(d.gid);
    println!(
        "  {label} address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {gid}",
        d.lid, d.qpn, d.psn
    );
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let _ = (&a.ib_dev, a.gid_idx, a.ib_port, a.sl, a.events);
    if let Err(e) = check(a) {
        eprintln!("rocex pingpong: {e}");
        return ExitCode::from(2);
    }
    match pingpong(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocex pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What the options allow together, checked before any exchange or wait (a single
/// option's range is clap's).
fn check(a: &Args) -> Result<(), String> {
    if a.ud && a.size() > PORT_MTU {
        return Err(format!(
            "--size {} with --ud: a datagram is at most the port MTU ({PORT_MTU})",
            a.size()
        ));
    }
    Ok(())
}

/// The page size, which `--chk` steps by as the stock tools do.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

/// The offsets of the first byte of each page of a `size`-byte message: what `--chk`
/// sets and checks. The stock tools write the page number modulo `sizeof(char)`, that
/// is 0, over a buffer filled with 0x7b.
fn chk_pages(size: u32) -> impl Iterator<Item = u64> {
    (0..u64::from(size)).step_by(page_size() as usize)
}

fn pingpong(a: &Args) -> io::Result<()> {
    let mtu = mtu_of(a.mtu)?;
    let wait = Duration::from_secs_f64(a.connect_timeout);
    // The exchange as ibv_rc_pingpong does it: the client sends first and says "done";
    // the server connects its QP before it answers.
    let mut s = match &a.server {
        Some(server) => oob::connect("rocex pingpong", server, a.port, wait)?,
        None => {
            eprintln!(
                "rocex pingpong: waiting for a client on TCP port {}",
                a.port
            );
            oob::accept(a.port)?
        }
    };
    let local = s.local_addr()?.ip();
    let mut ctx = open(local, a)?;
    let psn = ctx.driver.engine.random_psn();
    let me = Dest {
        lid: 0,
        qpn: ctx.qpn,
        psn,
        gid: oob::gid_of(local),
    };
    let exchange = |s: &mut std::net::TcpStream, ctx: &mut Ctx| -> io::Result<Dest> {
        if a.server.is_some() {
            oob::send(s, &me)?;
            let peer = oob::recv(s)?;
            oob::send_done(s)?;
            ctx.connect(&me, &peer, mtu)?;
            Ok(peer)
        } else {
            let peer = oob::recv(s)?;
            ctx.connect(&me, &peer, mtu)?;
            oob::send(s, &me)?;
            oob::wait_done(s);
            Ok(peer)
        }
    };
    let peer = exchange(&mut s, &mut ctx).map_err(|e| oob::with_peer(&s, e))?;
    let grh = if a.ud { GRH_LEN as u64 } else { 0 };
    if a.chk && a.server.is_some() {
        for at in chk_pages(a.size()) {
            ctx.buf.write(grh + at, &[0]);
        }
    }
    print_dest("local", &me);
    print_dest("remote", &peer);
    let peer_ip = oob::ip_of(peer.gid);
    exchange_messages(a, &mut ctx, &mut s, grh)
        .map_err(|e| io::Error::new(e.kind(), format!("{e} (RDMA peer {peer_ip})")))
}

/// The ping-pong itself, then the report and the `--chk` check.
fn exchange_messages(
    a: &Args,
    ctx: &mut Ctx,
    s: &mut std::net::TcpStream,
    grh: u64,
) -> io::Result<()> {
    let start = WallClock::now();
    let (mut scnt, mut rcnt, mut routs) = (0u32, 0u32, a.rx_depth);
    let mut pending = RECV_WRID;
    if a.server.is_some() {
        ctx.post_send()?;
        pending |= SEND_WRID;
    }
    let mut last_progress = WallClock::now();
    while scnt < a.iters || rcnt < a.iters {
        ctx.driver.wait(Duration::from_millis(5))?;
        while let Some(wc) = ctx.driver.engine.poll_cq(ctx.cq) {
            last_progress = WallClock::now();
            if wc.status != WcStatus::Success {
                return Err(io::Error::other(format!(
                    "failed status {:?} for wr_id {}",
                    wc.status, wc.wr_id
                )));
            }
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        while routs < a.rx_depth {
                            ctx.post_recv()?;
                            routs += 1;
                        }
                    }
                    rcnt += 1;
                }
                other => {
                    return Err(io::Error::other(format!(
                        "completion for unknown wr_id {other}"
                    )));
                }
            }
            pending &= !wc.wr_id;
            if scnt < a.iters && pending == 0 {
                ctx.post_send()?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
        if rcnt == a.iters
            && scnt + 1 == a.iters
            && last_progress.elapsed() > Duration::from_secs(1)
            && peer_closed(s)
        {
            // The peer counted our last message as received and exited; its ACK was lost
            // on the way and no one is left to send it again. ibv_rc_pingpong would wait
            // here for ever.
            eprintln!(
                "rocex pingpong: no ACK of our last SEND within 1 s of all else completing, and the peer has closed its connection: its ACK was lost after it exited"
            );
            scnt += 1;
            continue;
        }
        if last_progress.elapsed() > Duration::from_secs(30) {
            return Err(io::Error::other(format!(
                "no progress for 30 s ({scnt} sent, {rcnt} received)"
            )));
        }
    }
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let bytes = u64::from(a.size()) * u64::from(a.iters) * 2;
    println!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    println!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        a.iters,
        usec / 1e6,
        usec / f64::from(a.iters)
    );
    // The peer's last message needs our ACK, and a lost ACK needs answering again.
    ctx.driver.linger(Duration::from_millis(500))?;
    let c = ctx.driver.engine.counters();
    eprintln!(
        "rocex: sent_pkts={} rcvd_pkts={} retransmitted={} duplicate_request={} out_of_seq={}",
        c.sent_pkts, c.rcvd_pkts, c.retransmitted_pkts, c.duplicate_request, c.out_of_seq_request
    );
    device::report_faults("rocex pingpong", ctx.driver.fault_counters());
    if a.chk && a.server.is_none() {
        let mut bad = 0;
        for at in chk_pages(a.size()) {
            let mut b = [0u8; 1];
            ctx.buf.read(grh + at, &mut b);
            if b[0] != 0 {
                println!("invalid data in page {}", at / page_size());
                bad += 1;
            }
        }
        if bad > 0 {
            return Err(io::Error::other(format!(
                "--chk: {bad} pages with invalid data"
            )));
        }
    }
    Ok(())
}
