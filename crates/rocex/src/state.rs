//! A connection's mutable half: its QP and CQ, the operations in flight keyed by `wr_id`,
//! the receive pool, and the wakers of async waiters.
//!
//! Every completion is routed here by its `wr_id` ([`State::dispatch`]), whoever drained
//! the CQ, so any number of blocking or async callers can wait on one connection.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::task::Waker;

use rocex_verbs::verbs::{RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use rocex_verbs::{Cq, Mr, Qp, Wc};

use crate::error::{Error, Op, Result};

/// `wr_id`s of pool receives carry this bit and the slot index; operations count from 1.
const RECV_TAG: u64 = 1 << 63;

/// What an operation asks of the QP.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Request {
    /// SEND of `sge` (none for zero bytes).
    Send { sge: Option<Sge>, imm: Option<u32> },
    /// WRITE of `sge` to `remote`.
    Write {
        sge: Option<Sge>,
        remote: Remote,
        imm: Option<u32>,
    },
    /// READ of `remote` into `sge`.
    Read { sge: Option<Sge>, remote: Remote },
    /// Fetch and add on `remote`.
    FetchAdd { remote: Remote, add: u64 },
    /// Compare and swap on `remote`.
    CompareSwap {
        remote: Remote,
        expect: u64,
        new: u64,
    },
}

impl Request {
    pub(crate) fn op(&self) -> Op {
        match self {
            Self::Send { .. } => Op::Send,
            Self::Write { .. } => Op::Write,
            Self::Read { .. } => Op::Read,
            Self::FetchAdd { .. } => Op::FetchAdd,
            Self::CompareSwap { .. } => Op::CompareSwap,
        }
    }
}

/// A finished operation: its completion and, for atomics, the original value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub(crate) wc: Wc,
    pub(crate) old: u64,
}

#[derive(Debug)]
enum Pending {
    /// Posted; `scratch` is an atomic's result slot, `_keep` the registration its local
    /// data lives in (kept while the daemon may still touch it); `abandoned` when its
    /// caller went away, so the completion is dropped.
    InFlight {
        scratch: Option<u32>,
        _keep: Option<Rc<Mr>>,
        abandoned: bool,
    },
    Done(Done),
}

/// A message in the receive pool, not yet taken by the application.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    slot: u32,
    len: u32,
    imm: Option<u32>,
}

/// The receive buffers the library posts: `count` slots of `size` bytes in one region.
#[derive(Debug)]
pub(crate) struct RecvPool {
    mr: Mr,
    size: u32,
    arrived: VecDeque<Arrival>,
    /// The first failed receive: the QP is in error and nothing more arrives.
    failed: Option<WcStatus>,
}

impl RecvPool {
    pub(crate) fn new(mr: Mr, size: u32) -> Self {
        Self {
            mr,
            size,
            arrived: VecDeque::new(),
            failed: None,
        }
    }

    fn wr(&self, slot: u32) -> RecvWr {
        let at = u64::from(slot) * u64::from(self.size);
        RecvWr::new(RECV_TAG | u64::from(slot), [self.mr.sge(at, self.size)])
    }

    /// Posts every slot (at setup).
    pub(crate) fn post_all(&self, qp: &mut Qp, count: u32) -> Result<()> {
        let wrs: Vec<_> = (0..count).map(|s| self.wr(s)).collect();
        Ok(qp.post_recv(&wrs)?)
    }
}

/// Everything of a connection that changes as it runs.
#[derive(Debug)]
pub(crate) struct State {
    /// Declared first: destroyed before the regions its requests use.
    pub(crate) qp: Qp,
    pub(crate) cq: Cq,
    ops: HashMap<u64, Pending>,
    next_id: u64,
    in_flight: u32,
    limit: u32,
    scratch: Mr,
    free_scratch: Vec<u32>,
    pool: RecvPool,
    /// The peer closed the out-of-band connection.
    pub(crate) closed: bool,
    /// Bumped whenever completions were routed or the connection closed; async waiters
    /// compare it to know they must look again.
    pub(crate) generation: u64,
    pub(crate) wakers: Vec<Waker>,
}

impl State {
    /// `limit` operations in flight at most (the SQ depth, which the CQ also holds);
    /// `scratch` holds 8 bytes per operation for atomic results.
    pub(crate) fn new(qp: Qp, cq: Cq, limit: u32, scratch: Mr, pool: RecvPool) -> Self {
        Self {
            qp,
            cq,
            ops: HashMap::new(),
            next_id: 1,
            in_flight: 0,
            limit,
            scratch,
            free_scratch: (0..limit).rev().collect(),
            pool,
            closed: false,
            generation: 0,
            wakers: Vec::new(),
        }
    }

    /// Posts `req` if the SQ has room; `None` when `limit` operations are in flight.
    pub(crate) fn try_post(&mut self, req: &Request, keep: Option<&Rc<Mr>>) -> Option<Result<u64>> {
        if self.closed {
            return Some(Err(Error::Disconnected));
        }
        if self.in_flight >= self.limit {
            return None;
        }
        let atomic = matches!(req, Request::FetchAdd { .. } | Request::CompareSwap { .. });
        let scratch = if atomic {
            Some(self.free_scratch.pop()?)
        } else {
            None
        };
        let id = self.next_id;
        let result = |slot: Option<u32>| slot.map(|s| self.scratch.sge(u64::from(s) * 8, 8));
        let wr = match *req {
            Request::Send { sge, imm } => {
                SendWr::new(id, imm.map_or(SendOp::Send, SendOp::SendWithImm), sge)
            }
            Request::Write { sge, remote, imm } => SendWr::new(
                id,
                imm.map_or(SendOp::Write(remote), |i| SendOp::WriteWithImm(remote, i)),
                sge,
            ),
            Request::Read { sge, remote } => SendWr::new(id, SendOp::Read(remote), sge),
            Request::FetchAdd { remote, add } => {
                SendWr::new(id, SendOp::FetchAdd { remote, add }, result(scratch))
            }
            Request::CompareSwap {
                remote,
                expect,
                new,
            } => {
                let op = SendOp::CompareSwap {
                    remote,
                    compare: expect,
                    swap: new,
                };
                SendWr::new(id, op, result(scratch))
            }
        };
        if let Err(e) = self.qp.post_send(&[wr]) {
            self.free_scratch.extend(scratch);
            return Some(Err(e.into()));
        }
        self.next_id += 1;
        self.in_flight += 1;
        self.ops.insert(
            id,
            Pending::InFlight {
                scratch,
                _keep: keep.cloned(),
                abandoned: false,
            },
        );
        Some(Ok(id))
    }

    /// Routes one completion: a pool receive to the arrival queue, an operation to its
    /// entry.
    pub(crate) fn dispatch(&mut self, wc: Wc) {
        if wc.wr_id & RECV_TAG != 0 {
            let slot = (wc.wr_id & !RECV_TAG) as u32;
            if wc.status != WcStatus::Success {
                self.pool.failed.get_or_insert(wc.status);
                return;
            }
            // A WRITE with immediate data consumes a receive but places nothing in it: its
            // `byte_len` counts the bytes written into the shared buffer.
            let len = match wc.opcode {
                WcOpcode::RecvRdmaWithImm => 0,
                _ => wc.byte_len,
            };
            self.pool.arrived.push_back(Arrival {
                slot,
                len,
                imm: wc.imm_data,
            });
            return;
        }
        if !matches!(self.ops.get(&wc.wr_id), Some(Pending::InFlight { .. })) {
            return;
        }
        let Some(Pending::InFlight {
            scratch, abandoned, ..
        }) = self.ops.remove(&wc.wr_id)
        else {
            return;
        };
        self.in_flight = self.in_flight.saturating_sub(1);
        let old = scratch.map_or(0, |s| {
            self.free_scratch.push(s);
            self.scratch.read_u64(s as usize * 8).unwrap_or(0)
        });
        if !abandoned {
            self.ops.insert(wc.wr_id, Pending::Done(Done { wc, old }));
        }
    }

    /// The result of operation `id` once it completed.
    pub(crate) fn take(&mut self, id: u64, op: Op) -> Option<Result<Done>> {
        if !matches!(self.ops.get(&id), Some(Pending::Done(_))) {
            return None;
        }
        let Some(Pending::Done(d)) = self.ops.remove(&id) else {
            return None;
        };
        Some(match d.wc.status {
            WcStatus::Success => Ok(d),
            s => Err(Error::of_status(s, op, self.closed)),
        })
    }

    /// Forgets operation `id` (its caller went away): done, it is dropped; in flight, its
    /// completion will be.
    pub(crate) fn abandon(&mut self, id: u64) {
        match self.ops.get_mut(&id) {
            Some(Pending::InFlight { abandoned, .. }) => *abandoned = true,
            Some(Pending::Done(_)) => {
                self.ops.remove(&id);
            }
            None => {}
        }
    }

    /// Takes the next received message into `out` and reposts its slot; the length and
    /// immediate data. `None` while nothing arrived.
    pub(crate) fn take_arrival(&mut self, out: &mut [u8]) -> Option<Result<(usize, Option<u32>)>> {
        let Some(&a) = self.pool.arrived.front() else {
            if self.closed {
                return Some(Err(Error::Disconnected));
            }
            return self
                .pool
                .failed
                .map(|s| Err(Error::of_status(s, Op::Recv, false)));
        };
        let len = a.len as usize;
        if len > out.len() {
            return Some(Err(Error::BufferTooSmall {
                needed: len,
                have: out.len(),
            }));
        }
        self.pool.arrived.pop_front();
        let at = a.slot as usize * self.pool.size as usize;
        let r = self
            .pool
            .mr
            .read(at, &mut out[..len])
            .and_then(|()| self.qp.post_recv(&[self.pool.wr(a.slot)]));
        Some(r.map(|()| (len, a.imm)).map_err(Error::from))
    }

    /// The peer closed the out-of-band connection. What waits for a message, and what
    /// would be posted, fails at once; what is in flight still completes: its
    /// acknowledgement may be on its way (a hang-up can overtake it), and if not, the
    /// retries run out.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }
}
