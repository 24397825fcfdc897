//! A safe verbs API with libibverbs semantics, over `rocexd`'s control socket and the
//! shared-memory rings of `docs/abi.md`.
//!
//! Control operations (open, query, PD, MR, CQ and QP create/modify/destroy) are requests
//! on the daemon's Unix socket. The data path is shared memory: [`Qp::post_send`] and
//! [`Qp::post_recv`] write descriptors into the QP's rings and publish them with one store
//! (the doorbell word), writing the doorbell eventfd only when the daemon sleeps;
//! [`Cq::poll`] reads completions from the CQ ring without a system call, and
//! [`Cq::wait`] arms the CQ (`ibv_req_notify_cq`) and blocks on the completion channel.
//!
//! Memory regions are allocated by the library ([`Pd::alloc_mr`]) in a sealed memfd that
//! the daemon maps, so RDMA moves bytes straight between the wire and the application's
//! pages. Because the daemon may write those pages at any time, the library gives no
//! `&mut [u8]` over them (that would be a data race in Rust's model): [`Mr::write`],
//! [`Mr::read`] and the `u64` helpers copy through atomic words. [`Pd::reg_mr_process`]
//! registers ordinary memory instead (a `Vec<u8>`, borrowed while registered), which the
//! daemon reaches with one system call per access: no shared pages, and slower.
//!
//! # Example
//!
//! ```no_run
//! use rocex_verbs::{Context, QpInitAttr};
//! use rocex_verbs::verbs::{Access, QpCap, QpType, RecvWr, Sge};
//!
//! let ctx = Context::open("/run/rocex/10.0.0.1.sock")?;
//! let pd = ctx.alloc_pd()?;
//! let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! let mut cq = ctx.create_cq(256, None)?;
//! let mut qp = pd.create_qp(&QpInitAttr {
//!     qp_type: QpType::Rc,
//!     send_cq: &cq,
//!     recv_cq: &cq,
//!     cap: QpCap::default(),
//! })?;
//! // ... modify the QP through INIT, RTR and RTS with the peer's QPN and PSN ...
//! qp.post_recv(&[RecvWr::new(1, [mr.sge(0, 4096)])])?;
//! let wc = cq.poll_wait(std::time::Duration::from_secs(1))?;
//! # Ok::<(), rocex_verbs::Error>(())
//! ```

use std::cell::Cell;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocex_shm::control::{
    DeviceAttr, HEADER_LEN, Request, Response, decode_header, encode_frame, kind, response_fds,
};
use rocex_shm::region::{recv_fds, send_fds};
use rocex_shm::{ABI_VERSION, PostError, ReadError, RegionHeader, Ring, RingSpec, SharedRegion};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// The verbs vocabulary (QP attributes, work requests, completions), re-exported.
pub mod verbs {
    pub use rocex_verbs_types::*;
}
pub use rocex_shm::control::DeviceAttr as DeviceAttributes;
pub use rocex_shm::control::{CmEvent, CmEventKind};
pub use rocex_shm::control::{QpStat, StatGroup, Stats};
pub use rocex_verbs_types::{Access, WorkCompletion as Wc};

mod cm;
mod cq;
mod mr;
mod qp;

pub use cq::{CompChannel, Cq};
pub use mr::{FdMr, Mr, ProcessMr, Registration};
pub use qp::{Qp, QpInitAttr};

/// Where rocexd puts its control sockets by default (`<addr>.sock`), unless
/// `$ROCEX_SOCKET_DIR` names another directory ([`socket_dir`]).
pub const SOCKET_DIR: &str = "/run/rocex";

/// The directory of the daemons' default sockets: `$ROCEX_SOCKET_DIR` when set, else
/// [`SOCKET_DIR`]. rocexd puts its socket there and clients look there, so one variable
/// moves both (a test's own directory, or a user's without root).
pub fn socket_dir() -> PathBuf {
    std::env::var_os("ROCEX_SOCKET_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(SOCKET_DIR), PathBuf::from)
}

/// The socket a client given no path uses: `$ROCEX_SOCKET` when set, else the one daemon
/// that answers in [`socket_dir`]. With none, or several, the error says where it looked
/// and what to do (start one; choose one with `--socket` or `$ROCEX_SOCKET`), listing the
/// daemons it found with their addresses.
pub fn default_socket() -> Result<PathBuf> {
    if let Some(s) = std::env::var_os("ROCEX_SOCKET").filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(s));
    }
    let mut live: Vec<(PathBuf, IpAddr)> = daemon_sockets()
        .into_iter()
        .filter_map(|p| Context::open(&p).ok().map(|c| (p, c.gid_addr())))
        .collect();
    match live.len() {
        1 => Ok(live.remove(0).0),
        0 => Err(Error::NoDaemon { dir: socket_dir() }),
        _ => Err(Error::SeveralDaemons {
            dir: socket_dir(),
            daemons: live,
        }),
    }
}

/// The sockets a program finds daemons on, one device each: `$ROCEX_SOCKET` alone when it
/// is set (as `rocex run --socket` sets it), else every `*.sock` in [`socket_dir`], sorted.
/// Whether a daemon answers on each is not checked.
pub fn daemon_sockets() -> Vec<PathBuf> {
    if let Some(s) = std::env::var_os("ROCEX_SOCKET").filter(|s| !s.is_empty()) {
        return vec![PathBuf::from(s)];
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(socket_dir())
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Why a verbs call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket or a mapping failed.
    Io(io::Error),
    /// The daemon refused the request (`errno` as in libibverbs: EINVAL, ENOENT, ...).
    Daemon {
        /// The errno value.
        errno: u32,
        /// The daemon's explanation.
        detail: String,
    },
    /// The daemon answered something this library cannot use.
    Protocol(String),
    /// A work request does not fit its ring slot.
    Post(PostError),
    /// The work queue is full (`ENOMEM` from `ibv_post_send`); poll the CQ and retry.
    QueueFull,
    /// A completion in the CQ ring is malformed.
    BadCompletion(ReadError),
    /// No completion arrived in time.
    Timeout,
    /// The daemon is gone (killed, crashed or stopped): the control connection closed.
    /// Every object of this context is lost; open a new [`Context`] once a daemon serves
    /// the socket again.
    DaemonGone,
    /// A per-client limit of the daemon was reached (`EDQUOT`).
    Limit {
        /// The limit's configuration key (`max_qps`, `max_cqs`, `max_mrs`,
        /// `max_mr_bytes`, `max_pds`).
        key: String,
        /// The daemon's explanation.
        detail: String,
    },
    /// No daemon could be reached at a control socket ([`Context::open`]).
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why: no such file (no daemon started there), refused (a stale file), ...
        source: io::Error,
    },
    /// No socket was given and no daemon answers in the socket directory.
    NoDaemon {
        /// The directory looked in ([`socket_dir`]).
        dir: PathBuf,
    },
    /// No socket was given and several daemons answer: the caller must choose.
    SeveralDaemons {
        /// The directory looked in ([`socket_dir`]).
        dir: PathBuf,
        /// Each daemon's socket and address, sorted by socket.
        daemons: Vec<(PathBuf, IpAddr)>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Daemon { errno, detail } => {
                write!(f, "rocexd refused the request (errno {errno}): {detail}")
            }
            Self::Protocol(why) => write!(f, "control-channel protocol error: {why}"),
            Self::Post(e) => write!(f, "{e}"),
            Self::QueueFull => f.write_str("the work queue is full"),
            Self::BadCompletion(e) => write!(f, "malformed completion: {e}"),
            Self::Timeout => f.write_str("no completion within the timeout"),
            Self::DaemonGone => f.write_str("rocexd is gone: the control connection closed"),
            Self::Limit { detail, .. } => write!(f, "rocexd per-client limit: {detail}"),
            Self::Connect { path, source } => match source.kind() {
                // No file, or a file no daemon listens on any more.
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => write!(
                    f,
                    "no rocexd at {} ({source}); start one with `rocexd --addr IP --socket \
                     {}`",
                    path.display(),
                    path.display()
                ),
                _ => write!(
                    f,
                    "cannot connect to rocexd at {}: {source}",
                    path.display()
                ),
            },
            Self::NoDaemon { dir } => write!(
                f,
                "no rocexd answers in {}: start one with `rocexd --addr IP` (it serves \
                 {}/IP.sock), or name a daemon's socket with --socket PATH or \
                 ROCEX_SOCKET=PATH",
                dir.display(),
                dir.display()
            ),
            Self::SeveralDaemons { dir, daemons } => {
                write!(
                    f,
                    "{} rocexd answer in {}; choose one with --socket PATH or \
                     ROCEX_SOCKET=PATH:",
                    daemons.len(),
                    dir.display()
                )?;
                for (path, addr) in daemons {
                    write!(f, "\n  {}  (address {addr})", path.display())?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// A socket error that means the daemon's end is closed.
fn gone_or_io(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::NotConnected
        | io::ErrorKind::UnexpectedEof => Error::DaemonGone,
        _ => Error::Io(e),
    }
}

/// `EDQUOT`: the per-client limits of `docs/abi.md` §6.3.
const EDQUOT: u32 = rustix::io::Errno::DQUOT.raw_os_error() as u32;

/// A refusal as its typed error: a limit's detail starts with the limit's key.
fn refusal(errno: u32, detail: String) -> Error {
    if errno == EDQUOT {
        let key = detail.split(':').next().unwrap_or_default().to_owned();
        return Error::Limit { key, detail };
    }
    Error::Daemon { errno, detail }
}

/// A result of a verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn proto(why: impl Into<String>) -> Error {
    Error::Protocol(why.into())
}

/// The control connection.
#[derive(Debug)]
struct Channel {
    sock: UnixStream,
    seq: Cell<u64>,
    /// The daemon closed the connection: every later call fails at once.
    gone: Cell<bool>,
}

impl Channel {
    /// One request, one response: sends the frame with `fds`, reads the answer and the
    /// descriptors its kind carries. A closed connection is [`Error::DaemonGone`], now and
    /// for every later call.
    fn call(&self, req: &Request, fds: &[OwnedFd]) -> Result<(Response, Vec<OwnedFd>)> {
        if self.gone.get() {
            return Err(Error::DaemonGone);
        }
        let r = self.exchange(req, fds);
        if matches!(r, Err(Error::DaemonGone)) {
            self.gone.set(true);
        }
        r
    }

    /// True when the daemon's end is closed (checked without blocking). The daemon never
    /// writes outside an answer, so a readable socket between calls means end of file.
    fn closed(&self) -> bool {
        if self.gone.get() {
            return true;
        }
        let mut fds = [PollFd::new(&self.sock, PollFlags::IN | PollFlags::RDHUP)];
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let hup = matches!(poll(&mut fds, Some(&ts)), Ok(1)) && !fds[0].revents().is_empty();
        self.gone.set(hup);
        hup
    }

    fn exchange(&self, req: &Request, fds: &[OwnedFd]) -> Result<(Response, Vec<OwnedFd>)> {
        let seq = self.seq.get().wrapping_add(1);
        self.seq.set(seq);
        let frame =
            encode_frame(req.kind(), seq, &req.encode()).map_err(|e| proto(e.to_string()))?;
        let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
        let n = send_fds(self.sock.as_fd(), &frame, &borrowed).map_err(gone_or_io)?;
        if n < frame.len() {
            write_all(&self.sock, &frame[n..]).map_err(gone_or_io)?;
        }
        let mut head = [0u8; HEADER_LEN];
        let mut got = 0;
        let mut fds = Vec::new();
        while got < HEADER_LEN {
            let (n, f) = recv_fds(self.sock.as_fd(), &mut head[got..], 4).map_err(gone_or_io)?;
            if n == 0 {
                return Err(Error::DaemonGone);
            }
            fds.extend(f);
            got += n;
        }
        let h = decode_header(&head).map_err(|e| proto(e.to_string()))?;
        let mut body = vec![0u8; h.body_len];
        let mut got = 0;
        while got < body.len() {
            let (n, f) = recv_fds(self.sock.as_fd(), &mut body[got..], 4).map_err(gone_or_io)?;
            if n == 0 {
                return Err(Error::DaemonGone);
            }
            fds.extend(f);
            got += n;
        }
        if h.seq != seq {
            return Err(proto(format!("response seq {} for request {seq}", h.seq)));
        }
        let resp = Response::decode(h.kind, &body).map_err(|e| proto(e.to_string()))?;
        if let Response::Error { errno, detail } = resp {
            return Err(refusal(errno, detail));
        }
        if h.kind != req.kind() | kind::RESPONSE {
            return Err(proto(format!(
                "response kind {:#x} to {:#x}",
                h.kind,
                req.kind()
            )));
        }
        if fds.len() != response_fds(h.kind) {
            return Err(proto(format!(
                "{} fds with response {:#x}",
                fds.len(),
                h.kind
            )));
        }
        Ok((resp, fds))
    }

    fn done(&self, req: &Request) -> Result<()> {
        self.call(req, &[]).map(drop)
    }
}

fn write_all(sock: &UnixStream, mut b: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut s = sock;
    while !b.is_empty() {
        let n = s.write(b)?;
        b = &b[n..];
    }
    Ok(())
}

/// An open device (`ibv_context`): a connection to one `rocexd`.
#[derive(Debug, Clone)]
pub struct Context {
    ch: Rc<Channel>,
    attr: DeviceAttr,
    next_iova: Rc<Cell<u64>>,
}

/// Port attributes (`ibv_port_attr` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// `enum ibv_port_state` (4 ACTIVE).
    pub state: u8,
    /// Active MTU (`enum ibv_mtu`).
    pub active_mtu: u8,
    /// Entries in the GID table (1).
    pub gid_tbl_len: u32,
}

impl Context {
    /// Connects to the daemon at `path` and checks the ABI version; a socket no daemon
    /// answers on is [`Error::Connect`], which names it.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let sock = UnixStream::connect(path).map_err(|source| Error::Connect {
            path: path.to_owned(),
            source,
        })?;
        let ch = Channel {
            sock,
            seq: Cell::new(0),
            gone: Cell::new(false),
        };
        match ch
            .call(
                &Request::Hello {
                    abi_version: ABI_VERSION,
                },
                &[],
            )?
            .0
        {
            Response::Hello { .. } => {}
            r => return Err(proto(format!("unexpected {r:?}"))),
        }
        let Response::QueryDevice(attr) = ch.call(&Request::QueryDevice, &[])?.0 else {
            return Err(proto("bad QueryDevice response"));
        };
        Ok(Self {
            ch: Rc::new(ch),
            attr,
            next_iova: Rc::new(Cell::new(1 << 40)),
        })
    }

    /// The control connection's socket, for event loops: it becomes readable between calls
    /// only when the daemon is gone.
    pub fn control_socket(&self) -> std::os::fd::BorrowedFd<'_> {
        self.ch.sock.as_fd()
    }

    /// True when the daemon is gone (checked without blocking: one `poll(2)`).
    pub fn is_gone(&self) -> bool {
        self.ch.closed()
    }

    /// Connects to [`default_socket`]: `$ROCEX_SOCKET`, else the only daemon running.
    pub fn open_default() -> Result<Self> {
        Self::open(default_socket()?)
    }

    /// Device attributes (`ibv_query_device`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        match self.ch.call(&Request::QueryDevice, &[])?.0 {
            Response::QueryDevice(a) => Ok(a),
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// The device's counters and every QP's (`rdma statistic`): the engine's counters under
    /// rxe's hw_counters names (group `engine`), the daemon's (`daemon`) and, when the
    /// daemon injects faults, what it injected (`inject`). QPs come in ascending QPN order.
    pub fn stats(&self) -> Result<Stats> {
        let mut all = self.stat_page(0, 0)?;
        let mut cursor = all.next;
        while cursor != 0 {
            let page = self.stat_page(0, cursor)?;
            if page.next != 0 && page.next <= cursor {
                return Err(proto("Stat cursor does not advance"));
            }
            cursor = page.next;
            all.qps.extend(page.qps);
        }
        all.next = 0;
        Ok(all)
    }

    /// The device's counters and one QP's (any client's).
    pub fn qp_stats(&self, qpn: u32) -> Result<Stats> {
        if qpn == 0 {
            return Err(proto("QPN 0 names no QP"));
        }
        self.stat_page(qpn, 0)
    }

    fn stat_page(&self, qpn: u32, cursor: u32) -> Result<Stats> {
        match self.ch.call(&Request::Stat { qpn, cursor }, &[])?.0 {
            Response::Stat(s) => Ok(s),
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// Port attributes (`ibv_query_port`); the device has one port, number 1.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(Error::Daemon {
                errno: 22,
                detail: "the device has one port, number 1".into(),
            });
        }
        let a = self.query_device()?;
        Ok(PortAttr {
            state: a.port_state,
            active_mtu: a.mtu,
            gid_tbl_len: 1,
        })
    }

    /// The GID at `index` of port 1 (`ibv_query_gid`): the device's IP address
    /// (IPv4-mapped for IPv4).
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16]> {
        if port != 1 || index != 0 {
            return Err(Error::Daemon {
                errno: 22,
                detail: "only GID 0 of port 1 exists".into(),
            });
        }
        Ok(self.attr.gid)
    }

    /// The device's IP address (its GID as an address: what a peer puts in `ah_attr`).
    pub fn gid_addr(&self) -> IpAddr {
        let v6 = std::net::Ipv6Addr::from(self.attr.gid);
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<Pd> {
        match self.ch.call(&Request::AllocPd, &[])?.0 {
            Response::AllocPd { pd } => Ok(Pd {
                ctx: self.clone(),
                pd,
                freed: Cell::new(false),
            }),
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }
}

/// Maps a ring memfd from the daemon and checks its header.
fn map_rings(fd: OwnedFd) -> Result<SharedRegion> {
    let map = SharedRegion::from_fd(fd)?;
    let mut b = [0u8; 128];
    map.view()
        .read(0, &mut b)
        .map_err(|e| proto(e.to_string()))?;
    let h = <RegionHeader as zerocopy_shim::FromBytes>::read_from_bytes(&b[..])
        .map_err(|_| proto("region header"))?;
    if !h.compatible() {
        return Err(proto("the ring region's header does not match this ABI"));
    }
    Ok(map)
}

/// zerocopy's trait, through rocex-shm's re-export of the header type.
mod zerocopy_shim {
    pub(crate) use zerocopy::FromBytes;
}

fn ring_in(map: &SharedRegion, off: usize, spec: RingSpec) -> Result<Ring<'_>> {
    let v = map
        .view()
        .sub(off, spec.stride())
        .map_err(|e| proto(e.to_string()))?;
    Ring::new(v, spec).map_err(|e| proto(e.to_string()))
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd {
    ctx: Context,
    pd: u32,
    /// Deallocated by [`Pd::dealloc`]: nothing left for `Drop`.
    freed: Cell<bool>,
}

impl Pd {
    /// Allocates a memory region of `len` bytes (zeroed, page-rounded) in a sealed memfd
    /// and registers it with `access`.
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<Mr> {
        let map = SharedRegion::create("rocex-mr", len)?;
        let iova = self.ctx.next_iova.get();
        self.ctx
            .next_iova
            .set(iova + (map.len() as u64).next_multiple_of(1 << 32));
        let reg = self.reg_shared(map.fd(), iova, 0, len, access)?;
        Ok(Mr::new(self.ctx.clone(), map, reg))
    }

    /// Registers `buf`, ordinary memory of this process (a `Vec`, an array), with
    /// `access`, without copying it into shared memory. The MR borrows `buf` until it is
    /// dropped, so the program cannot touch the bytes while the daemon may.
    ///
    /// The daemon moves the data with `process_vm_readv`/`process_vm_writev`, one system
    /// call per access: much slower than [`alloc_mr`](Self::alloc_mr), and only allowed
    /// when `rocexd` may ptrace this process (same uid with `kernel.yama.ptrace_scope` 0,
    /// or `CAP_SYS_PTRACE`); otherwise the daemon answers `EPERM` (`docs/abi.md` §6.2).
    /// RDMA atomics on such memory are not atomic with respect to this process's own
    /// accesses.
    pub fn reg_mr_process<'a>(&self, buf: &'a mut [u8], access: Access) -> Result<ProcessMr<'a>> {
        // SAFETY: the returned MR holds the exclusive borrow of `buf` for as long as the
        // daemon may access it (until `Drop` has deregistered it).
        unsafe { self.reg_mr_process_raw(buf.as_mut_ptr() as u64, buf.len(), access) }
    }

    /// Registers `len` bytes at `addr` of this process, like
    /// [`reg_mr_process`](Self::reg_mr_process) but tied to no borrow. If the memory is
    /// unmapped while registered, later accesses fail (remote access errors for a peer,
    /// protection errors for local work requests); the daemon is unaffected.
    ///
    /// # Safety
    ///
    /// Until the MR is dropped, the daemon may write the range at any time (as granted by
    /// `access`): the program must not hold references into it, nor let the allocator hand
    /// it out again, while the MR lives.
    pub unsafe fn reg_mr_process_raw(
        &self,
        addr: u64,
        len: usize,
        access: Access,
    ) -> Result<ProcessMr<'static>> {
        let (r, _) = self.ctx.ch.call(
            &Request::RegMrProcess {
                pd: self.pd,
                addr,
                len: len as u64,
                access: access.bits(),
            },
            &[],
        )?;
        let Response::RegMr { lkey, rkey, .. } = r else {
            return Err(proto("bad RegMr response"));
        };
        Ok(ProcessMr::new(
            self.ctx.clone(),
            Registration::new(addr, len, lkey, rkey),
        ))
    }

    /// Registers `len` bytes at byte `offset` of `memfd` (sealed against shrinking, mapped
    /// by this process where the program uses it) as the MR whose first byte work requests
    /// and peers name `iova`. The daemon maps the memfd: zero copy, as
    /// [`alloc_mr`](Self::alloc_mr), for memory the caller placed in a memfd itself.
    pub fn reg_mr_memfd(
        &self,
        memfd: std::os::fd::BorrowedFd<'_>,
        iova: u64,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<FdMr> {
        let reg = self.reg_shared(memfd, iova, offset, len, access)?;
        Ok(FdMr::new(self.ctx.clone(), reg))
    }

    /// Has the daemon map `len` bytes at byte `offset` of `memfd` (a duplicate is sent) as
    /// an MR starting at `iova`: what [`alloc_mr`](Self::alloc_mr) and
    /// [`reg_mr_memfd`](Self::reg_mr_memfd) share.
    fn reg_shared(
        &self,
        memfd: std::os::fd::BorrowedFd<'_>,
        iova: u64,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<Registration> {
        let fd = rustix::io::fcntl_dupfd_cloexec(memfd, 0).map_err(io::Error::from)?;
        let (r, _) = self.ctx.ch.call(
            &Request::RegMrShared {
                pd: self.pd,
                iova,
                offset,
                len: len as u64,
                access: access.bits(),
            },
            &[fd],
        )?;
        let Response::RegMr { lkey, rkey, .. } = r else {
            return Err(proto("bad RegMr response"));
        };
        Ok(Registration::new(iova, len, lkey, rkey))
    }
}

impl Pd {
    /// `ibv_dealloc_pd` with the daemon's answer: EBUSY while MRs or QPs use the PD, which
    /// then stays usable. After success the PD is gone; dropping it does nothing more.
    pub fn dealloc(&self) -> Result<()> {
        if !self.freed.get() {
            self.ctx.ch.done(&Request::DeallocPd { pd: self.pd })?;
            self.freed.set(true);
        }
        Ok(())
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        if !self.freed.get() {
            let _ = self.ctx.ch.done(&Request::DeallocPd { pd: self.pd });
        }
    }
}
