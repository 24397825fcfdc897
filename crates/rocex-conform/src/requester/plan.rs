//! What the capture shows about the requester's work and setup, and what has to be
//! inferred.
//!
//! The work requests are read back from the request stream: every PSN's first captured
//! packet, walked in PSN order, gives each message's operation, length (a WRITE's RETH, a
//! SEND's packets summed), remote address and key, immediate data and invalidated rkey;
//! a PSN never captured in the middle of a SEND or WRITE is a full-MTU MIDDLE packet. A
//! work request is posted at the first captured frame whose PSN reaches its own: before
//! that rxe had not sent it, so the application may not have posted it yet.
//!
//! The QP's attributes: the start PSN (the earliest PSN in the stream), the path MTU (a
//! FIRST or MIDDLE packet's payload), the ACK timeout (the longest silence before a
//! go-back that no NAK explains, rounded down to the code whose 4.096 µs × 2^code it
//! exceeds), `rnr_retry` (0 when rxe gave up after an RNR NAK without resending, 7
//! otherwise) and `retry_cnt` (7, as the verbs examples and perftest set it: no capture
//! shows a retry count running out).

use std::collections::BTreeMap;

use rocex_proto::verbs::{Mtu, Remote, SendOp};
use rocex_wire::Psn;
use rocex_wire::opcode::Operation;

use crate::connection::{Connection, Pkt};
use crate::infer::{Inference, InferenceKind, packets, shown_mtu};

/// ACK timeout code when the capture shows none: 4.096 µs × 2^14 = 67 ms, what
/// `ibv_rc_pingpong`, perftest and rdma_cm's users set.
const DEFAULT_TIMEOUT: u8 = 14;

/// Shorter silences before a resend are a response's doing, not the timer's: rxe took up
/// to 2.5 ms to act on a response in the lab's captures, and no application sets a
/// timeout this short.
const MIN_TIMEOUT_GAP: f64 = 4e-3;

/// One inferred work request.
#[derive(Debug, Clone)]
pub struct WrPlan {
    /// The operation with its operands.
    pub op: SendOp,
    /// Bytes the message moves (READ: bytes asked for; atomics: 8).
    pub len: u64,
    /// The Solicited Event bit of its last packet.
    pub solicited: bool,
    /// Its first PSN.
    pub psn: Psn,
    /// Index of the captured request before which it is posted.
    pub post_before: usize,
}

/// How to set up and drive the requester of one connection.
#[derive(Debug, Clone)]
pub struct ReqPlan {
    /// The first PSN the requester sent.
    pub start_psn: Psn,
    /// Path MTU.
    pub mtu: Mtu,
    /// ACK timeout code.
    pub timeout: u8,
    /// Retries after timeouts and sequence NAKs.
    pub retry_cnt: u8,
    /// Retries after RNR NAKs.
    pub rnr_retry: u8,
    /// The requester's QPN (the responses' destination).
    pub qpn: u32,
    /// The work requests, in order.
    pub wrs: Vec<WrPlan>,
    /// Inferences made.
    pub inferences: Vec<Inference>,
}

impl ReqPlan {
    /// The setup, for verbose output.
    pub fn settings(&self) -> String {
        format!(
            "requester settings: sq_psn={} path_mtu={} timeout={} retry_cnt={} rnr_retry={} qpn={:#x} work_requests={}",
            self.start_psn.value(),
            self.mtu.bytes(),
            self.timeout,
            self.retry_cnt,
            self.rnr_retry,
            self.qpn,
            self.wrs.len()
        )
    }

    fn infer(&mut self, frame: u64, kind: InferenceKind, text: String) {
        self.inferences.push(Inference { frame, kind, text });
    }
}

/// Builds the requester plan of a connection.
pub fn plan(conn: &Connection, loss_seen: bool) -> ReqPlan {
    let first = conn.requests.first().map_or(0, |p| p.frame);
    let mut plan = ReqPlan {
        start_psn: start_psn(conn),
        mtu: Mtu::M4096,
        timeout: DEFAULT_TIMEOUT,
        retry_cnt: 7,
        rnr_retry: 7,
        qpn: conn.req_qpn.unwrap_or(0x11),
        wrs: Vec::new(),
        inferences: Vec::new(),
    };
    let text = format!(
        "requester started at PSN {}: the earliest PSN of the request stream",
        plan.start_psn.value()
    );
    plan.infer(first, InferenceKind::StartPsn, text);
    path_mtu(conn, &mut plan);
    timeout(conn, loss_seen, &mut plan);
    rnr_retry(conn, &mut plan);
    work_requests(conn, &mut plan);
    plan
}

fn start_psn(conn: &Connection) -> Psn {
    let Some(first) = conn.requests.first() else {
        return Psn::default();
    };
    conn.requests
        .iter()
        .map(|p| p.psn)
        .min_by_key(|p| p.diff(first.psn))
        .unwrap_or(first.psn)
}

fn path_mtu(conn: &Connection, plan: &mut ReqPlan) {
    match shown_mtu(conn) {
        Some((frame, m, _)) => {
            plan.mtu = m;
            let text = format!(
                "path MTU {}: the payload of the FIRST/MIDDLE packet at frame {frame}",
                m.bytes()
            );
            plan.infer(frame, InferenceKind::PathMtu, text);
        }
        None => {
            let frame = conn.requests.first().map_or(0, |p| p.frame);
            let text = "path MTU 4096: every message fits in one packet".to_string();
            plan.infer(frame, InferenceKind::PathMtu, text);
        }
    }
}

/// The longest silence before a resent PSN that no NAK or RNR NAK explains: a shorter one
/// may be a response's doing (an out-of-order READ response), and a timeout inferred too
/// short would have rocex resend where rxe did not, while one too long is caught up with
/// by moving the clock forward (`drive`).
fn timeout(conn: &Connection, loss_seen: bool, plan: &mut ReqPlan) {
    let mut best: Option<(f64, u64)> = None;
    for (i, req) in conn.requests.iter().enumerate() {
        if !goes_back_at(conn, i) {
            continue;
        }
        let prev_req = conn.requests[i - 1].ts;
        // Explained by a NAK or RNR NAK naming the PSN since rxe last sent it.
        let sent_before = conn.requests[..i]
            .iter()
            .rev()
            .find(|r| r.psn == req.psn)
            .map_or(0, |r| r.frame);
        let explained = conn.responses.iter().any(|r| {
            r.frame > sent_before
                && r.frame < req.frame
                && r.psn == req.psn
                && r.packet()
                    .and_then(|p| p.aeth)
                    .is_some_and(|a| a.syndrome.to_byte() & 0x60 != 0)
        });
        // Without loss, a request the responder had already answered is resent for no
        // timeout of its own (with loss, rxe may have dropped the answer as out of order).
        if explained || (!loss_seen && acked_before(conn, i, plan.mtu).is_some()) {
            continue;
        }
        let last_resp = conn.responses.iter().rev().find(|r| r.frame < req.frame);
        let quiet_from = last_resp.map_or(prev_req, |r| r.ts.max(prev_req));
        let gap = req.ts - quiet_from;
        if gap >= MIN_TIMEOUT_GAP && best.is_none_or(|(g, _)| gap > g) {
            best = Some((gap, req.frame));
        }
    }
    let Some((gap, frame)) = best else {
        let frame = conn.requests.first().map_or(0, |p| p.frame);
        let text = format!(
            "ACK timeout {DEFAULT_TIMEOUT}: no retransmission after a timeout shows it (the verbs examples' and perftest's)"
        );
        plan.infer(frame, InferenceKind::Timeout, text);
        return;
    };
    let units = (gap / 4.096e-6).max(1.0);
    plan.timeout = (units.log2().floor() as u8).clamp(1, 31);
    let text = format!(
        "ACK timeout {}: rxe resent at frame {frame} after {:.1} ms of silence",
        plan.timeout,
        gap * 1e3
    );
    plan.infer(frame, InferenceKind::Timeout, text);
}

/// `rnr_retry` 0 when rxe never resent a request an RNR NAK turned back.
fn rnr_retry(conn: &Connection, plan: &mut ReqPlan) {
    for r in &conn.responses {
        let Some(a) = r.packet().and_then(|p| p.aeth) else {
            continue;
        };
        if a.syndrome.to_byte() & 0xe0 != 0x20 {
            continue;
        }
        let again = conn
            .requests
            .iter()
            .any(|q| q.frame > r.frame && q.psn == r.psn);
        if !again {
            plan.rnr_retry = 0;
            let text = format!(
                "rnr_retry 0: rxe never resent PSN {} after the RNR NAK at frame {}",
                r.psn.value(),
                r.frame
            );
            plan.infer(r.frame, InferenceKind::RnrRetry, text);
            return;
        }
    }
}

/// The first captured packet of every PSN, by distance from the start PSN.
fn first_seen(conn: &Connection, start: Psn) -> BTreeMap<u32, &Pkt> {
    let mut seen = BTreeMap::new();
    for p in &conn.requests {
        seen.entry(p.psn.diff(start) as u32).or_insert(p);
    }
    seen
}

fn remote(va: u64, rkey: u32) -> Remote {
    Remote { addr: va, rkey }
}

fn work_requests(conn: &Connection, plan: &mut ReqPlan) {
    let start = plan.start_psn;
    let mtu = plan.mtu;
    let seen = first_seen(conn, start);
    let Some(&end) = seen.keys().next_back() else {
        return;
    };
    let mut at = 0u32;
    let mut guessed = 0;
    while at <= end {
        let Some(m) = seen
            .get(&at)
            .and_then(|p| message_at(p, &seen, at, end, mtu))
        else {
            at += 1;
            continue;
        };
        guessed += m.guessed;
        plan.wrs.push(WrPlan {
            op: m.op,
            len: m.len,
            solicited: m.solicited,
            psn: start.add(at),
            post_before: post_before(conn, start, at),
        });
        at += m.span;
    }
    let frame = conn.requests.first().map_or(0, |p| p.frame);
    let mut text = format!(
        "{} work requests: the messages of the request stream, each posted when a PSN of it or later is first captured",
        plan.wrs.len()
    );
    if guessed > 0 {
        text += &format!(
            "; {guessed} PSNs inside messages never captured, taken as full MIDDLE packets"
        );
    }
    plan.infer(frame, InferenceKind::WorkRequests, text);
}

/// A message read back from the stream.
struct Message {
    op: SendOp,
    len: u64,
    span: u32,
    solicited: bool,
    guessed: u32,
}

/// The message whose first packet is `p`, at `at` PSNs past the start; `None` when `p`
/// starts none (a READ restarted inside its response, a packet inside a message).
fn message_at(p: &Pkt, seen: &BTreeMap<u32, &Pkt>, at: u32, end: u32, mtu: Mtu) -> Option<Message> {
    let pkt = p.packet()?;
    let one = |op, len| Message {
        op,
        len,
        span: 1,
        solicited: false,
        guessed: 0,
    };
    Some(match p.info.operation {
        Operation::ReadRequest => {
            let r = pkt.reth?;
            let len = u64::from(r.dma_len);
            Message {
                span: packets(len, mtu),
                ..one(SendOp::Read(remote(r.va, r.rkey)), len)
            }
        }
        Operation::CompareSwap => {
            let a = pkt.atomic_eth?;
            let op = SendOp::CompareSwap {
                remote: remote(a.va, a.rkey),
                compare: a.compare,
                swap: a.swap_add,
            };
            one(op, 8)
        }
        Operation::FetchAdd => {
            let a = pkt.atomic_eth?;
            let op = SendOp::FetchAdd {
                remote: remote(a.va, a.rkey),
                add: a.swap_add,
            };
            one(op, 8)
        }
        Operation::AtomicWrite => {
            let r = pkt.reth?;
            let value = u64::from_ne_bytes(pkt.payload.get(..8)?.try_into().ok()?);
            one(
                SendOp::AtomicWrite {
                    remote: remote(r.va, r.rkey),
                    value,
                },
                8,
            )
        }
        Operation::Flush => {
            let (r, f) = (pkt.reth?, pkt.feth?);
            let op = SendOp::Flush {
                remote: remote(r.va, r.rkey),
                len: r.dma_len,
                placement: f.placement,
                selectivity: f.selectivity,
            };
            one(op, 0)
        }
        Operation::Send | Operation::Write if p.info.position.starts() => {
            let (last, summed, span, guessed) = message(seen, at, end, mtu);
            let last = last.and_then(Pkt::packet);
            let imm = last.as_ref().and_then(|l| l.immdt.map(|i| i.data));
            let inv = last.as_ref().and_then(|l| l.ieth.map(|i| i.rkey));
            let op = match (pkt.reth, imm, inv) {
                (Some(r), Some(i), _) => SendOp::WriteWithImm(remote(r.va, r.rkey), i),
                (Some(r), None, _) => SendOp::Write(remote(r.va, r.rkey)),
                (None, Some(i), _) => SendOp::SendWithImm(i),
                (None, None, Some(k)) => SendOp::SendWithInv(k),
                (None, None, None) => SendOp::Send,
            };
            Message {
                op,
                len: pkt.reth.map_or(summed, |r| u64::from(r.dma_len)),
                span,
                solicited: last.is_some_and(|l| l.bth.solicited),
                guessed,
            }
        }
        _ => return None,
    })
}

/// The last packet, length, PSN count and guessed PSNs of the SEND or WRITE starting at
/// `at`.
fn message<'a>(
    seen: &BTreeMap<u32, &'a Pkt>,
    at: u32,
    end: u32,
    mtu: Mtu,
) -> (Option<&'a Pkt>, u64, u32, u32) {
    let (mut len, mut guessed) = (0, 0);
    for k in at..=end {
        match seen.get(&k).copied() {
            Some(p) => {
                len += p.packet().map_or(0, |q| q.payload.len() as u64);
                if p.info.position.ends() {
                    return (Some(p), len, k - at + 1, guessed);
                }
            }
            None => {
                len += u64::from(mtu.bytes());
                guessed += 1;
            }
        }
    }
    (None, len, end - at + 1, guessed)
}

/// The index of the first captured request whose PSN reaches `at` PSNs past the start.
fn post_before(conn: &Connection, start: Psn, at: u32) -> usize {
    conn.requests
        .iter()
        .position(|p| p.psn.diff(start) >= at as i32)
        .unwrap_or(conn.requests.len())
}

/// Whether captured request `i` resends a PSN rxe had sent before.
pub(crate) fn goes_back_at(conn: &Connection, i: usize) -> bool {
    let psn = conn.requests[i].psn;
    conn.requests[..i].iter().any(|q| q.psn.diff(psn) >= 0)
}

/// The frame of a response captured before request `i` that answered all of it: an ACK or
/// an atomic ACK at or past its PSN, or for a READ, a response at or past its last PSN.
pub(crate) fn acked_before(conn: &Connection, i: usize, mtu: Mtu) -> Option<u64> {
    let req = &conn.requests[i];
    let last = match (req.info.operation, req.packet().and_then(|p| p.reth)) {
        (Operation::ReadRequest, Some(r)) => req.psn.add(packets(u64::from(r.dma_len), mtu) - 1),
        _ => req.psn,
    };
    conn.responses
        .iter()
        .filter(|r| r.frame < req.frame && r.psn.diff(last) >= 0)
        .find(|r| {
            r.packet()
                .is_some_and(|p| p.aeth.is_none_or(|a| a.syndrome.to_byte() & 0x60 == 0))
        })
        .map(|r| r.frame)
}
