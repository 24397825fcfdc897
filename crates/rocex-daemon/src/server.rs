//! The daemon: one thread owns everything (the engine on its backend, the Unix listener
//! and every client) and runs the loop of `event_loop.rs`. Here: accepting clients and
//! answering their control requests, one handler module per resource (`pd_mr`, `cq`,
//! `qp`), the CM's (`cm.rs`), and what the daemon reports of itself (`stat`).

use std::collections::BTreeMap;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixListener;

use rocex_io::Driver;
use rocex_mem::MemError;
use rocex_proto::{Instant, PdId, QpInit, VerbsError};
use rocex_shm::ABI_VERSION;
use rocex_shm::control::{Request, Response, encode_frame, kind, response_fds};

use crate::client::{Client, Frame, Gone};
use crate::cm::{ClientQps, Cm};
use crate::config::Settings;
use crate::limits::{MrBytes, OverLimit};
use crate::net::Watch;
use crate::pump::{self, PumpStats};
use crate::spin::Spin;
use crate::wire_latency::WIRE_SAMPLE_EVERY;

mod cq;
mod direct;
mod event_loop;
mod mw;
mod pd_mr;
mod qp;
mod stat;

pub(crate) use direct::Direct;
use pd_mr::NewMr;

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
    /// `OpenDirect`s refused for want of direct slots (the slots' own refusals are
    /// [`Direct::refused`]).
    pub(crate) direct_refused: u64,
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
    /// `Done(kind)` once the engine did it, else the engine's refusal.
    fn done(kind: u16, r: Result<(), VerbsError>) -> Self {
        match r {
            Ok(()) => Self::ok(Response::Done(kind)),
            Err(e) => verbs_error(e),
        }
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
    /// The engine on its backend: `driver.engine` takes the verbs calls.
    driver: Driver,
    /// What the daemon records of the driver's packets (capture, send timings).
    watch: Watch,
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
    /// Passes made since the daemon last slept (`event_loop.rs`).
    turns: u32,
    /// Whether an empty pass polls again or sleeps.
    spin: Spin,
    /// The direct data path's slots (none with `--no-direct`).
    direct: Option<Direct>,
}

impl Server {
    /// A server for the engine on `driver`, recording into `watch`, a bound Unix listener,
    /// and the direct slots when it offers them.
    pub(crate) fn new(
        mut driver: Driver,
        watch: Watch,
        listener: UnixListener,
        settings: Settings,
        direct: Option<Direct>,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        driver.engine.sample_sends(WIRE_SAMPLE_EVERY);
        let now = driver.now();
        let cm = Cm::new(&mut driver.engine, settings.addr, now)
            .map_err(|e| io::Error::other(format!("QP1: {e}")))?;
        let spin = Spin::new(settings.spin_limit);
        Ok(Self {
            driver,
            watch,
            cm,
            local: settings.addr,
            listener,
            clients: BTreeMap::new(),
            mr_bytes: BTreeMap::new(),
            next_client: 1,
            settings,
            stats: Stats::default(),
            turns: 0,
            spin,
            direct,
        })
    }

    fn now(&self) -> Instant {
        self.driver.now()
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
        // A refused OpenDirect is an answer, not a bad request: every client of a daemon
        // without direct slots asks, and `direct_refused` counts it.
        if let Response::Error { errno, detail } = &reply.resp
            && k != kind::OPEN_DIRECT
        {
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
        // Read before the engine is borrowed; a request takes microseconds.
        let now = self.driver.now();
        let engine = &mut self.driver.engine;
        let limits = &self.settings.limits;
        match req {
            Request::Hello { .. } => Reply::err(libc::EINVAL, "Hello was already answered"),
            Request::Stat { qpn, cursor } => self.stat(qpn, cursor),
            Request::OpenDirect => match &mut self.direct {
                Some(d) => d.open(id),
                None => {
                    self.stats.direct_refused += 1;
                    Reply::err(
                        libc::EOPNOTSUPP,
                        "direct data path: rocexd offers no direct slots (--no-direct, or \
                         settings it cannot serve: rocexd's log says which)",
                    )
                }
            },
            req @ (Request::CmListen { .. }
            | Request::CmUnlisten { .. }
            | Request::CmConnect { .. }
            | Request::CmAccept { .. }
            | Request::CmReject { .. }
            | Request::CmDisconnect { .. }
            | Request::CmEstablish { .. }
            | Request::CmPoll) => {
                let qps = match self.direct.as_ref().and_then(|d| d.slot(id)) {
                    Some((slot, group)) => ClientQps::Direct { slot, group },
                    None => ClientQps::Daemon(&c.qps),
                };
                Reply::ok(self.cm.request(id, qps, engine, now, req))
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
            Request::AllocMw { pd, type1 } => mw::alloc(engine, c, pd, type1),
            Request::DeallocMw { rkey } => mw::dealloc(engine, c, rkey),
            Request::BindMw(b) => mw::bind(engine, c, b),
            Request::LocalInv { qpn, rkey } => mw::local_inv(engine, c, qpn, rkey),
            Request::CreateQp {
                pd,
                qp_type,
                send_cq,
                recv_cq,
                cap,
            } => {
                let q = QpInit {
                    pd: PdId::from_raw(pd),
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

    /// Releases everything a client owned: QPs to error and destroyed, MRs deregistered
    /// (their mappings dropped with the last reference), CQs and PDs freed.
    fn disconnect(&mut self, id: u64, why: &Gone) {
        let Some(c) = self.clients.remove(&id) else {
            return;
        };
        self.mr_bytes.remove(&id);
        if let Some(d) = &mut self.direct {
            d.close(id);
        }
        let now = self.now();
        self.cm.forget(&mut self.driver.engine, now, id);
        self.stats.disconnects += 1;
        tracing::info!(
            client = id,
            qps = c.qps.len(),
            mrs = c.mrs.len(),
            errors = c.errors,
            "client gone: {why}"
        );
        for &qpn in c.qps.keys() {
            pump::to_error(&mut self.driver.engine, qpn);
            let _ = self.driver.engine.destroy_qp(qpn);
        }
        for &rkey in &c.mws {
            let _ = self.driver.engine.dealloc_mw(rkey);
        }
        for &lkey in &c.mrs {
            let _ = self.driver.engine.dereg_mr(lkey);
        }
        for &cq in c.cqs.keys() {
            let _ = self.driver.engine.destroy_cq(cq);
        }
        for &pd in &c.pds {
            let _ = self.driver.engine.dealloc_pd(PdId::from_raw(pd));
        }
    }
}
