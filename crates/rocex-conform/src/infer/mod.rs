//! What the capture shows about the responder's setup, and what has to be inferred.
//!
//! Read from the capture (and still printed and counted, since the replay depends on the
//! reading): the starting PSN, the path MTU, the RNR timer code and the rkeys in use.
//! Inferred because no capture can show them: which rkeys are valid, over which ranges and
//! with which rights (a NAK 0x62 marks a request's rkey, range or right as invalid); which
//! FLUSH placement types the responder QP allows (a NAK 0x61 to a FLUSH says it does not); which
//! rkeys reach the same memory (their ranges overlap: one buffer, as a window over an MR
//! is); whether an IETH rkey names a memory window or a memory region (the MSN of rxe's
//! answer); the memory an atomic found before the first atomic on an address; when the
//! receive queue was empty (an RNR NAK). `docs/rxe-behaviour.md` has the rxe rules they
//! rest on. Responses lost before the capture point are inferred later, while pairing
//! ([`crate::compare`]).
//!
//! Nothing else is inferred: in particular READ data is not seeded (only lengths are
//! compared) and no response is made up.

use core::fmt;

use rocex_proto::Access;
use rocex_proto::verbs::Mtu;
use rocex_wire::opcode::{Operation, Position};
use rocex_wire::{NakCode, Opcode, Psn, Syndrome};

use crate::connection::{Connection, Pkt};
use crate::response::Response;
use crate::setup::RXE_MAX_QP_RD_ATOM;

mod access;
mod keys;
#[cfg(test)]
mod lab;

use access::qp_access;
use keys::{atomics, memories, rkeys, windows};

/// Regions larger than this are not allocated (a capture naming such a range is odd).
const MAX_REGION: u64 = 256 << 20;

/// The kinds of inference, as printed: the responder replay's, then the requester
/// replay's ([`crate::requester`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InferenceKind {
    /// The responder's expected PSN, or the requester's first PSN, at the start.
    StartPsn,
    /// The path MTU.
    PathMtu,
    /// The responder's RNR timer code.
    RnrTimer,
    /// An rkey valid over a range with some rights.
    RkeyValid,
    /// An rkey, range or right refused with NAK 0x62.
    RkeyInvalid,
    /// The FLUSH placement types the responder QP allows.
    QpAccess,
    /// An IETH rkey that names a type-2 memory window.
    MemoryWindow,
    /// An IETH rkey that names a memory region, which rxe cannot invalidate.
    MemoryRegion,
    /// rkeys whose ranges overlap reach one memory.
    SharedMemory,
    /// Memory contents an atomic found.
    AtomicOrig,
    /// The receive queue was empty (RNR NAK).
    RqEmpty,
    /// A response lost before the capture point.
    ResponseLost,
    /// A retransmitted request at the end of the capture that nothing answered: the
    /// responder's QP was gone (its application had exited) or the answer was lost.
    UnansweredAtEnd,
    /// The requester's ACK timeout code.
    Timeout,
    /// The requester's `rnr_retry`.
    RnrRetry,
    /// The requester's work requests, read back from its request stream.
    WorkRequests,
    /// A request rxe sent that was lost before the capture point.
    RequestLost,
    /// rxe resent a request already acknowledged, with nothing lost.
    RxeResentAcked,
    /// rxe resent an ATOMIC_WRITE with RETH va 0.
    RxeAtomicWriteVa,
}

impl fmt::Display for InferenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::StartPsn => "start-psn",
            Self::PathMtu => "path-mtu",
            Self::RnrTimer => "rnr-timer",
            Self::RkeyValid => "rkey-valid",
            Self::RkeyInvalid => "rkey-invalid",
            Self::QpAccess => "qp-access",
            Self::MemoryWindow => "memory-window",
            Self::MemoryRegion => "memory-region",
            Self::SharedMemory => "shared-memory",
            Self::AtomicOrig => "atomic-orig",
            Self::RqEmpty => "rq-empty",
            Self::ResponseLost => "response-lost",
            Self::UnansweredAtEnd => "unanswered-at-end",
            Self::Timeout => "timeout",
            Self::RnrRetry => "rnr-retry",
            Self::WorkRequests => "work-requests",
            Self::RequestLost => "request-lost",
            Self::RxeResentAcked => "rxe-resent-acked",
            Self::RxeAtomicWriteVa => "rxe-atomic-write-va",
        })
    }
}

/// One inference, for the report.
#[derive(Debug, Clone)]
pub struct Inference {
    /// The frame it rests on.
    pub frame: u64,
    /// What kind.
    pub kind: InferenceKind,
    /// What was inferred and from what.
    pub text: String,
}

/// A memory region to register with a captured rkey.
#[derive(Debug, Clone)]
pub struct MrPlan {
    /// The captured rkey.
    pub rkey: u32,
    /// First address.
    pub iova: u64,
    /// Length.
    pub len: u64,
    /// Rights (the union of those the accepted requests needed).
    pub access: Access,
    /// The memory it lies in, by index in [`Plan::memories`].
    pub memory: usize,
    /// The rkey names a type-2 window bound over the range (rxe's answer to a
    /// SEND_WITH_INV naming it says so), not a region.
    pub window: bool,
}

/// The bytes that one or more rkeys reach: the union of their ranges.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// First address.
    pub iova: u64,
    /// Length.
    pub len: u64,
}

/// An 8-byte value to place in memory before a request is replayed.
#[derive(Debug, Clone, Copy)]
pub struct Seed {
    /// Index of the request before which it is placed.
    pub request: usize,
    /// rkey of the region.
    pub rkey: u32,
    /// Address.
    pub va: u64,
    /// Value.
    pub value: u64,
}

/// How to set up and drive the responder of one connection.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Expected PSN at the start.
    pub start_psn: Psn,
    /// Path MTU.
    pub mtu: Mtu,
    /// RNR timer code.
    pub min_rnr_timer: u8,
    /// The responder QP's access flags.
    pub qp_access: Access,
    /// Regions (and bound windows) to register, each over a part of one of `memories`.
    pub mrs: Vec<MrPlan>,
    /// The memories the regions lie in.
    pub memories: Vec<Memory>,
    /// rkeys of type-2 windows to allocate unbound (named by SEND_WITH_INV only).
    pub mws: Vec<u32>,
    /// Memory to seed.
    pub seeds: Vec<Seed>,
    /// Per request: rxe answered it with an RNR NAK, so no receive WQE was posted.
    pub rnr: Vec<bool>,
    /// Per request: the captured response that answers it, by index.
    pub answers: Vec<Option<usize>>,
    /// Per request: it carried the PSN the responder expected when it arrived, so rxe
    /// executed it (retransmissions of executed requests are duplicates, and requests past
    /// a gap are dropped; neither touches memory).
    pub executed: Vec<bool>,
    /// The captured responses in compared form.
    pub responses: Vec<Response>,
    /// Whether the capture shows loss on this connection (PSN gaps, sequence NAKs,
    /// retransmissions); lost responses are inferred only then.
    pub shows_loss: bool,
    /// Requester QPN (for the responses' destination).
    pub req_qpn: u32,
    /// Inferences made.
    pub inferences: Vec<Inference>,
}

impl Plan {
    /// The setup, for verbose output.
    pub fn settings(&self) -> String {
        format!(
            "settings: start_psn={} path_mtu={} min_rnr_timer={} max_dest_rd_atomic={} qp_access={} requester_qpn={:#x} mrs={} mws={} loss={}",
            self.start_psn.value(),
            self.mtu.bytes(),
            self.min_rnr_timer,
            RXE_MAX_QP_RD_ATOM,
            self.qp_access,
            self.req_qpn,
            self.mrs.len(),
            self.mws.len(),
            self.shows_loss
        )
    }

    fn infer(&mut self, frame: u64, kind: InferenceKind, text: String) {
        self.inferences.push(Inference { frame, kind, text });
    }
}

/// Builds the plan of a connection.
pub fn plan(conn: &Connection) -> Plan {
    let mut plan = sequence(conn);
    qp_access(conn, &mut plan);
    rkeys(conn, &mut plan);
    windows(conn, &mut plan);
    memories(conn, &mut plan);
    atomics(conn, &mut plan);
    plan
}

/// Whether the capture shows loss on the connection ([`Plan::shows_loss`]), without
/// inferring the responder's memory.
pub(crate) fn shows_loss(conn: &Connection) -> bool {
    sequence(conn).shows_loss
}

/// The plan as far as the PSN sequence shows it: the start PSN, path MTU, RNR NAKs, which
/// requests were executed and whether anything was lost.
fn sequence(conn: &Connection) -> Plan {
    let responses: Vec<Response> = conn
        .responses
        .iter()
        .map(|p| {
            p.packet()
                .map_or(Response::unparsed(p), |r| Response::of(&r))
        })
        .collect();
    let mut plan = Plan {
        start_psn: Psn::default(),
        mtu: Mtu::M4096,
        min_rnr_timer: 0,
        qp_access: access::REMOTE,
        mrs: Vec::new(),
        memories: Vec::new(),
        mws: Vec::new(),
        seeds: Vec::new(),
        rnr: vec![false; conn.requests.len()],
        answers: claim_answers(conn, &responses),
        executed: vec![false; conn.requests.len()],
        responses,
        shows_loss: false,
        req_qpn: conn.req_qpn.unwrap_or(0),
        inferences: Vec::new(),
    };
    start_psn(conn, &mut plan);
    path_mtu(conn, &mut plan);
    rnr(conn, &mut plan);
    plan.shows_loss = walk_psns(conn, &mut plan);
    plan
}

impl Response {
    /// A placeholder for a captured response that no longer parses (never expected).
    fn unparsed(p: &Pkt) -> Self {
        Self {
            opcode: p.info_opcode(),
            psn: p.psn,
            aeth: None,
            payload_len: 0,
            orig: None,
        }
    }
}

impl Pkt {
    fn info_opcode(&self) -> Opcode {
        Opcode(self.udp.first().copied().unwrap_or(0))
    }
}

/// Which captured response answers each request: the first unclaimed one after it, with
/// its PSN and a kind that fits, before the request is sent again. A PSN-sequence NAK
/// answers no particular request and is never claimed.
fn claim_answers(conn: &Connection, responses: &[Response]) -> Vec<Option<usize>> {
    let mut claimed = vec![false; responses.len()];
    let mut out = vec![None; conn.requests.len()];
    for (i, req) in conn.requests.iter().enumerate() {
        let until = conn.requests[i + 1..]
            .iter()
            .find(|r| r.psn == req.psn)
            .map_or(u64::MAX, |r| r.frame);
        let op = req.info.operation;
        let fits = |r: &Response| {
            let name = r.opcode.info().map(|i| (i.operation, i.position));
            let nak = r.aeth_syndrome().is_some_and(|s| !s.is_ack())
                && !r.is_nak(NakCode::PsnSequenceError);
            nak || match op {
                Operation::ReadRequest => {
                    matches!(
                        name,
                        Some((Operation::ReadResponse, Position::First | Position::Only))
                    )
                }
                Operation::CompareSwap | Operation::FetchAdd => {
                    r.opcode == Opcode::RC_ATOMIC_ACKNOWLEDGE
                }
                Operation::AtomicWrite | Operation::Flush => {
                    r.opcode == Opcode::RC_RDMA_READ_RESPONSE_ONLY
                }
                _ => {
                    r.opcode == Opcode::RC_ACKNOWLEDGE
                        && r.aeth_syndrome().is_some_and(|s| s.is_ack())
                }
            }
        };
        let found = conn.responses.iter().enumerate().position(|(j, p)| {
            !claimed[j]
                && p.frame > req.frame
                && p.frame < until
                && responses[j].psn == req.psn
                && fits(&responses[j])
        });
        if let Some(j) = found {
            claimed[j] = true;
            out[i] = Some(j);
        }
    }
    out
}

fn start_psn(conn: &Connection, plan: &mut Plan) {
    let Some(first) = conn.requests.first() else {
        return;
    };
    plan.start_psn = first.psn;
    let mut why = format!("the first request's PSN (frame {})", first.frame);
    if let Some(n) = plan
        .responses
        .first()
        .filter(|r| r.is_nak(NakCode::PsnSequenceError))
    {
        if n.psn.is_before(first.psn) {
            plan.start_psn = n.psn;
            why = format!("the PSN-sequence NAK at frame {}", conn.responses[0].frame);
        }
    }
    let text = format!(
        "responder expected PSN {} at the start: {why}",
        plan.start_psn.value()
    );
    plan.infer(first.frame, InferenceKind::StartPsn, text);
}

fn mtu_of(bytes: usize) -> Option<Mtu> {
    [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() as usize == bytes)
}

/// The path MTU the payload of a FIRST or MIDDLE packet shows, a request's before a READ
/// response's: its frame, the MTU, and what kind of packet it is.
pub(crate) fn shown_mtu(conn: &Connection) -> Option<(u64, Mtu, &'static str)> {
    let shown = |pkts: &[Pkt], what| {
        pkts.iter()
            .filter(|p| {
                matches!(p.info.position, Position::First | Position::Middle) && p.info.payload
            })
            .find_map(|p| Some((p.frame, mtu_of(p.packet()?.payload.len())?, what)))
    };
    shown(&conn.requests, "request").or_else(|| shown(&conn.responses, "READ response"))
}

/// Packets a message of `len` bytes spans at `mtu`: at least one.
pub(crate) fn packets(len: u64, mtu: Mtu) -> u32 {
    len.div_ceil(u64::from(mtu.bytes())).max(1) as u32
}

fn path_mtu(conn: &Connection, plan: &mut Plan) {
    if let Some((frame, m, what)) = shown_mtu(conn) {
        plan.mtu = m;
        let text = format!(
            "path MTU {}: the payload of the FIRST/MIDDLE {what} at frame {frame}",
            m.bytes()
        );
        plan.infer(frame, InferenceKind::PathMtu, text);
        return;
    }
    // READ PSN spacing: a READ of L bytes followed by a new request n PSNs later.
    for w in conn.requests.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let Some(len) = a
            .packet()
            .and_then(|p| p.reth)
            .map(|r| u64::from(r.dma_len))
        else {
            continue;
        };
        let n = b.psn.diff(a.psn);
        if a.info.operation != Operation::ReadRequest || n < 2 {
            continue;
        }
        let fit = [Mtu::M4096, Mtu::M2048, Mtu::M1024, Mtu::M512, Mtu::M256]
            .into_iter()
            .find(|&m| packets(len, m) == n as u32);
        if let Some(m) = fit {
            plan.mtu = m;
            let text = format!(
                "path MTU {}: the READ of {len} bytes at frame {} spans {n} PSNs before the next request",
                m.bytes(),
                a.frame
            );
            plan.infer(a.frame, InferenceKind::PathMtu, text);
            return;
        }
    }
    if let Some(first) = conn.requests.first() {
        let text = "path MTU 4096: no multi-packet message shows it; every packet fits".to_string();
        plan.infer(first.frame, InferenceKind::PathMtu, text);
    }
}

fn rnr(conn: &Connection, plan: &mut Plan) {
    let mut timer_shown = false;
    for (i, req) in conn.requests.iter().enumerate() {
        let Some(j) = plan.answers[i] else { continue };
        let r = plan.responses[j];
        let Some(Syndrome::RnrNak { timer }) = r.aeth_syndrome() else {
            continue;
        };
        plan.rnr[i] = true;
        let frame = conn.responses[j].frame;
        if !timer_shown {
            timer_shown = true;
            plan.min_rnr_timer = timer;
            let text = format!(
                "min_rnr_timer {}: the RNR NAK at frame {frame}",
                plan.min_rnr_timer
            );
            plan.infer(frame, InferenceKind::RnrTimer, text);
        }
        let text = format!(
            "receive queue empty at frame {}: rxe answered RNR NAK at frame {frame}",
            req.frame
        );
        plan.infer(req.frame, InferenceKind::RqEmpty, text);
    }
}

/// Follows the responder's expected PSN through the requests, marking which ones were
/// executed; returns whether the capture shows loss on this connection: a PSN-sequence
/// NAK, a gap in the request PSNs, or a request sent again that had not been answered
/// with an RNR NAK.
fn walk_psns(conn: &Connection, plan: &mut Plan) -> bool {
    let mut loss = plan
        .responses
        .iter()
        .any(|r| r.is_nak(NakCode::PsnSequenceError));
    let mut next = plan.start_psn;
    for (i, req) in conn.requests.iter().enumerate() {
        let d = req.psn.diff(next);
        if d > 0 {
            loss = true;
            continue;
        }
        if d < 0 {
            let rnr_before = conn.requests[..i]
                .iter()
                .zip(&plan.rnr)
                .any(|(r, &rnr)| rnr && r.psn == req.psn);
            loss |= !rnr_before;
            continue;
        }
        let span = match (req.info.operation, req.packet().and_then(|p| p.reth)) {
            (Operation::ReadRequest, Some(r)) => packets(u64::from(r.dma_len), plan.mtu),
            _ => 1,
        };
        if !plan.rnr[i] {
            plan.executed[i] = true;
            next = req.psn.add(span);
        }
    }
    loss
}
