//! One NVMe-oF queue over one RC connection through rocexd: rdma_cm connect with the
//! transport binding's private data, command capsules out as SENDs, response capsules in
//! on posted receives, and a registered data area the controller reaches with RDMA READ
//! and WRITE through keyed SGLs.
//!
//! Each command identifier owns one data slot of the area, so up to `depth` commands are
//! in flight with no buffer bookkeeping beyond the identifier. A capsule goes out as
//! inline data (64 bytes), so nothing waits for its send completion but the error check.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use rocex_verbs::verbs::{
    Access, AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, SendData, SendOp, SendWr, WcStatus,
    WorkCompletion,
};
use rocex_verbs::{CmEventKind, Context, Cq, Mr, Pd, Qp, QpInitAttr};
use zerocopy::IntoBytes;

use crate::error::{Error, Result};
use crate::track::{self, Done, Tracker};
use crate::wire::sqe::{KEYED_SGL_MAX_LEN, SQE_LEN};
use crate::wire::{CmReq, Cqe, KeyedSgl, Sqe};

/// Bytes of each receive buffer: a response capsule is 16 bytes; a longer one (which
/// this host never asks for) still lands and is refused by its length.
const RESP_SLOT: usize = 64;
/// wr_id tag of receives (the low bits are the receive slot).
const RECV_TAG: u64 = 1 << 32;
/// Longest single sleep while waiting for a completion.
const NAP: Duration = Duration::from_millis(50);

/// How a queue is made.
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// Queue entries: commands in flight at once and responses the host takes at once.
    pub depth: u16,
    /// Bytes of each command's data slot (the largest transfer of one command).
    pub slot_bytes: u32,
    /// How long any one wait (connection, response) may take.
    pub timeout: Duration,
}

/// A connected queue.
#[derive(Debug)]
pub struct Queue {
    qid: u16,
    cm_id: u32,
    ctx: Context,
    qp: Qp,
    cq: Cq,
    resp: Mr,
    data: Mr,
    cfg: QueueConfig,
    track: Tracker,
    /// Responses received and not yet handed out: a command's identifier is freed only
    /// when its response is, so that it cannot be reused while its response waits here.
    ready: VecDeque<Result<Cqe>>,
    connected: bool,
    /// The controller's receive queue size from the accept, when the CM handed it on.
    crqsize: Option<u16>,
}

fn verbs(qid: u16, what: &'static str) -> impl FnOnce(rocex_verbs::Error) -> Error {
    move |source| Error::Verbs { qid, what, source }
}

impl Queue {
    /// Creates the queue's QP, CQ and memory in `pd`, posts its receives and connects it
    /// to the target at `addr`:`port` with RDMA_CM_REQUEST private data for `qid`. The
    /// Fabrics Connect command is the caller's next step.
    pub fn connect(
        ctx: &Context,
        pd: &Pd,
        addr: IpAddr,
        port: u16,
        qid: u16,
        cfg: QueueConfig,
    ) -> Result<Self> {
        if cfg.depth < 2 || cfg.depth > crate::wire::cm::MAX_QUEUE_SIZE {
            return Err(Error::Invalid(format!(
                "queue {qid}: depth {} is outside 2..={}",
                cfg.depth,
                crate::wire::cm::MAX_QUEUE_SIZE
            )));
        }
        if cfg.slot_bytes == 0 || cfg.slot_bytes > KEYED_SGL_MAX_LEN {
            return Err(Error::Invalid(format!(
                "queue {qid}: data slots of {} bytes; a keyed SGL carries 1 to {KEYED_SGL_MAX_LEN}",
                cfg.slot_bytes
            )));
        }
        let depth = u32::from(cfg.depth);
        let cq = ctx
            .create_cq(4 * depth, None)
            .map_err(verbs(qid, "create CQ"))?;
        let mut qp = pd
            .create_qp(&QpInitAttr {
                qp_type: QpType::Rc,
                send_cq: &cq,
                recv_cq: &cq,
                cap: QpCap {
                    max_send_wr: 2 * depth,
                    max_recv_wr: depth,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: SQE_LEN as u32,
                },
            })
            .map_err(verbs(qid, "create QP"))?;
        let init = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            ..QpAttr::default()
        };
        let mask = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
        qp.modify(&init, mask).map_err(verbs(qid, "QP to INIT"))?;
        let resp = pd
            .alloc_mr(RESP_SLOT * depth as usize, Access::LOCAL_WRITE)
            .map_err(verbs(qid, "register response buffers"))?;
        let data_len = cfg.slot_bytes as usize * depth as usize;
        let data = pd
            .alloc_mr(
                data_len,
                Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE,
            )
            .map_err(verbs(qid, "register data buffers"))?;
        let recvs: Vec<RecvWr> = (0..depth)
            .map(|i| {
                RecvWr::new(
                    RECV_TAG | u64::from(i),
                    [resp.sge(u64::from(i) * RESP_SLOT as u64, RESP_SLOT as u32)],
                )
            })
            .collect();
        qp.post_recv(&recvs).map_err(verbs(qid, "post receives"))?;
        let req = CmReq::new(qid, cfg.depth);
        let cm_id = ctx
            .cm_connect(&qp, addr, port, req.as_bytes())
            .map_err(verbs(qid, "rdma_cm connect"))?;
        let mut q = Self {
            qid,
            cm_id,
            ctx: ctx.clone(),
            qp,
            cq,
            resp,
            data,
            cfg,
            track: Tracker::new(qid, cfg.depth),
            ready: VecDeque::new(),
            connected: false,
            crqsize: None,
        };
        match q
            .cm_wait(CmEventKind::Established)
            .and_then(|pd| track::accept(qid, cfg.depth, &pd))
        {
            Ok(crqsize) => {
                q.connected = true;
                q.crqsize = crqsize;
                Ok(q)
            }
            Err(e) => {
                let _ = q.ctx.cm_disconnect(q.cm_id);
                Err(e)
            }
        }
    }

    /// Waits for `want` on this queue's connection; other connections' events are left
    /// to their own waits (and dropped: this host asks for none it does not wait for).
    /// Returns the event's private data.
    fn cm_wait(&mut self, want: CmEventKind) -> Result<Vec<u8>> {
        let qid = self.qid;
        let end = Instant::now() + self.cfg.timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let e = match self.ctx.cm_wait_event(left) {
                Ok(e) => e,
                Err(rocex_verbs::Error::Timeout) => {
                    return Err(Error::Timeout {
                        qid,
                        cid: None,
                        what: "rdma_cm event",
                    });
                }
                Err(e) => return Err(verbs(qid, "rdma_cm event")(e)),
            };
            if e.id != self.cm_id {
                continue;
            }
            match e.kind {
                k if k == want => return Ok(e.private_data),
                CmEventKind::Rejected => {
                    let status = track::reject_status(e.reason, &e.private_data);
                    return Err(Error::Rejected {
                        qid,
                        reason: e.reason,
                        status,
                    });
                }
                CmEventKind::Unreachable => return Err(Error::Unreachable { qid }),
                CmEventKind::Disconnected => return Err(Error::Disconnected { qid }),
                _ => {}
            }
        }
    }

    /// The queue ID.
    pub fn qid(&self) -> u16 {
        self.qid
    }

    /// Entries of the queue.
    pub fn depth(&self) -> u16 {
        self.cfg.depth
    }

    /// The commands the controller takes at once on this queue (CRQSIZE of the rdma_cm
    /// accept), when rocexd handed the accept's private data on.
    pub fn controller_depth(&self) -> Option<u16> {
        self.crqsize
    }

    /// Bytes of each data slot.
    pub fn slot_bytes(&self) -> u32 {
        self.cfg.slot_bytes
    }

    /// Commands in flight.
    pub fn inflight(&self) -> usize {
        self.track.inflight()
    }

    /// A free command identifier, if any: its data slot is the caller's until it submits.
    pub fn take_cid(&mut self) -> Option<u16> {
        self.track.take()
    }

    /// Copies `bytes` into `cid`'s data slot (the data of a write about to be submitted).
    pub fn put_data(&self, cid: u16, bytes: &[u8]) -> Result<()> {
        self.check_slot(cid, bytes.len())?;
        self.data
            .write(self.slot_off(cid), bytes)
            .map_err(verbs(self.qid, "copy into the data slot"))
    }

    /// Copies `cid`'s data slot into `out` (the data of a completed read; valid until the
    /// identifier is submitted again).
    pub fn get_data(&self, cid: u16, out: &mut [u8]) -> Result<()> {
        self.check_slot(cid, out.len())?;
        self.data
            .read(self.slot_off(cid), out)
            .map_err(verbs(self.qid, "copy from the data slot"))
    }

    /// A keyed SGL descriptor over the first `len` bytes of `cid`'s data slot.
    pub fn sgl(&self, cid: u16, len: u32) -> Result<KeyedSgl> {
        self.check_slot(cid, len as usize)?;
        Ok(KeyedSgl::new(
            self.data.addr() + self.slot_off(cid) as u64,
            len,
            self.data.rkey(),
        )
        .expect("a slot is shorter than 16 MiB"))
    }

    fn slot_off(&self, cid: u16) -> usize {
        usize::from(cid) * self.cfg.slot_bytes as usize
    }

    fn check_slot(&self, cid: u16, len: usize) -> Result<()> {
        if cid >= self.cfg.depth || len > self.cfg.slot_bytes as usize {
            return Err(Error::Invalid(format!(
                "queue {}: {len} bytes for command {cid}: slots are {} bytes, {} of them",
                self.qid, self.cfg.slot_bytes, self.cfg.depth
            )));
        }
        Ok(())
    }

    /// Sends `sqe` as command `cid` (from [`take_cid`](Self::take_cid)).
    pub fn submit(&mut self, cid: u16, mut sqe: Sqe) -> Result<()> {
        self.track.start(cid, &sqe)?;
        sqe.cid = cid.into();
        let mut wr = SendWr::new(u64::from(cid), SendOp::Send, []);
        wr.data = SendData::Inline(sqe.as_bytes().to_vec());
        if let Err(e) = self.qp.post_send(&[wr]) {
            self.track.abort(cid);
            return Err(verbs(self.qid, "post the command capsule")(e));
        }
        Ok(())
    }

    /// Returns an identifier taken but not submitted.
    pub fn give_back(&mut self, cid: u16) {
        self.track.give_back(cid);
    }

    /// The next response, within the timeout. A command that failed is an
    /// [`Error::Command`] naming it; its identifier is free again either way.
    pub fn complete(&mut self) -> Result<Done> {
        let end = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(r) = self.ready.pop_front() {
                return r.and_then(|cqe| self.track.finish(&cqe));
            }
            if self.inflight() == 0 {
                return Err(Error::Invalid(format!(
                    "queue {}: waiting for a response with no command in flight",
                    self.qid
                )));
            }
            let mut wcs = Vec::new();
            let n = self
                .cq
                .poll_with(32, |wc| wcs.push(wc))
                .map_err(verbs(self.qid, "poll the CQ"))?;
            for wc in wcs {
                self.on_completion(&wc)?;
            }
            if n > 0 || !self.ready.is_empty() {
                continue;
            }
            let now = Instant::now();
            if now >= end {
                return Err(Error::Timeout {
                    qid: self.qid,
                    cid: self.track.oldest(),
                    what: "response",
                });
            }
            self.cq
                .wait(NAP.min(end - now))
                .map_err(verbs(self.qid, "wait for the CQ"))?;
        }
    }

    fn on_completion(&mut self, wc: &WorkCompletion) -> Result<()> {
        let qid = self.qid;
        let recv = wc.wr_id & RECV_TAG != 0;
        if wc.status != WcStatus::Success {
            return Err(Error::Transport {
                qid,
                what: if recv { "receive" } else { "send" },
                status: wc.status,
            });
        }
        if !recv {
            return Ok(());
        }
        let slot = (wc.wr_id & 0xffff) as u16;
        let mut b = [0u8; RESP_SLOT];
        self.resp
            .read(usize::from(slot) * RESP_SLOT, &mut b)
            .map_err(verbs(qid, "read the response"))?;
        // The receive goes back before the response is judged: the target may answer
        // the next command at once.
        let wr = RecvWr::new(
            wc.wr_id,
            [self
                .resp
                .sge(u64::from(slot) * RESP_SLOT as u64, RESP_SLOT as u32)],
        );
        self.qp
            .post_recv(&[wr])
            .map_err(verbs(qid, "repost a receive"))?;
        self.ready
            .push_back(track::response(qid, wc.opcode, wc.byte_len, &b));
        Ok(())
    }

    /// Submits `sqe` alone and waits for its response (the admin queue's way, and each
    /// queue's Connect).
    pub fn call(&mut self, sqe: Sqe) -> Result<Done> {
        let cid = self.take_cid().ok_or_else(|| {
            Error::Invalid(format!(
                "queue {}: every command identifier is in use",
                self.qid
            ))
        })?;
        self.call_with(cid, sqe)
    }

    /// [`call`](Self::call) with an identifier already taken (its data slot filled).
    pub fn call_with(&mut self, cid: u16, sqe: Sqe) -> Result<Done> {
        if let Err(e) = self.submit(cid, sqe) {
            self.give_back(cid);
            return Err(e);
        }
        loop {
            let r = self.complete();
            match r {
                Ok(d) if d.cid == cid => return Ok(d),
                Err(Error::Command { cid: c, .. }) if c == cid => return r,
                Err(e) => return Err(e),
                Ok(_) => {}
            }
        }
    }

    /// Ends the connection (rdma_cm disconnect: DREQ, the QP to error) and waits for its
    /// end.
    pub fn disconnect(mut self) -> Result<()> {
        if !self.connected {
            return Ok(());
        }
        self.connected = false;
        self.ctx
            .cm_disconnect(self.cm_id)
            .map_err(verbs(self.qid, "rdma_cm disconnect"))?;
        self.cm_wait(CmEventKind::Disconnected).map(|_| ())
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        if self.connected {
            let _ = self.ctx.cm_disconnect(self.cm_id);
        }
    }
}
