//! One lane: an RC QP on the sending side connected to one on the receiving side. The
//! sender keeps up to a window of requests in flight; the receiver checks that every
//! receive-consuming message arrives once, in order, with the bytes the plan says.
//!
//! Flow control is by credits, as an application would do it: a receive-consuming
//! message is posted only when its receive (and its WRITE target slot) is free, i.e. when
//! the receiver has checked the message a window earlier. So the receiver never sees RNR
//! unless the daemon is slower to take a reposted receive than the peer is to deliver.

use std::collections::{BTreeSet, VecDeque};

use rocex_verbs::verbs::{RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use rocex_verbs::{Mr, Qp, Wc};

use super::Env;
use super::plan::{self, HEADER, Kind, MAX_LEN, Msg};
use super::tally::Tally;

/// A request posted and not yet completed.
#[derive(Debug, Clone, Copy)]
struct Posted {
    k: u64,
    msg: Msg,
    /// CMP_SWAP: the value expected; FETCH_ADD: the addend.
    operand: u64,
}

/// One QP pair and its checks.
#[derive(Debug)]
pub(crate) struct Lane {
    /// Lane number (also in every header).
    pub(crate) id: u32,
    /// The sending side (0 or 1); the other side receives and responds.
    pub(crate) from: usize,
    /// The requester QP, on side `from`.
    pub(crate) send_qp: Qp,
    /// The responder QP, on the other side.
    pub(crate) recv_qp: Qp,
    /// Messages planned for this lane.
    total: u64,
    /// Index of the next message to post.
    next_k: u64,
    /// Receive sequence number of the next receive-consuming message.
    next_seq: u32,
    outstanding: VecDeque<Posted>,
    /// The value the lane's CMP_SWAP chain stored last.
    cas_value: u64,
    /// Receiver: kind and length of each message sent and not yet seen, from `expect_base`.
    expect: VecDeque<(Kind, u32)>,
    expect_base: u32,
    /// Receiver: sequence numbers seen before an earlier one.
    ahead: BTreeSet<u32>,
    /// Receiver: receive completions taken (each returns a credit).
    received: u64,
    /// Receiver: receives posted (the next one's `wr_id`).
    recv_posted: u64,
}

impl Lane {
    /// A lane of `total` messages over the connected pair.
    pub(crate) fn new(id: u32, from: usize, send_qp: Qp, recv_qp: Qp, total: u64) -> Self {
        Self {
            id,
            from,
            send_qp,
            recv_qp,
            total,
            next_k: 0,
            next_seq: 0,
            outstanding: VecDeque::new(),
            cas_value: 0,
            expect: VecDeque::new(),
            expect_base: 0,
            ahead: BTreeSet::new(),
            received: 0,
            recv_posted: 0,
        }
    }

    /// The receiving side.
    pub(crate) fn to(&self) -> usize {
        1 - self.from
    }

    /// Whether every message was posted, completed and (if it consumes a receive) seen.
    pub(crate) fn finished(&self) -> bool {
        self.next_k == self.total && self.outstanding.is_empty() && self.expect.is_empty()
    }

    /// Requests in flight and messages awaited, for a stall report.
    pub(crate) fn state(&self) -> String {
        format!(
            "lane {}: posted {}/{}, in flight {}, awaited at the receiver {} (next seq {})",
            self.id,
            self.next_k,
            self.total,
            self.outstanding.len(),
            self.expect.len(),
            self.expect_base
        )
    }

    /// Posts receives until `window` are outstanding.
    pub(crate) fn post_receives(&mut self, env: &Env, mr: &Mr) -> rocex_verbs::Result<()> {
        let window = u64::from(env.window);
        let wrs: Vec<RecvWr> = (self.recv_posted..self.received + window)
            .map(|w| RecvWr::new(w, [mr.sge(env.layout.recv_slot(self.id, w), MAX_LEN)]))
            .collect();
        if !wrs.is_empty() {
            self.recv_qp.post_recv(&wrs)?;
            self.recv_posted += wrs.len() as u64;
        }
        Ok(())
    }

    /// Posts the next messages while the window and the receiver's credits allow.
    pub(crate) fn fill(&mut self, env: &Env, mrs: [&Mr; 2]) -> rocex_verbs::Result<()> {
        let (local, peer) = (mrs[self.from], mrs[self.to()]);
        let mut wrs = Vec::new();
        while self.next_k < self.total && self.outstanding.len() < env.window as usize {
            let k = self.next_k;
            let msg = plan::plan(env.seed, self.id, k);
            if msg.kind.consumes_recv()
                && u64::from(self.next_seq) >= self.received + u64::from(env.window)
            {
                break;
            }
            let (op, sges, operand) = self.request(env, local, peer, k, msg)?;
            wrs.push(SendWr::new(k, op, sges));
            self.outstanding.push_back(Posted { k, msg, operand });
            self.next_k += 1;
        }
        if !wrs.is_empty() {
            self.send_qp.post_send(&wrs)?;
        }
        Ok(())
    }

    /// The work request of message `k`; writes its header where it has one.
    fn request(
        &mut self,
        env: &Env,
        local: &Mr,
        peer: &Mr,
        k: u64,
        msg: Msg,
    ) -> rocex_verbs::Result<(SendOp, Vec<Sge>, u64)> {
        let l = env.layout;
        let remote = |off: u64| Remote {
            addr: peer.addr() + off,
            rkey: peer.rkey(),
        };
        let result = vec![local.sge(l.atomic_result(self.id, k), 8)];
        Ok(match msg.kind {
            Kind::Send | Kind::SendImm | Kind::WriteImm => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.expect.push_back((msg.kind, msg.len));
                let len = msg.len as usize;
                let head = l.header(self.id, k);
                let mut sges = Vec::new();
                if len > 0 {
                    let h = plan::header(self.id, seq, msg.len);
                    local.write(head as usize, &h[..len.min(HEADER)])?;
                    sges.push(local.sge(head, len.min(HEADER) as u32));
                }
                if len > HEADER {
                    let off = plan::offset(plan::payload_word(self.id, seq));
                    sges.push(local.sge(l.pattern() + off as u64, (len - HEADER) as u32));
                }
                let op = match msg.kind {
                    Kind::Send => SendOp::Send,
                    Kind::SendImm => SendOp::SendWithImm(seq),
                    _ => SendOp::WriteWithImm(remote(l.write_slot(self.id, seq.into())), seq),
                };
                (op, sges, 0)
            }
            Kind::Read => {
                let src = l.pattern() + plan::offset(msg.word) as u64;
                (
                    SendOp::Read(remote(src)),
                    vec![local.sge(l.read_slot(self.id, k), msg.len)],
                    0,
                )
            }
            Kind::FetchAdd => {
                let add = 1 + msg.word % 1000;
                let op = SendOp::FetchAdd {
                    remote: remote(l.counter()),
                    add,
                };
                (op, result, add)
            }
            Kind::CmpSwap => {
                let compare = self.cas_value;
                let mut swap = msg.word;
                if swap == compare {
                    swap ^= 1;
                }
                self.cas_value = swap;
                let op = SendOp::CompareSwap {
                    remote: remote(l.cas_word(self.id)),
                    compare,
                    swap,
                };
                (op, result, compare)
            }
        })
    }

    /// A completion of the requester: next in order, successful, and with the right
    /// result for READs and atomics.
    pub(crate) fn on_send(&mut self, wc: &Wc, env: &Env, local: &Mr, t: &mut Tally) {
        let Some(p) = self.outstanding.pop_front() else {
            t.completion_errors += 1;
            t.note(format!(
                "lane {}: send completion with nothing in flight: {wc:?}",
                self.id
            ));
            return;
        };
        let want = match p.msg.kind {
            Kind::Send | Kind::SendImm => WcOpcode::Send,
            Kind::WriteImm => WcOpcode::RdmaWrite,
            Kind::Read => WcOpcode::RdmaRead,
            Kind::FetchAdd => WcOpcode::FetchAdd,
            Kind::CmpSwap => WcOpcode::CompSwap,
        };
        if (wc.wr_id, wc.status, wc.opcode) != (p.k, WcStatus::Success, want) {
            t.completion_errors += 1;
            t.note(format!(
                "lane {}: request {} ({:?}, {} B): completion {wc:?}",
                self.id, p.k, p.msg.kind, p.msg.len
            ));
            return;
        }
        let l = env.layout;
        let to = self.to();
        match p.msg.kind {
            Kind::Read => {
                let mut got = vec![0; p.msg.len as usize];
                let off = plan::offset(p.msg.word);
                let same = local
                    .read(l.read_slot(self.id, p.k) as usize, &mut got)
                    .is_ok()
                    && got[..] == env.pattern[off..off + got.len()];
                if !same {
                    t.corrupted += 1;
                    t.note(format!(
                        "lane {}: READ {} of {} B at pattern offset {off}: bytes differ",
                        self.id, p.k, p.msg.len
                    ));
                }
            }
            Kind::FetchAdd => match local.read_u64(l.atomic_result(self.id, p.k) as usize) {
                Ok(orig) => {
                    t.fetched[to].push(orig);
                    t.add_sum[to] = t.add_sum[to].wrapping_add(p.operand);
                }
                Err(e) => t.note(format!("lane {}: FETCH_ADD result: {e}", self.id)),
            },
            Kind::CmpSwap => {
                let orig = local.read_u64(l.atomic_result(self.id, p.k) as usize).ok();
                if orig != Some(p.operand) {
                    t.cas_broken += 1;
                    t.note(format!(
                        "lane {}: CMP_SWAP {} expected {:#x}, found {orig:x?}",
                        self.id, p.k, p.operand
                    ));
                }
            }
            Kind::Send | Kind::SendImm | Kind::WriteImm => {}
        }
        t.done(p.msg.kind, p.msg.len);
    }

    /// A completion of the responder's receive queue: the message it names must be the
    /// next one of the lane, arrive once, and carry the planned bytes. The receive is
    /// reposted.
    pub(crate) fn on_recv(&mut self, wc: &Wc, env: &Env, mr: &Mr, t: &mut Tally) {
        if wc.status != WcStatus::Success {
            t.completion_errors += 1;
            t.note(format!("lane {}: receive completion {wc:?}", self.id));
            return;
        }
        if wc.wr_id != self.received {
            t.out_of_order += 1;
            t.note(format!(
                "lane {}: receive {} completed while {} was next",
                self.id, wc.wr_id, self.received
            ));
        }
        self.received += 1;
        let l = env.layout;
        let slot = l.recv_slot(self.id, wc.wr_id) as usize;
        let seq = match wc.imm_data {
            Some(seq) => Some(seq),
            None => {
                let mut h = [0; HEADER];
                let n = (wc.byte_len as usize).min(HEADER);
                mr.read(slot, &mut h[..n])
                    .ok()
                    .and_then(|()| plan::header_seq(self.id, &h[..n]))
            }
        };
        let Some(seq) = seq else {
            t.corrupted += 1;
            t.note(format!(
                "lane {}: a message without a sequence number: {wc:?}",
                self.id
            ));
            return;
        };
        let idx = seq.wrapping_sub(self.expect_base) as usize;
        if seq < self.expect_base || self.ahead.contains(&seq) {
            t.duplicated += 1;
            t.note(format!("lane {}: message {seq} arrived again", self.id));
            return;
        }
        let Some(&(kind, len)) = self.expect.get(idx) else {
            t.corrupted += 1;
            t.note(format!(
                "lane {}: message {seq} was never sent: {wc:?}",
                self.id
            ));
            return;
        };
        self.check(wc, env, mr, t, seq, kind, len, slot);
        if idx == 0 {
            self.expect.pop_front();
            self.expect_base += 1;
            while self.ahead.remove(&self.expect_base) {
                self.expect.pop_front();
                self.expect_base += 1;
            }
        } else {
            t.out_of_order += 1;
            t.note(format!(
                "lane {}: message {seq} arrived before {}",
                self.id, self.expect_base
            ));
            self.ahead.insert(seq);
        }
    }

    /// Opcode, immediate, length and bytes of received message `seq`.
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        wc: &Wc,
        env: &Env,
        mr: &Mr,
        t: &mut Tally,
        seq: u32,
        kind: Kind,
        len: u32,
        slot: usize,
    ) {
        let (opcode, imm, at) = match kind {
            Kind::Send => (WcOpcode::Recv, None, slot),
            Kind::SendImm => (WcOpcode::Recv, Some(seq), slot),
            _ => (
                WcOpcode::RecvRdmaWithImm,
                Some(seq),
                env.layout.write_slot(self.id, seq.into()) as usize,
            ),
        };
        let mut got = vec![0; len as usize];
        let fine = (wc.opcode, wc.imm_data, wc.byte_len) == (opcode, imm, len)
            && mr.read(at, &mut got).is_ok()
            && plan::payload_matches(&env.pattern, self.id, seq, &got);
        if !fine {
            t.corrupted += 1;
            t.note(format!(
                "lane {}: message {seq} ({kind:?}, {len} B) differs: {wc:?}",
                self.id
            ));
        }
    }

    /// At the end: messages sent and never seen by the receiver.
    pub(crate) fn missing(&self) -> u64 {
        (self.expect.len() - self.ahead.len()) as u64
    }
}
