//! [`Nic`] on a `rocexd` through rocex-verbs: the daemon owns the RoCE port and moves the
//! data; this process only posts to and polls the shared rings.

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use rocex_proto::Counters;
use rocex_proto::verbs::{AttrMask, Mtu, QpAttr, QpCap, QpType, RecvWr, SendWr, WorkCompletion};
use rocex_verbs::{Access, CompChannel, Context, Cq, Mr, Pd, Qp, QpInitAttr};

use super::nic::{MrKeys, Nic};

/// How long a post waits for ring room the daemon has not yet freed.
const RING_WAIT: Duration = Duration::from_secs(10);

/// Completions taken from the CQ ring at a time.
const POLL_BATCH: usize = 64;

/// The objects of one run, dropped QPs first so that the daemon frees them in order.
pub(crate) struct DaemonNic {
    qps: Vec<Qp>,
    mrs: Vec<Mr>,
    /// The CQs in creation order: each QP uses the last made before it. They share one
    /// completion channel, so that a wait wakes for any of them.
    cqs: Vec<Cq>,
    channel: Option<CompChannel>,
    /// The CQ the next poll starts at, so that none is left behind.
    next_cq: usize,
    pd: Pd,
    ctx: Context,
    ready: VecDeque<WorkCompletion>,
    busy_poll: bool,
}

fn daemon_err(e: rocex_verbs::Error) -> io::Error {
    io::Error::other(format!("rocexd: {e}"))
}

impl DaemonNic {
    /// Opens the device the daemon at `socket` serves; `busy_poll` makes waits spin
    /// instead of sleeping on the completion channel (latency tests). A direct context
    /// always spins, as perftest polls its CQ: its engine turns in the thread that waits,
    /// and sleeping on the channel handed every packet to the progress thread and every
    /// completion back through an eventfd (64 B SEND at 0.21 M msg/s against 0.74 in the
    /// same run with the engine in the perf process; `docs/architecture.md`, "The direct
    /// data path").
    pub(crate) fn open(socket: &Path, busy_poll: bool) -> io::Result<Self> {
        let ctx = Context::open(socket)
            .map_err(|e| io::Error::other(format!("rocexd at {}: {e}", socket.display())))?;
        let busy_poll = busy_poll || ctx.is_direct();
        let pd = ctx.alloc_pd().map_err(daemon_err)?;
        Ok(Self {
            qps: Vec::new(),
            mrs: Vec::new(),
            cqs: Vec::new(),
            channel: None,
            next_cq: 0,
            pd,
            ctx,
            ready: VecDeque::new(),
            busy_poll,
        })
    }

    fn qp(&mut self, qp: usize) -> io::Result<&mut Qp> {
        self.qps
            .get_mut(qp)
            .ok_or_else(|| io::Error::other(format!("no QP {qp}")))
    }

    fn mr(&self, mr: usize) -> io::Result<&Mr> {
        self.mrs
            .get(mr)
            .ok_or_else(|| io::Error::other(format!("no MR {mr}")))
    }
}

/// Posts with `post`, retrying while the ring is full: a slot is free again once the
/// daemon has read it, which can trail the completion that let the caller post.
fn post_with_room(mut post: impl FnMut() -> rocex_verbs::Result<()>) -> io::Result<()> {
    let end = Instant::now() + RING_WAIT;
    loop {
        match post() {
            Err(rocex_verbs::Error::QueueFull) if Instant::now() < end => {
                std::thread::yield_now();
            }
            r => return r.map_err(daemon_err),
        }
    }
}

impl Nic for DaemonNic {
    fn gid(&self) -> [u8; 16] {
        crate::oob::gid_of(self.ctx.gid_addr())
    }

    fn port_mtu(&self) -> Mtu {
        self.ctx
            .query_port(1)
            .ok()
            .and_then(|p| Mtu::from_ibv(p.active_mtu))
            .unwrap_or(Mtu::M1024)
    }

    fn random_psn(&mut self) -> u32 {
        let s = crate::device::seed();
        u32::from_le_bytes([s[0], s[1], s[2], 0])
    }

    fn reg_mr(&mut self, len: u64) -> io::Result<MrKeys> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("region too large"))?;
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let mr = self.pd.alloc_mr(len, access).map_err(daemon_err)?;
        let keys = MrKeys {
            addr: mr.addr(),
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        };
        self.mrs.push(mr);
        Ok(keys)
    }

    fn read(&self, mr: usize, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = usize::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
        self.mr(mr)?.read(at, buf).map_err(daemon_err)
    }

    fn write(&self, mr: usize, offset: u64, data: &[u8]) -> io::Result<()> {
        let at = usize::try_from(offset).map_err(|_| io::Error::other("offset too large"))?;
        self.mr(mr)?.write(at, data).map_err(daemon_err)
    }

    fn create_cq(&mut self, cqe: u32) -> io::Result<()> {
        if self.channel.is_none() {
            self.channel = Some(self.ctx.create_comp_channel().map_err(daemon_err)?);
        }
        let cq = self
            .ctx
            .create_cq(cqe, self.channel.as_ref())
            .map_err(daemon_err)?;
        self.cqs.push(cq);
        Ok(())
    }

    fn create_qp(&mut self, cap: QpCap) -> io::Result<u32> {
        let cq = self
            .cqs
            .last()
            .ok_or_else(|| io::Error::other("a QP needs a CQ first"))?;
        let qp = self
            .pd
            .create_qp(&QpInitAttr {
                qp_type: QpType::Rc,
                send_cq: cq,
                recv_cq: cq,
                cap,
            })
            .map_err(daemon_err)?;
        let qpn = qp.qpn();
        self.qps.push(qp);
        Ok(qpn)
    }

    fn modify_qp(&mut self, qp: usize, attr: &QpAttr, mask: AttrMask) -> io::Result<()> {
        self.qp(qp)?.modify(attr, mask).map_err(daemon_err)
    }

    fn post_send(&mut self, qp: usize, wr: SendWr) -> io::Result<()> {
        let qp = self.qp(qp)?;
        let wrs = [wr];
        post_with_room(|| qp.post_send(&wrs))
    }

    fn post_recv(&mut self, qp: usize, wr: RecvWr) -> io::Result<()> {
        let qp = self.qp(qp)?;
        let wrs = [wr];
        post_with_room(|| qp.post_recv(&wrs))
    }

    fn poll_cq(&mut self) -> io::Result<Option<WorkCompletion>> {
        for _ in 0..self.cqs.len() {
            if !self.ready.is_empty() {
                break;
            }
            let got = self.cqs[self.next_cq]
                .poll(POLL_BATCH)
                .map_err(daemon_err)?;
            if got.is_empty() {
                self.next_cq = (self.next_cq + 1) % self.cqs.len();
            }
            self.ready.extend(got);
        }
        Ok(self.ready.pop_front())
    }

    /// Through rocexd nothing: the daemon turns the engine. A direct context that spins
    /// turns its own, so that it drives its waits (`Context::progress`) from the first
    /// post on, not only once a poll found nothing.
    fn turn(&mut self) -> io::Result<()> {
        match self.busy_poll && self.ctx.is_direct() {
            true => self.ctx.progress().map_err(daemon_err),
            false => Ok(()),
        }
    }

    fn wait(&mut self, max: Duration) -> io::Result<()> {
        if !self.ready.is_empty() {
            return Ok(());
        }
        if self.busy_poll {
            // A direct context's engine turns in this thread while it waits, which keeps
            // its progress thread off the socket; through rocexd the yield lets the
            // daemon's engine run.
            match self.ctx.is_direct() {
                true => self.ctx.progress().map_err(daemon_err)?,
                false => std::thread::yield_now(),
            }
            return Ok(());
        }
        // Every CQ but the last is armed here, the last by its wait: a completion on any
        // of them writes the shared channel.
        let Some((last, rest)) = self.cqs.split_last_mut() else {
            return Err(io::Error::other("the CQs are not created yet"));
        };
        for cq in rest {
            if cq.req_notify().map_err(daemon_err)? {
                return Ok(());
            }
        }
        last.wait(max).map(drop).map_err(daemon_err)
    }

    /// Long: the daemon runs the engine, and a completion wakes the wait (the CQs are
    /// armed), so a client waiting for its moderated completions need not wake the core
    /// it shares with the daemon thousands of times a second. None when the waits spin.
    fn idle_wait(&self) -> Duration {
        match self.busy_poll {
            true => Duration::ZERO,
            false => Duration::from_millis(10),
        }
    }

    fn linger(&mut self, d: Duration) -> io::Result<()> {
        // The daemon answers the peer by itself; the QPs only have to live that long.
        std::thread::sleep(d);
        Ok(())
    }

    fn counters(&self) -> Option<Counters> {
        None
    }

    /// The daemon's engine counter (it counts every client's QPs).
    fn retransmitted(&self) -> Option<u64> {
        let stats = self.ctx.stats().ok()?;
        let engine = stats.groups.iter().find(|g| g.name == "engine")?;
        engine
            .counters
            .iter()
            .find(|(n, _)| n == "retransmitted_pkts")
            .map(|(_, v)| *v)
    }
}
