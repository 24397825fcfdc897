//! `rocex demo`: two rocex engines on 127.0.0.1 and 127.0.0.2, over the UDP backend, with
//! no setup and no privileges: a SEND ping-pong, and a verified RDMA WRITE stream, and a table of what happened.

use std::io;
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallClock};

use rocex_io::{BackendOptions, Driver, UdpPort};
use rocex_proto::verbs::{
    AddressVector, Mtu, QpAttr, QpCap, QpType, RecvWr, Remote, SendOp, SendWr, Sge, WcStatus,
    WorkCompletion,
};
use rocex_proto::{Access, Config, Engine, Keys, Region, VecRegion};

use crate::device::{self, Post, verbs_err};
use crate::progress::{Line, Stall};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Ping-pong round trips.
    #[arg(long, default_value_t = 1000)]
    pings: u32,
    /// WRITE messages of 64 KiB.
    #[arg(long, default_value_t = 400)]
    writes: u32,
    /// Fault injection on both engines' packets: `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N`.
    #[arg(long, value_name = "SPEC")]
    inject: Option<rocex_io::Faults>,
    /// Both engines recover from loss by selective repeat (docs/wire.md, "Selective
    /// repeat") instead of go-back-N.
    #[arg(long)]
    selective_repeat: bool,
}

const BUF: usize = 4 << 20;
const BASE: u64 = 0x7000_0000;
const MSG: u32 = 64 << 10;

struct Side {
    driver: Driver,
    qpn: u32,
    cq: u32,
    keys: Keys,
    buf: Arc<VecRegion>,
}

fn side(
    ip: [u8; 4],
    seed: u8,
    inject: Option<rocex_io::Faults>,
    selective_repeat: bool,
) -> io::Result<Side> {
    let ip = IpAddr::from(ip);
    // Fixed seeds: the demo's QPNs and keys are the same on every run.
    let mut e = Engine::new(Config {
        rng_seed: [seed; 32],
        selective_repeat,
        ..crate::device::config(ip)
    });
    let pd = e.alloc_pd();
    let buf = Arc::new(VecRegion::new(BUF));
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let keys = e
        .reg_mr(pd, BASE, BUF as u64, access, buf.clone())
        .map_err(verbs_err)?;
    let cq = e.create_cq(4096).map_err(verbs_err)?;
    let cap = QpCap {
        max_send_wr: 512,
        max_recv_wr: 512,
        ..QpCap::default()
    };
    let qpn = device::create_qp(&mut e, QpType::Rc, pd, cq, cap)?;
    // Every peer is rocex: the strict ICRC check, which a corrupted packet passes with
    // probability 2^-26 rather than 2^-16 (docs/security.md).
    let opts = BackendOptions {
        peers_are_rocex: true,
        ..BackendOptions::default()
    };
    let mut driver = Driver::new(e, UdpPort::open(ip, opts)?);
    if let Some(mut f) = inject {
        f.seed = f.seed.wrapping_add(u64::from(seed));
        driver.inject(f);
    }
    Ok(Side {
        driver,
        qpn,
        cq,
        keys,
        buf,
    })
}

fn connect(s: &mut Side, peer: (IpAddr, u32, u32), my_psn: u32) -> io::Result<()> {
    let e = &mut s.driver.engine;
    let to_rts = QpAttr {
        qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: Mtu::M4096,
        dest_qp_num: peer.1,
        rq_psn: peer.2,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 1,
        sq_psn: my_psn,
        timeout: 12,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 16,
        ..QpAttr::default()
    };
    for (a, mask) in to_rts.rc_steps() {
        e.modify_qp(s.qpn, &a, mask).map_err(verbs_err)?;
    }
    Ok(())
}

impl Side {
    fn sge(&self, off: u64, len: u32) -> Sge {
        Sge {
            addr: BASE + off,
            length: len,
            lkey: self.keys.lkey,
        }
    }

    fn post_send(&mut self, wr: SendWr) -> io::Result<()> {
        self.driver.post_send(self.qpn, wr)
    }

    fn post_recv(&mut self, id: u64) -> io::Result<()> {
        let wr = RecvWr::new(id, [self.sge(0, 64)]);
        self.driver.post_recv(self.qpn, wr)
    }

    /// Waits for the next completion, keeping `watch` (the main side's) up to date; an
    /// error status is an error, and so is a wait of [`GIVE_UP`].
    fn next(&mut self, mut watch: Option<&mut Watch>) -> io::Result<WorkCompletion> {
        let cq = self.cq;
        let since = WallClock::now();
        let wc = loop {
            let slice = Duration::from_millis(200);
            if let Some(wc) = self.driver.run_until(slice, |e| e.poll_cq(cq))? {
                break wc;
            }
            let retransmitted = self.driver.engine.counters().retransmitted_pkts;
            if let Some(w) = watch.as_deref_mut() {
                w.waiting(retransmitted);
            }
            if since.elapsed() >= GIVE_UP {
                return Err(io::Error::other(format!(
                    "no completion within {} s on {} ({retransmitted} packets retransmitted)",
                    GIVE_UP.as_secs(),
                    self.driver.engine.config().local
                )));
            }
        };
        if let Some(w) = watch {
            w.completed(self.driver.engine.counters().retransmitted_pkts);
        }
        if wc.status != WcStatus::Success {
            return Err(io::Error::other(format!(
                "work request {} failed: {:?}",
                wc.wr_id, wc.status
            )));
        }
        Ok(wc)
    }
}

/// A wait this long for one completion ends the demo.
const GIVE_UP: Duration = Duration::from_secs(30);

/// What the demo shows while it runs: on a terminal, the phase's messages done, their
/// rate and the retransmissions so far; on any stderr, a note when nothing has completed
/// for 5 s.
struct Watch {
    line: Line,
    stall: Stall,
    phase: &'static str,
    done: u64,
    of: u64,
    start: WallClock,
}

impl Watch {
    fn new() -> Self {
        Self {
            line: Line::new(),
            stall: Stall::new(Duration::from_secs(5)),
            phase: "",
            done: 0,
            of: 0,
            start: WallClock::now(),
        }
    }

    /// A new phase of `of` messages.
    fn phase(&mut self, phase: &'static str, of: u32) {
        self.line.finish();
        (self.phase, self.done, self.of) = (phase, 0, u64::from(of));
        self.start = WallClock::now();
        self.stall.progressed();
    }

    /// One message of the phase is done.
    fn count(&mut self) {
        self.done += 1;
    }

    fn completed(&mut self, retransmitted: u64) {
        self.stall.progressed();
        self.draw(retransmitted);
    }

    fn waiting(&mut self, retransmitted: u64) {
        let (phase, done, of) = (self.phase, self.done, self.of);
        if let Some(note) = self.stall.check(|idle| {
            format!(
                "rocex demo: {phase}: nothing completed for {} s ({done} of {of} done, {retransmitted} packets retransmitted by 127.0.0.1); giving up after {} s",
                idle.as_secs(),
                GIVE_UP.as_secs()
            )
        }) {
            self.line.say(&note);
        }
        self.draw(retransmitted);
    }

    fn draw(&mut self, retransmitted: u64) {
        if self.line.due() {
            let text = format!(
                "{}: {}/{} {} retransmitted {retransmitted}",
                self.phase,
                self.done,
                self.of,
                crate::progress::rate(self.done, self.start.elapsed())
            );
            self.line.draw(&text);
        }
    }
}

fn pattern(i: u64, out: &mut [u8]) {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for b in out {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

struct Row {
    test: &'static str,
    detail: String,
    secs: f64,
    rate: String,
    verified: &'static str,
}

pub(crate) fn run(a: &Args) -> ExitCode {
    match demo(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocex demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(a: &Args) -> io::Result<()> {
    let mut x = side([127, 0, 0, 1], 1, a.inject, a.selective_repeat)?;
    let mut y = side([127, 0, 0, 2], 2, a.inject, a.selective_repeat)?;
    let (px, py) = (x.driver.engine.random_psn(), y.driver.engine.random_psn());
    connect(&mut x, (IpAddr::from([127, 0, 0, 2]), y.qpn, py), px)?;
    connect(&mut y, (IpAddr::from([127, 0, 0, 1]), x.qpn, px), py)?;
    println!(
        "rocex demo: two engines, 127.0.0.1 (QPN {:#08x}) and 127.0.0.2 (QPN {:#08x}), RC, path MTU 4096, UDP port 4791",
        x.qpn, y.qpn
    );

    let y_rkey = y.keys.rkey;
    // 127.0.0.2 answers every SEND with a SEND, in its own thread.
    let stop = Arc::new(AtomicBool::new(false));
    let pings = a.pings;
    let stop_y = stop.clone();
    let peer = std::thread::spawn(move || -> io::Result<Side> {
        for i in 0..64 {
            y.post_recv(i)?;
        }
        let mut answered = 0;
        while answered < pings {
            let wc = y.next(None)?;
            if wc.opcode == rocex_proto::verbs::WcOpcode::Recv {
                y.post_recv(wc.wr_id)?;
                y.post_send(SendWr::new(1, SendOp::Send, [y.sge(64, 64)]))?;
                answered += 1;
            }
        }
        while !stop_y.load(Ordering::Relaxed) {
            y.driver.wait(Duration::from_millis(5))?;
        }
        Ok(y)
    });

    let mut rows = Vec::new();
    for i in 0..64 {
        x.post_recv(i)?;
    }
    let mut watch = Watch::new();
    watch.phase("SEND ping-pong", pings);
    let t = WallClock::now();
    for _ in 0..pings {
        x.post_send(SendWr::new(1, SendOp::Send, [x.sge(64, 64)]))?;
        let mut got = (false, false);
        while got != (true, true) {
            let wc = x.next(Some(&mut watch))?;
            if wc.opcode == rocex_proto::verbs::WcOpcode::Recv {
                x.post_recv(wc.wr_id)?;
                got.1 = true;
            } else {
                got.0 = true;
            }
        }
        watch.count();
    }
    let secs = t.elapsed().as_secs_f64();
    rows.push(Row {
        test: "SEND ping-pong",
        detail: format!("64 B x {pings}"),
        secs,
        rate: format!("{:.1} us round trip", secs * 1e6 / f64::from(pings.max(1))),
        verified: "-",
    });

    // Verified WRITE stream: 64 KiB messages into 16 slots of the peer's buffer.
    let slots = 16u64;
    let mut data = vec![0u8; MSG as usize];
    watch.phase("RDMA WRITE", a.writes);
    let t = WallClock::now();
    let mut outstanding = 0;
    for i in 0..u64::from(a.writes) {
        let slot = i % slots;
        pattern(i, &mut data);
        x.buf.write(0x10_0000 + slot * u64::from(MSG), &data);
        let remote = Remote {
            addr: BASE + 0x10_0000 + slot * u64::from(MSG),
            rkey: y_rkey,
        };
        outstanding += 1;
        if outstanding == 8 {
            x.next(Some(&mut watch))?;
            watch.count();
            outstanding -= 1;
        }
        let wr = SendWr::new(
            i,
            SendOp::Write(remote),
            [x.sge(0x10_0000 + slot * u64::from(MSG), MSG)],
        );
        x.post_send(wr)?;
    }
    while outstanding > 0 {
        x.next(Some(&mut watch))?;
        watch.count();
        outstanding -= 1;
    }
    let secs = t.elapsed().as_secs_f64();
    watch.line.finish();
    stop.store(true, Ordering::Relaxed);
    let y = peer
        .join()
        .map_err(|_| io::Error::other("the peer thread panicked"))??;
    let mut ok = true;
    for i in u64::from(a.writes).saturating_sub(slots)..u64::from(a.writes) {
        pattern(i, &mut data);
        let mut got = vec![0u8; MSG as usize];
        y.buf
            .read(0x10_0000 + (i % slots) * u64::from(MSG), &mut got);
        ok &= got == data;
    }
    let bytes = u64::from(a.writes) * u64::from(MSG);
    rows.push(Row {
        test: "RDMA WRITE",
        detail: format!("64 KiB x {}", a.writes),
        secs,
        rate: format!("{:.2} Gb/s", bytes as f64 * 8.0 / secs / 1e9),
        verified: if ok { "yes" } else { "NO" },
    });
    print_table(&rows, &x, &y);
    if ok {
        Ok(())
    } else {
        Err(io::Error::other("WRITE data did not verify"))
    }
}

fn print_table(rows: &[Row], x: &Side, y: &Side) {
    println!();
    println!(
        "{:<16} {:<14} {:>9} {:>22} {:>9}",
        "test", "size", "seconds", "rate", "verified"
    );
    for r in rows {
        println!(
            "{:<16} {:<14} {:>9.3} {:>22} {:>9}",
            r.test, r.detail, r.secs, r.rate, r.verified
        );
    }
    if let (Some(fx), Some(fy)) = (x.driver.fault_counters(), y.driver.fault_counters()) {
        println!();
        println!("injected          127.0.0.1   127.0.0.2");
        for (name, a, b) in [
            ("lost", fx.lost, fy.lost),
            ("duplicated", fx.duplicated, fy.duplicated),
            ("reordered", fx.reordered, fy.reordered),
            ("corrupted", fx.corrupted, fy.corrupted),
        ] {
            println!("{name:<17} {a:>9}   {b:>9}");
        }
    }
    let (cx, cy) = (x.driver.engine.counters(), y.driver.engine.counters());
    println!();
    println!("counters          127.0.0.1   127.0.0.2");
    for ((name, a), (_, b)) in cx.iter().zip(cy.iter()) {
        if a != 0 || b != 0 {
            println!("{name:<17} {a:>9}   {b:>9}");
        }
    }
}
