//! Pairing what the engine emitted with what rxe emitted, in order, per connection.
//!
//! Both streams are in order (rxe answers one connection's requests in order, and the
//! capture point sees requests in the order the responder got them), so they are walked
//! together. Where they part, a short look-ahead decides which side sent something the
//! other did not. An engine response with no captured counterpart is inferred lost before
//! the capture point only when the capture shows loss on the connection and the
//! requester's later behaviour shows the response's effect: it sent again a PSN the
//! response covered, or a later response acknowledges that PSN or beyond. Every other
//! difference is a mismatch.

use rocex_wire::{Opcode, Syndrome};

use crate::Report;
use crate::connection::Connection;
use crate::infer::{InferenceKind, Plan};
use crate::replay::{Emitted, Run};

/// How far ahead the pairing looks to resynchronize.
const LOOKAHEAD: usize = 8;

/// Compares one connection's replay with its capture and records the outcome in `report`.
///
/// `loss_seen` says whether the capture shows loss anywhere (a PSN gap, a sequence NAK or
/// a retransmission on any connection): the lab applies loss to both guests at once, so a
/// connection whose only loss was a response shows it through the other connections. In a
/// capture without loss, every missing response is a mismatch.
pub fn compare(conn: &Connection, plan: &Plan, run: &Run, loss_seen: bool, report: &mut Report) {
    report.totals.requests += conn.requests.len() as u64;
    report.totals.responses += conn.responses.len() as u64;
    let emitted = &run.emitted;
    let captured = &plan.responses;
    let (mut at_emitted, mut at_captured) = (0, 0);
    while at_emitted < emitted.len() || at_captured < captured.len() {
        if at_emitted < emitted.len()
            && at_captured < captured.len()
            && emitted[at_emitted].resp == captured[at_captured]
        {
            report.matched(
                conn,
                conn.responses[at_captured].frame,
                &captured[at_captured],
            );
            at_emitted += 1;
            at_captured += 1;
            continue;
        }
        if at_emitted < emitted.len() {
            let resync =
                (at_emitted + 1..(at_emitted + LOOKAHEAD).min(emitted.len())).find(|&ahead| {
                    at_captured < captured.len() && emitted[ahead].resp == captured[at_captured]
                });
            let upto = resync.unwrap_or(if at_captured == captured.len() {
                at_emitted + 1
            } else {
                at_emitted
            });
            if upto > at_emitted
                && (at_emitted..upto)
                    .all(|unmatched| lost(conn, plan, &emitted[unmatched], loss_seen))
            {
                for em in &emitted[at_emitted..upto] {
                    let frame = conn.requests[em.request].frame;
                    let text = format!(
                        "rxe's answer {} to frame {frame} was lost before the capture point",
                        em.resp
                    );
                    report.infer(conn, frame, InferenceKind::ResponseLost, &text);
                }
                at_emitted = upto;
                continue;
            }
            if let Some(ahead) = (at_captured + 1..(at_captured + LOOKAHEAD).min(captured.len()))
                .find(|&ahead| captured[ahead] == emitted[at_emitted].resp)
            {
                for (skipped, captured_resp) in
                    captured.iter().enumerate().take(ahead).skip(at_captured)
                {
                    report.mismatch(
                        conn,
                        request_before(conn, skipped),
                        Some(captured_resp),
                        None,
                    );
                }
                at_captured = ahead;
                continue;
            }
            if let Some(ahead) = resync {
                for em in &emitted[at_emitted..ahead] {
                    report.mismatch(conn, conn.requests[em.request].frame, None, Some(&em.resp));
                }
                at_emitted = ahead;
                continue;
            }
        }
        match (emitted.get(at_emitted), captured.get(at_captured)) {
            (Some(em), Some(captured_resp)) => {
                report.mismatch(
                    conn,
                    conn.requests[em.request].frame,
                    Some(captured_resp),
                    Some(&em.resp),
                );
                at_emitted += 1;
                at_captured += 1;
            }
            (Some(em), None) if unanswered_at_end(conn, em, loss_seen) => {
                let frame = conn.requests[em.request].frame;
                let text = format!(
                    "frame {frame} repeats a request and ends the capture unanswered; rxe's \
                     answer would be {} (its QP gone with its application, or the answer lost)",
                    em.resp
                );
                report.infer(conn, frame, InferenceKind::UnansweredAtEnd, &text);
                at_emitted += 1;
            }
            (Some(em), None) => {
                report.mismatch(conn, conn.requests[em.request].frame, None, Some(&em.resp));
                at_emitted += 1;
            }
            (None, Some(captured_resp)) => {
                report.mismatch(
                    conn,
                    request_before(conn, at_captured),
                    Some(captured_resp),
                    None,
                );
                at_captured += 1;
            }
            (None, None) => break,
        }
    }
}

/// Whether an engine response with no captured counterpart answers the requester's last
/// word: a retransmission (its PSN was sent before) after which the capture holds no request
/// and no response on the connection. rxe answers a duplicate (`docs/rxe-behaviour.md`,
/// items 3 and 4) unless its QP is gone, as when the peer application has exited (item
/// 16); the requester retransmits because the first answer was lost, which needs loss in
/// the capture.
fn unanswered_at_end(conn: &Connection, em: &Emitted, loss_seen: bool) -> bool {
    let req = &conn.requests[em.request];
    loss_seen
        && em.request + 1 == conn.requests.len()
        && conn.requests[..em.request].iter().any(|r| r.psn == req.psn)
        && conn.responses.iter().all(|r| r.frame < req.frame)
}

/// The frame of the request a captured response most likely followed: the claimed one, or
/// the last request captured before it.
fn request_before(conn: &Connection, response: usize) -> u64 {
    let at = conn.responses[response].frame;
    conn.requests
        .iter()
        .take_while(|r| r.frame < at)
        .last()
        .map_or(0, |r| r.frame)
}

/// Whether an engine response with no captured counterpart can be one rxe sent and the
/// lab's egress loss dropped. The requester must have shown its effect: it sent again a PSN
/// the response covered, or a later captured response acknowledges that PSN or beyond.
/// Without other signs of loss in the capture, only a plain ACK to a request with AckReq
/// set qualifies, and only when a later ACK coalesces it: rxe acknowledges every such
/// request (`docs/rxe-behaviour.md`, item 1), so its absence can only be loss.
fn lost(conn: &Connection, plan: &Plan, em: &Emitted, loss_seen: bool) -> bool {
    let req = &conn.requests[em.request];
    let psn = em.resp.psn;
    let resent = conn.requests[em.request + 1..]
        .iter()
        .any(|r| r.psn.diff(psn) <= 0);
    let covered = conn
        .responses
        .iter()
        .zip(&plan.responses)
        .any(|(seen, resp)| {
            seen.frame > req.frame
                && resp.psn.diff(psn) >= 0
                && resp.aeth_syndrome().is_some_and(Syndrome::is_ack)
        });
    if loss_seen {
        return resent || covered;
    }
    let plain_ack = em.resp.opcode == Opcode::RC_ACKNOWLEDGE
        && em.resp.aeth_syndrome().is_some_and(Syndrome::is_ack);
    let ack_req = req.packet().is_some_and(|p| p.bth.ack_req);
    plain_ack && ack_req && covered
}
