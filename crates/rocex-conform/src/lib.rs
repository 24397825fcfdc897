/*! Conformance by replay: does rocex's responder answer a request stream as kernel rxe did?

A capture of two rxe peers holds, for every RC connection, the requests one side sent and
the responses the other side returned. [`replay_frames`] finds each connection
([`connection`]), reads from the capture what it can show about the responder's setup
and infers, printing each inference, only what it cannot show ([`infer`]), feeds the
captured requests in order into a fresh `rocex_proto::Engine` set up as that responder
([`replay`]), and pairs what the engine emits with what rxe emitted, in order, per
connection ([`compare`]). The result is a [`Report`]: mismatch and inference lines and
the totals line `connections=N requests=N responses=N matched=N mismatched=N inferred=N`.

Compared for every response: opcode, PSN, AETH syndrome and MSN, payload length and the
atomic original value. READ payload bytes are not compared: the responder's memory before
the capture is unknown, and seeding it from the capture would make the comparison empty.
*/
#![forbid(unsafe_code)]

mod cm_pairs;
pub mod compare;
pub mod connection;
mod error;
pub mod infer;
mod memory;
pub mod replay;
mod report;
pub mod request;
pub mod requester;
mod response;
mod setup;

use std::path::Path;

use rocex_dump::capture::{self, Captured};

pub use error::ConformError;
pub use report::{Line, Report, Totals};
pub use response::Response;

/// What to replay and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// UDP destination ports that carry RoCE besides 4791.
    pub roce_ports: Vec<u16>,
    /// Also report every matched response and the settings of each replayed QP.
    pub verbose: bool,
    /// Replay requesters with rocex's own recovery rather than rxe's timing
    /// (`Config::rxe_recovery` off): the report then shows where rocex goes back sooner.
    pub rocex_recovery: bool,
}

impl Options {
    fn is_roce_port(&self, port: u16) -> bool {
        port == rocex_wire::ROCE_V2_PORT || self.roce_ports.contains(&port)
    }
}

/// Replays every RC connection of the capture at `path`; of a file cut short, the intact
/// frames (the report then fails and says where the file ends).
pub fn replay_file(path: &Path, opts: &Options) -> Result<Report, ConformError> {
    from_file(path, |frames| replay_frames(frames, opts))
}

/// Replays the requester of every RC connection of the capture at `path`.
pub fn replay_requester_file(path: &Path, opts: &Options) -> Result<Report, ConformError> {
    from_file(path, |frames| replay_requester_frames(frames, opts))
}

/// Replays every RC connection found in `frames` (numbered from 1 in the report).
pub fn replay_frames(frames: &[Captured], opts: &Options) -> Result<Report, ConformError> {
    each_connection(frames, opts, |conns, report| {
        let plans: Vec<infer::Plan> = conns.iter().map(infer::plan).collect();
        let loss_seen = plans.iter().any(|p| p.shows_loss);
        for (conn, plan) in conns.iter().zip(&plans) {
            report.planned(conn, &plan.inferences, || plan.settings());
            let run = replay::run(conn, plan)?;
            compare::compare(conn, plan, &run, loss_seen, report);
        }
        Ok(())
    })
}

/// Replays the requester of every RC connection found in `frames`: rocex's requester,
/// given the work requests rxe's sent and rxe's responses, must send what rxe sent.
pub fn replay_requester_frames(
    frames: &[Captured],
    opts: &Options,
) -> Result<Report, ConformError> {
    each_connection(frames, opts, |conns, report| {
        let loss_seen = conns.iter().any(infer::shows_loss);
        for conn in conns {
            let plan = requester::plan::plan(conn, loss_seen);
            report.planned(conn, &plan.inferences, || plan.settings());
            requester::drive::run(conn, &plan, loss_seen, !opts.rocex_recovery, report)?;
        }
        Ok(())
    })
}

/// Reads the capture at `path` and replays its intact frames.
fn from_file(
    path: &Path,
    replay: impl FnOnce(&[Captured]) -> Result<Report, ConformError>,
) -> Result<Report, ConformError> {
    let cap = capture::open(path)?;
    let mut report = replay(&cap.frames)?;
    report.truncated_after = cap.truncated_after();
    Ok(report)
}

/// Groups `frames` into connections and has `replay` replay them into a report that
/// already lists what was skipped or damaged.
fn each_connection(
    frames: &[Captured],
    opts: &Options,
    replay: impl FnOnce(&[connection::Connection], &mut Report) -> Result<(), ConformError>,
) -> Result<Report, ConformError> {
    let split = connection::split(frames, |p| opts.is_roce_port(p));
    if split.roce_frames == 0 {
        return Err(ConformError::NothingToReplay);
    }
    let mut report = Report::new(opts.verbose);
    report.skipped = split.skipped;
    report.damage(split.damaged);
    replay(&split.connections, &mut report)?;
    report.totals.connections = split.connections.len() as u64;
    Ok(report)
}
