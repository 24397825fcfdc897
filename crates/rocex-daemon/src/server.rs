//! The event loop and the control-channel handlers.
//!
//! One thread owns everything: the engine, the packet I/O backend, the Unix listener and
//! every client. Each turn it accepts clients, serves control requests, moves descriptors
//! from the SQ/RQ rings into the engine, does the packet I/O and timers (`net.rs`), and
//! moves completions into the CQ rings. While a turn finds work it turns again at once
//! (busy polling: a posted request costs the client no system call); an empty turn polls
//! again only inside the adaptive window of `spin.rs`, yielding the core each time, and
//! otherwise arms every ring's doorbell (`need_wakeup`) and sleeps in poll(2) on the
//! backend, the listener, the client sockets and the doorbell eventfds, until the next
//! engine timer.

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rocex_mem::MemError;
use rocex_proto::{Engine, Instant, PdId, VerbsError};
use rocex_shm::ABI_VERSION;
use rocex_shm::control::{
    DeviceAttr, QpStat, Request, Response, STAT_BUDGET, StatGroup, Stats as StatBody, encode_frame,
    kind, response_fds,
};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::client::{Client, Frame, Gone};
use crate::cm::Cm;
use crate::config::Settings;
use crate::limits::{MrBytes, OverLimit};
use crate::net::Net;
use crate::pump::{self, PumpStats, WIRE_SAMPLE_EVERY, WireLatency};
use crate::spin::Spin;

mod cq;
mod pd_mr;
mod qp;

use pd_mr::NewMr;
use qp::NewQp;

/// Counters of hostile or failed input, logged at shutdown.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stats {
    /// Requests answered with an error.
    pub(crate) request_errors: u64,
    /// Connections closed for a malformed frame.
    pub(crate) bad_frames: u64,
    /// Clients that went away.
    pub(crate) disconnects: u64,
    /// Requests refused for a per-client limit.
    pub(crate) over_limit: u64,
    /// Ring faults.
    pub(crate) pump: PumpStats,
}

/// A request's answer: the response and the descriptors that go with it.
struct Reply {
    resp: Response,
    fds: Vec<OwnedFd>,
}

impl Reply {
    fn ok(resp: Response) -> Self {
        Self {
            resp,
            fds: Vec::new(),
        }
    }
    fn err(errno: i32, why: impl Into<String>) -> Self {
        Self::ok(Response::error(errno, why))
    }
    /// `EDQUOT`, the detail starting with the limit's key (`docs/abi.md` §6.3).
    fn over(e: OverLimit) -> Self {
        Self::err(libc::EDQUOT, e.to_string())
    }
}

fn dup(fd: impl AsFd) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0)?)
}

/// The answer to a client's first request, which must be `Hello` with this ABI version.
fn hello(c: &mut Client, req: Request) -> Reply {
    match req {
        Request::Hello { abi_version } if abi_version == ABI_VERSION => {
            c.hello = true;
            Reply::ok(Response::Hello {
                abi_version: ABI_VERSION,
                daemon_pid: std::process::id(),
            })
        }
        Request::Hello { abi_version } => Reply::err(
            libc::EPROTO,
            format!("ABI version {abi_version}; this daemon speaks {ABI_VERSION}"),
        ),
        _ => Reply::err(libc::EPROTO, "Hello must come first"),
    }
}

/// The engine's refusal as an error reply.
fn verbs_error(e: VerbsError) -> Reply {
    Reply::err(errno_of(&e), e.to_string())
}

fn errno_of(e: &VerbsError) -> i32 {
    match e {
        VerbsError::NoSuchQp(_) | VerbsError::NoSuchCq(_) => libc::ENOENT,
        VerbsError::CqBusy(_) | VerbsError::Mem(MemError::Busy) => libc::EBUSY,
        VerbsError::Mem(MemError::UnknownPd { .. } | MemError::UnknownKey { .. }) => libc::ENOENT,
        VerbsError::Limit(_) => libc::ENOMEM,
        _ => libc::EINVAL,
    }
}

/// The daemon.
#[derive(Debug)]
pub(crate) struct Server {
    engine: Engine,
    epoch: std::time::Instant,
    net: Net,
    local: IpAddr,
    listener: UnixListener,
    clients: BTreeMap<u64, Client>,
    /// Bytes each client has registered (`limits.max_mr_bytes`).
    mr_bytes: BTreeMap<u64, MrBytes>,
    next_client: u64,
    settings: Settings,
    /// rdma_cm on QP1 for the clients.
    cm: Cm,
    /// Counters.
    pub(crate) stats: Stats,
    /// Sampled send work requests' time from the pass that read their descriptor to the
    /// send call that carried their first packet (the frame handed to the kernel)...
    wire: WireLatency,
    /// ...and to that call's return (on a veth, after the peer's stack took the frame).
    wire_returned: WireLatency,
    /// Passes made since the daemon last slept (see [`CONTROL_EVERY`]).
    turns: u32,
    /// Whether an empty pass polls again or sleeps.
    spin: Spin,
}

/// One pass in this many reads the clients' control sockets while the daemon spins, and
/// one in [`ACCEPT_EVERY`] accepts new clients; the first pass after a sleep does both.
const CONTROL_EVERY: u32 = 16;
const ACCEPT_EVERY: u32 = 256;

impl Server {
    /// A server for `engine` on a backend and a bound Unix listener.
    pub(crate) fn new(
        engine: Engine,
        net: Net,
        listener: UnixListener,
        settings: Settings,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let mut engine = engine;
        engine.sample_sends(WIRE_SAMPLE_EVERY);
        let cm = Cm::new(&mut engine, settings.addr, Instant::from_nanos(0))
            .map_err(|e| io::Error::other(format!("QP1: {e}")))?;
        let spin = Spin::new(settings.spin_limit);
        Ok(Self {
            engine,
            cm,
            epoch: std::time::Instant::now(),
            local: settings.addr,
            net,
            listener,
            clients: BTreeMap::new(),
            mr_bytes: BTreeMap::new(),
            next_client: 1,
            settings,
            stats: Stats::default(),
            wire: WireLatency::default(),
            wire_returned: WireLatency::default(),
            turns: 0,
            spin,
        })
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Runs until `stop` is set, then shuts down cleanly.
    pub(crate) fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if self.turn()? {
                self.spin.busy();
                continue;
            }
            if self.spin.again() {
                continue;
            }
            let asleep = std::time::Instant::now();
            self.sleep()?;
            self.spin.slept(asleep.elapsed());
            self.turns = 0;
        }
        self.shutdown();
        Ok(())
    }

    /// One pass over everything; true when anything happened. The control sockets are
    /// read every [`CONTROL_EVERY`]th pass only: each read is a system call that almost
    /// always finds nothing (an `accept` costs more than a whole pass), and requests there
    /// are not latency-bound. What the rings
    /// posted leaves before the pass receives, so a doorbell never waits for a receive.
    fn turn(&mut self) -> io::Result<bool> {
        let mut busy = false;
        if self.turns % ACCEPT_EVERY == 0 {
            busy |= self.accept();
        }
        if self.turns % CONTROL_EVERY == 0 {
            busy |= self.serve_clients();
        }
        self.turns = self.turns.wrapping_add(1);
        // One clock reading serves the pass: the engine's timers are milliseconds, a pass
        // microseconds.
        let now = self.now();
        busy |= self.pump_rings(now);
        busy |= self.send(now);
        busy |= self.net.receive(&mut self.engine, now);
        busy |= self.send(now);
        busy |= self.cm.turn(&mut self.engine, now);
        busy |= self.fill_cqs();
        Ok(busy)
    }

    /// Sends what the engine has; times the sampled work requests whose first packet
    /// goes, to the send call and to its return.
    fn send(&mut self, now: Instant) -> bool {
        if !self.net.build(&mut self.engine, now) {
            return false;
        }
        let handed = self.now();
        self.net.flush();
        let returned = self.now();
        for posted in self.engine.take_send_samples() {
            self.wire.record(handed.since(posted).as_nanos() as u64);
            self.wire_returned
                .record(returned.since(posted).as_nanos() as u64);
        }
        true
    }

    fn accept(&mut self) -> bool {
        let mut busy = false;
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    busy = true;
                    let id = self.next_client;
                    self.next_client += 1;
                    match Client::new(s) {
                        Ok(c) => {
                            tracing::info!(client = id, "client connected");
                            self.clients.insert(id, c);
                        }
                        Err(e) => tracing::warn!("cannot set up a client: {e}"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return busy,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    return busy;
                }
            }
        }
    }

    fn serve_clients(&mut self) -> bool {
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        let mut busy = false;
        for id in ids {
            let Some(c) = self.clients.get_mut(&id) else {
                continue;
            };
            let result = c.read_frames().and_then(|frames| {
                busy |= !frames.is_empty();
                for f in frames {
                    self.answer(id, f)?;
                }
                Ok(())
            });
            if let Err(gone) = result {
                if matches!(gone, Gone::Frame(_)) {
                    self.stats.bad_frames += 1;
                }
                self.disconnect(id, &gone);
                busy = true;
            }
        }
        busy
    }

    fn answer(&mut self, id: u64, f: Frame) -> Result<(), Gone> {
        let k = f.header.kind;
        let want = Request::fds(k);
        let c = self.clients.get_mut(&id).ok_or(Gone::Closed)?;
        let fds: Vec<OwnedFd> = (0..want).filter_map(|_| c.fds.pop_front()).collect();
        let reply = if k & kind::RESPONSE != 0 {
            // A response kind sent as a request: a malformed frame.
            return Err(Gone::Io(io::Error::other("response kind in a request")));
        } else if fds.len() != want {
            Reply::err(libc::EINVAL, format!("message kind {k} needs {want} fds"))
        } else {
            match Request::decode(k, &f.body) {
                Err(e) => Reply::err(libc::EINVAL, e.to_string()),
                Ok(req) => self.handle(id, req, fds),
            }
        };
        let c = self.clients.get_mut(&id).ok_or(Gone::Closed)?;
        if !c.fds.is_empty() && c.fds.len() > 4 {
            c.fds.clear();
        }
        if let Response::Error { errno, detail } = &reply.resp {
            c.errors += 1;
            self.stats.request_errors += 1;
            self.stats.over_limit += u64::from(*errno == libc::EDQUOT as u32);
            tracing::debug!(client = id, kind = k, errno, "request refused: {detail}");
        }
        let resp_kind = reply.resp.kind();
        debug_assert!(
            resp_kind == kind::ERROR || response_fds(resp_kind) == reply.fds.len(),
            "response {resp_kind:#x} with {} fds",
            reply.fds.len()
        );
        let frame =
            encode_frame(resp_kind, f.header.seq, &reply.resp.encode()).map_err(Gone::Frame)?;
        c.send(&frame, &reply.fds)
    }

    /// Answers one request of client `id`: `Hello` first, then one handler per resource
    /// (`pd_mr`, `cq`, `qp`), the CM's (`cm.rs`) and the device's.
    fn handle(&mut self, id: u64, req: Request, fds: Vec<OwnedFd>) -> Reply {
        let Some(c) = self.clients.get_mut(&id) else {
            return Reply::err(libc::ENOENT, "no such client");
        };
        if !c.hello {
            return hello(c, req);
        }
        let engine = &mut self.engine;
        let limits = &self.settings.limits;
        match req {
            Request::Hello { .. } => Reply::err(libc::EINVAL, "Hello was already answered"),
            Request::Stat { qpn, cursor } => self.stat(qpn, cursor),
            req @ (Request::CmListen { .. }
            | Request::CmUnlisten { .. }
            | Request::CmConnect { .. }
            | Request::CmAccept { .. }
            | Request::CmReject { .. }
            | Request::CmDisconnect { .. }
            | Request::CmPoll) => {
                let now = Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64);
                Reply::ok(self.cm.request(id, &c.qps, engine, now, req))
            }
            Request::QueryDevice => Reply::ok(Response::QueryDevice(self.device_attr())),
            Request::AllocPd => pd_mr::alloc_pd(engine, limits, c),
            Request::DeallocPd { pd } => pd_mr::dealloc_pd(engine, c, pd),
            Request::RegMrShared {
                pd,
                iova,
                offset,
                len,
                access,
            } => {
                let mr = NewMr {
                    pd,
                    iova,
                    len,
                    access,
                };
                self.reg_mr_shared(id, mr, offset, fds)
            }
            Request::RegMrProcess {
                pd,
                addr,
                len,
                access,
            } => {
                let mr = NewMr {
                    pd,
                    iova: addr,
                    len,
                    access,
                };
                self.reg_mr_process(id, mr)
            }
            Request::DeregMr { lkey } => self.dereg_mr(id, lkey),
            Request::CreateCompChannel => cq::create_channel(c),
            Request::CreateCq { cqe, channel } => cq::create(engine, limits, c, cqe, channel),
            Request::DestroyCq { cq } => cq::destroy(engine, c, cq),
            Request::ResizeCq { cq, cqe } => cq::resize(engine, c, cq, cqe),
            Request::CreateQp {
                pd,
                qp_type,
                send_cq,
                recv_cq,
                cap,
            } => {
                let q = NewQp {
                    pd,
                    qp_type,
                    send_cq,
                    recv_cq,
                    cap,
                };
                qp::create(engine, limits, c, id, q)
            }
            Request::ModifyQp { qpn, mask, attr } => qp::modify(engine, c, qpn, &attr, mask),
            Request::QueryQp { qpn } => qp::query(engine, c, qpn),
            Request::DestroyQp { qpn } => qp::destroy(engine, c, qpn),
        }
    }

    /// The device's attributes (`QueryDevice`); its GID is its address.
    fn device_attr(&self) -> DeviceAttr {
        let gid = match self.local {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        let config = self.engine.config();
        DeviceAttr {
            max_qp: config.max_qp as u32,
            max_qp_wr: pump::MAX_WR,
            max_sge: pump::MAX_SGE,
            max_cq: 1 << 16,
            max_cqe: config.max_cqe as u32,
            max_mr: 1 << 20,
            max_pd: 1 << 16,
            max_qp_rd_atom: 16,
            max_inline: pump::MAX_INLINE,
            gid,
            mtu: config.port_mtu as u8,
            port_state: 4,
        }
    }

    /// `Stat`: the device's counter groups and a page of QPs (every client's: the socket's
    /// permissions decide who may see them, as for every other request).
    fn stat(&self, qpn: u32, cursor: u32) -> Reply {
        let mut body = StatBody {
            groups: self.stat_groups(),
            ..StatBody::default()
        };
        let owner_pid = |qpn: u32| {
            let owner = self.clients.values().find(|c| c.qps.contains_key(&qpn));
            owner.and_then(|c| c.pid).map_or(0, |p| p as u64)
        };
        let qp_stat = |qpn: u32| {
            self.engine.qp_status(qpn).ok().map(|s| QpStat {
                qpn,
                qp_type: s.qp_type,
                state: s.state,
                counters: [
                    ("sq_psn", u64::from(s.sq_psn)),
                    ("unacked_psn", u64::from(s.unacked_psn)),
                    ("rq_psn", u64::from(s.rq_psn)),
                    ("msn", u64::from(s.msn)),
                    ("sq_wqes", s.sq_wqes as u64),
                    ("rq_wqes", s.rq_wqes as u64),
                    ("retry_left", u64::from(s.retry_left)),
                    ("rnr_retry_left", u64::from(s.rnr_retry_left)),
                    // Whose QP it is (0: the daemon's own, or a pid the kernel did not give).
                    ("client_pid", owner_pid(qpn)),
                ]
                .into_iter()
                // Its retransmissions, RNR and sequence NAKs, duplicates (rxe's names).
                .chain(s.counters.iter())
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
            })
        };
        if qpn != 0 {
            match qp_stat(qpn) {
                Some(q) => body.qps.push(q),
                None => return Reply::err(libc::ENOENT, format!("no QP {qpn:#x}")),
            }
            return Reply::ok(Response::Stat(body));
        }
        let mut qpns: Vec<u32> = self.engine.qpns().filter(|&q| q >= cursor).collect();
        qpns.sort_unstable();
        let mut len = body.encoded_len();
        for q in qpns {
            let Some(s) = qp_stat(q) else { continue };
            len += s.encoded_len();
            if len > STAT_BUDGET || body.qps.len() == usize::from(u16::MAX) {
                body.next = q;
                break;
            }
            body.qps.push(s);
        }
        Reply::ok(Response::Stat(body))
    }

    /// The device-wide groups: the engine's counters (rxe's names), the daemon's own, the
    /// backend's, and the injected faults when `--inject` is on.
    fn stat_groups(&self) -> Vec<StatGroup> {
        let group = |name: &str, counters: &[(&str, u64)]| StatGroup {
            name: name.to_owned(),
            counters: counters.iter().map(|&(n, v)| (n.to_owned(), v)).collect(),
        };
        let engine: Vec<_> = self.engine.counters().iter().collect();
        let s = &self.stats;
        let (qps, mrs) = self.clients.values().fold((0, 0), |(q, m), c| {
            (q + c.qps.len() as u64, m + c.mrs.len() as u64)
        });
        let registered: u64 = self.mr_bytes.values().map(MrBytes::total).sum();
        let mut groups = vec![
            group("engine", &engine),
            group(
                "daemon",
                &[
                    ("clients", self.clients.len() as u64),
                    ("qps", qps),
                    ("mrs", mrs),
                    ("registered_bytes", registered),
                    ("request_errors", s.request_errors),
                    ("over_limit", s.over_limit),
                    ("bad_frames", s.bad_frames),
                    ("disconnects", s.disconnects),
                    ("bad_descriptors", s.pump.bad_descriptors),
                    ("broken_rings", s.pump.broken_rings),
                    ("refused_wrs", s.pump.refused),
                    ("doorbell_to_wire_samples", self.wire.samples()),
                    ("doorbell_to_wire_p50_ns", self.wire.quantile_ns(0.5)),
                    ("doorbell_to_wire_p99_ns", self.wire.quantile_ns(0.99)),
                    (
                        "doorbell_to_sent_p50_ns",
                        self.wire_returned.quantile_ns(0.5),
                    ),
                    (
                        "doorbell_to_sent_p99_ns",
                        self.wire_returned.quantile_ns(0.99),
                    ),
                ],
            ),
        ];
        let b = self.net.counters();
        groups.push(group(
            "backend",
            &[
                ("rx_packets", b.rx_packets),
                ("tx_packets", b.tx_packets),
                ("rx_batches", b.rx_batches),
                ("tx_batches", b.tx_batches),
                ("icrc_foreign_id", b.icrc_foreign_id),
                ("tx_dropped", b.tx_dropped),
                ("rx_ignored", b.rx_ignored),
            ],
        ));
        if let Some(c) = self.net.fault_counters() {
            groups.push(group(
                "inject",
                &[
                    ("lost", c.lost),
                    ("duplicated", c.duplicated),
                    ("reordered", c.reordered),
                    ("corrupted", c.corrupted),
                ],
            ));
        }
        groups
    }

    /// Releases everything a client owned: QPs to error and destroyed, MRs deregistered
    /// (their mappings dropped with the last reference), CQs and PDs freed.
    fn disconnect(&mut self, id: u64, why: &Gone) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        self.mr_bytes.remove(&id);
        let now = self.now();
        self.cm.forget(&mut self.engine, now, id);
        self.stats.disconnects += 1;
        tracing::info!(
            client = id,
            qps = c.qps.len(),
            mrs = c.mrs.len(),
            errors = c.errors,
            "client gone: {why}"
        );
        for &qpn in c.qps.keys() {
            pump::to_error(&mut self.engine, qpn);
            let _ = self.engine.destroy_qp(qpn);
        }
        for &lkey in &c.mrs {
            let _ = self.engine.dereg_mr(lkey);
        }
        for &cq in c.cqs.keys() {
            let _ = self.engine.destroy_cq(cq);
        }
        for &pd in &c.pds {
            let _ = self.engine.dealloc_pd(PdId::from_raw(pd));
        }
    }

    fn pump_rings(&mut self, now: Instant) -> bool {
        let mut busy = false;
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                busy |= qp.drain(&mut self.engine, now, &mut c.cqs, &mut self.stats.pump);
            }
        }
        busy
    }

    fn fill_cqs(&mut self) -> bool {
        let mut busy = false;
        for c in self.clients.values_mut() {
            for (&cq, p) in c.cqs.iter_mut() {
                busy |= p.fill(&mut self.engine, cq);
            }
        }
        busy
    }

    /// Arms every doorbell and sleeps in poll(2) until a datagram, a client, a doorbell or
    /// the next timer.
    fn sleep(&mut self) -> io::Result<()> {
        let mut ready = false;
        let mut stalled = false;
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                ready |= qp.arm();
                stalled |= qp.stalled();
            }
            for (&cq, p) in &c.cqs {
                stalled |= !p.pending.is_empty() || self.engine.cq_len(cq) > 0;
            }
        }
        if !ready {
            let now = self.now();
            let mut timeout = Duration::from_millis(100);
            if let Some(due) = self.net.next_due() {
                timeout = timeout.min(due.since(now));
            }
            if let Some(t) = self.engine.poll_timeout() {
                timeout = timeout.min(t.since(now));
            }
            if stalled {
                timeout = timeout.min(Duration::from_millis(1));
            }
            self.net.flush_tap();
            let net_fd = self.net.fd();
            let mut fds = vec![
                PollFd::new(&net_fd, PollFlags::IN),
                PollFd::new(&self.listener, PollFlags::IN),
            ];
            for c in self.clients.values() {
                fds.push(PollFd::new(c.sock(), PollFlags::IN));
                for qp in c.qps.values() {
                    fds.push(PollFd::new(&qp.doorbell, PollFlags::IN));
                }
            }
            let ts = Timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            match poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                qp.disarm();
            }
        }
        Ok(())
    }

    /// Every QP to error, the flush completions delivered to the CQ rings, the capture
    /// flushed; clients see their connection close when the server is dropped.
    fn shutdown(&mut self) {
        tracing::info!(clients = self.clients.len(), "shutting down");
        for c in self.clients.values() {
            for &qpn in c.qps.keys() {
                pump::to_error(&mut self.engine, qpn);
            }
        }
        for _ in 0..16 {
            let _ = self.turn();
        }
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            self.disconnect(id, &Gone::Closed);
        }
        self.net.flush_tap();
        let skipped = self.net.tap_skipped();
        if skipped > 0 {
            tracing::warn!(skipped, "datagrams not written to the capture");
        }
        // Every non-zero counter by its `rocex stat` name, group by group, on one line.
        let cm = self.cm.stats;
        let mut groups = self.stat_groups();
        groups.push(StatGroup {
            name: "cm".to_owned(),
            counters: [
                ("bad_mads", cm.bad_mads),
                ("unserved", cm.unserved),
                ("dropped_events", cm.dropped_events),
            ]
            .map(|(n, v)| (n.to_owned(), v))
            .into(),
        });
        let summary: Vec<String> = groups
            .iter()
            .map(|g| {
                let set: Vec<String> = g
                    .counters
                    .iter()
                    .filter(|(_, v)| *v != 0)
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                format!(
                    "{}: {}",
                    g.name,
                    if set.is_empty() {
                        "-".to_owned()
                    } else {
                        set.join(" ")
                    }
                )
            })
            .collect();
        tracing::info!("stopped; {}", summary.join("; "));
    }
}
