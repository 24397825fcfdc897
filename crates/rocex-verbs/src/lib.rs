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
//! In direct mode ([`Context::in_process`], or a daemon that grants a QPN slot) the engine
//! runs in this process instead: the same objects and calls, each one call into the
//! engine, a post sending at once in the caller's thread, a poll running the engine before
//! it takes completions, and a progress thread that answers the peer when the application
//! calls nothing (`docs/verbs.md`, "Direct mode").
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
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rocex_shm::control::{DeviceAttr, Request, Response};
use rocex_shm::{ABI_VERSION, RegionHeader, Ring, RingSpec, SharedRegion};

/// The verbs vocabulary (QP attributes, work requests, completions), re-exported.
pub mod verbs {
    pub use rocex_verbs_types::*;
}
pub use rocex_shm::control::DeviceAttr as DeviceAttributes;
pub use rocex_shm::control::{CmConn, CmEvent, CmEventKind};
pub use rocex_shm::control::{QpStat, StatGroup, Stats};
pub use rocex_verbs_types::{Access, WorkCompletion as Wc};

mod answer;
mod channel;
mod cm;
mod cq;
mod direct;
mod error;
mod mr;
mod mw;
mod patience;
mod pd;
mod qp;

use channel::Channel;
pub(crate) use error::proto;
pub use error::{Error, Result};
pub use pd::Pd;

pub use answer::{AnswerWait, Lingered};
pub use cq::{CompChannel, Cq};
pub use mr::{FdMr, Mr, ProcessMr, Registration};
pub use mw::MwBind;
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
        .filter_map(|p| {
            Context::open_daemon_path(&p)
                .ok()
                .map(|c| (p, c.gid_addr()))
        })
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

/// An open device (`ibv_context`): a connection to one `rocexd`, and in direct mode the
/// engine in this process that carries its data path (`docs/verbs.md`, "Direct mode").
#[derive(Debug, Clone)]
pub struct Context {
    pub(crate) dev: Dev,
    pub(crate) attr: DeviceAttr,
    pub(crate) next_iova: Rc<Cell<u64>>,
}

/// Where a context's verbs go: every object of a context lives in one of the two.
#[derive(Debug, Clone)]
pub(crate) enum Dev {
    /// Requests to rocexd, whose engine runs the QPs (descriptors through shared rings).
    Daemon(Rc<Channel>),
    /// The engine in this process ([`direct`]).
    Direct(Rc<direct::Host>),
}

impl Dev {
    /// What a waiter watches to learn that the daemon is gone (readable then).
    pub(crate) fn liveness_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Self::Daemon(ch) => ch.sock.as_fd(),
            Self::Direct(h) => h.liveness_fd(),
        }
    }

    /// True when the daemon is gone (checked without blocking).
    pub(crate) fn closed(&self) -> bool {
        match self {
            Self::Daemon(ch) => ch.closed(),
            Self::Direct(h) => h.daemon_gone(),
        }
    }

    /// Records that a waiter saw the daemon hang up.
    pub(crate) fn set_gone(&self) {
        match self {
            Self::Daemon(ch) => ch.gone.set(true),
            Self::Direct(h) => h.set_gone(),
        }
    }
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
    /// answers on is [`Error::Connect`], which names it. Unless `ROCEX_DIRECT=0`, it then
    /// asks for a QPN slot: granted, the context is direct (the engine runs in this
    /// process, `docs/verbs.md`, "Direct mode"); refused, every verb goes to the daemon.
    /// [`open_daemon_path`](Self::open_daemon_path) never asks.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), direct::grant::wanted())
    }

    /// [`open`](Self::open) without asking for a slot: every verb goes to the daemon, as
    /// rdma_cm needs (the daemon's CM moves the QPs in its own engine).
    pub fn open_daemon_path(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), false)
    }

    fn open_with(path: &Path, direct: bool) -> Result<Self> {
        let sock = UnixStream::connect(path).map_err(|source| Error::Connect {
            path: path.to_owned(),
            source,
        })?;
        let ch = Channel {
            sock,
            seq: Cell::new(0),
            gone: Cell::new(false),
            answers: Default::default(),
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
        if direct {
            match direct::grant::ask(&ch) {
                Ok(Some((grant, sock, board))) => {
                    return Self::granted(ch, attr, grant, sock, board);
                }
                Ok(None) => {}
                // A daemon older than the request closes the connection that sends it
                // (docs/abi.md §6.4): a new one, which does not ask, is the daemon path.
                Err(Error::DaemonGone) => return Self::open_with(path, false),
                Err(e) => return Err(e),
            }
        }
        Ok(Self {
            dev: Dev::Daemon(Rc::new(ch)),
            attr,
            next_iova: Rc::new(Cell::new(1 << 40)),
        })
    }

    /// The control connection's socket, for event loops: it becomes readable between calls
    /// only when the daemon is gone. A direct context with no daemon has a descriptor
    /// that never becomes readable.
    pub fn control_socket(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dev.liveness_fd()
    }

    /// True when the daemon is gone (checked without blocking: one `poll(2)`).
    pub fn is_gone(&self) -> bool {
        self.dev.closed()
    }

    /// True when the engine runs in this process (direct mode).
    pub fn is_direct(&self) -> bool {
        matches!(self.dev, Dev::Direct(_))
    }

    /// For a program that drives its own waits by spinning (on its memory, or on this and
    /// CQ polls): on a direct context, one step of the engine in the caller's thread when
    /// no other thread holds it, counted as an empty CQ poll, so that the caller takes the
    /// packets and the progress thread stands aside. A step sends what waits, then
    /// receives; the ACKs that calls for leave with the caller's next post or step, so call
    /// it again soon, as a busy-polling program does (`docs/verbs.md`, "Direct mode").
    /// Through rocexd it does nothing: the daemon drives the engine.
    pub fn progress(&self) -> Result<()> {
        match &self.dev {
            Dev::Daemon(_) => Ok(()),
            Dev::Direct(h) => h.progress(),
        }
    }

    /// Connects to [`default_socket`]: `$ROCEX_SOCKET`, else the only daemon running.
    pub fn open_default() -> Result<Self> {
        Self::open(default_socket()?)
    }

    /// Device attributes (`ibv_query_device`).
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let ch = match &self.dev {
            Dev::Daemon(ch) => ch,
            Dev::Direct(h) if h.daemon_gone() => return Err(Error::DaemonGone),
            Dev::Direct(_) => return Ok(self.attr),
        };
        match ch.call(&Request::QueryDevice, &[])?.0 {
            Response::QueryDevice(a) => Ok(a),
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// The device's counters and every QP's (`rdma statistic`): the engine's counters under
    /// rxe's hw_counters names (group `engine`), the daemon's (`daemon`) and, when the
    /// daemon injects faults, what it injected (`inject`). QPs come in ascending QPN order.
    pub fn stats(&self) -> Result<Stats> {
        let ch = match &self.dev {
            Dev::Direct(h) => return h.stats(None),
            Dev::Daemon(ch) => ch,
        };
        let mut all = stat_page(ch, 0, 0)?;
        let mut cursor = all.next;
        while cursor != 0 {
            let page = stat_page(ch, 0, cursor)?;
            if page.next != 0 && page.next <= cursor {
                return Err(proto("Stat cursor does not advance"));
            }
            cursor = page.next;
            all.qps.extend(page.qps);
        }
        all.next = 0;
        Ok(all)
    }

    /// This process's lingering on rocexd's rings (`linger_answered`, `linger_in_vain`,
    /// `linger_skipped`; `docs/verbs.md`, "Lingering on the daemon path"), which the
    /// daemon's [`stats`](Self::stats) cannot see. A direct context counts its own
    /// lingers in `stats`' group `direct`: empty.
    pub fn ring_lingers(&self) -> Vec<(&'static str, u64)> {
        match &self.dev {
            Dev::Daemon(ch) => ch.answers.borrow().counters().to_vec(),
            Dev::Direct(_) => Vec::new(),
        }
    }

    /// The device's counters and one QP's (any client's).
    pub fn qp_stats(&self, qpn: u32) -> Result<Stats> {
        if qpn == 0 {
            return Err(proto("QPN 0 names no QP"));
        }
        match &self.dev {
            Dev::Daemon(ch) => stat_page(ch, qpn, 0),
            Dev::Direct(h) => h.stats(Some(qpn)),
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
        let pd = match &self.dev {
            Dev::Daemon(ch) => match ch.call(&Request::AllocPd, &[])?.0 {
                Response::AllocPd { pd } => pd,
                r => return Err(proto(format!("unexpected {r:?}"))),
            },
            Dev::Direct(h) => h.alloc_pd()?,
        };
        Ok(Pd {
            ctx: self.clone(),
            pd,
            freed: Cell::new(false),
        })
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

/// One page of rocexd's `Stat` answer: the device's counters and QPs from `cursor` on, or
/// only `qpn`'s.
fn stat_page(ch: &Channel, qpn: u32, cursor: u32) -> Result<Stats> {
    match ch.call(&Request::Stat { qpn, cursor }, &[])?.0 {
        Response::Stat(s) => Ok(s),
        r => Err(proto(format!("unexpected {r:?}"))),
    }
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
