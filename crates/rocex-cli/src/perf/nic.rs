//! The handful of verbs `rocex perf` runs on, so that the same tests drive an in-process
//! engine (`local`) or a `rocexd` through rocex-verbs (`daemon`).
//!
//! Handles are indices in creation order: the `i`-th [`Nic::reg_mr`] is MR `i`, the `i`-th
//! [`Nic::create_qp`] QP `i`. Each QP sends and receives on the CQ made last before it.

use std::io;
use std::time::Duration;

use rocex_proto::Counters;
use rocex_proto::verbs::{AttrMask, Mtu, QpAttr, QpCap, RecvWr, SendWr, WorkCompletion};

/// A registered region: where it starts as SGEs and peers name it, and its keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MrKeys {
    pub(crate) addr: u64,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// An RDMA device as perf uses it.
pub(crate) trait Nic {
    /// The port's RoCE v2 GID (its IP address).
    fn gid(&self) -> [u8; 16];
    /// The largest path MTU the port takes.
    fn port_mtu(&self) -> Mtu;
    /// A random initial PSN (24 bits).
    fn random_psn(&mut self) -> u32;
    /// Registers `len` zeroed bytes for local write and remote write, read and atomics.
    fn reg_mr(&mut self, len: u64) -> io::Result<MrKeys>;
    /// Copies bytes of MR `mr` at `offset` into `buf`.
    fn read(&self, mr: usize, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Copies `data` into MR `mr` at `offset`.
    fn write(&self, mr: usize, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Creates a CQ that the QPs created after it use (one per group of QPs that fits the
    /// device's CQ depth).
    fn create_cq(&mut self, cqe: u32) -> io::Result<()>;
    /// Creates an RC QP in RESET; returns its QPN.
    fn create_qp(&mut self, cap: QpCap) -> io::Result<u32>;
    /// `ibv_modify_qp` of QP `qp`.
    fn modify_qp(&mut self, qp: usize, attr: &QpAttr, mask: AttrMask) -> io::Result<()>;
    /// `ibv_post_send` of one request on QP `qp`.
    fn post_send(&mut self, qp: usize, wr: SendWr) -> io::Result<()>;
    /// `ibv_post_recv` of one request on QP `qp`.
    fn post_recv(&mut self, qp: usize, wr: RecvWr) -> io::Result<()>;
    /// The next completion of the CQ, if there is one.
    fn poll_cq(&mut self) -> io::Result<Option<WorkCompletion>>;
    /// Lets the device do what is ready (receive, run timers, send) without waiting.
    fn turn(&mut self) -> io::Result<()>;
    /// Waits up to `max` for something to happen (at once when busy-polling).
    fn wait(&mut self, max: Duration) -> io::Result<()>;
    /// How long a bandwidth client with nothing to do waits ([`Nic::wait`]) before it
    /// looks at its completions again.
    fn idle_wait(&self) -> Duration;
    /// Keeps answering the peer for `d` before the process exits, so that its last
    /// requests are acknowledged.
    fn linger(&mut self, d: Duration) -> io::Result<()>;
    /// The engine's counters, where the engine is in this process.
    fn counters(&self) -> Option<Counters>;
    /// Packets the engine has retransmitted (the whole device's, for a daemon), for the
    /// progress line.
    fn retransmitted(&self) -> Option<u64> {
        self.counters().map(|c| c.retransmitted_pkts)
    }
    /// What fault injection in this process did (`--inject`), if it is on.
    fn fault_counters(&self) -> Option<rocex_io::FaultCounters> {
        None
    }
    /// Datagrams the kernel dropped at this process's socket (an engine in this process).
    fn kernel_dropped(&self) -> Option<u64> {
        None
    }
}
