//! The report: one line per mismatch and per inference, and the totals line.

use core::fmt;

use crate::connection::{Connection, Damage, Skipped};
use crate::infer::{Inference, InferenceKind};
use crate::response::Response;

/// The counts of the last line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// RC connections replayed.
    pub connections: u64,
    /// Request packets replayed.
    pub requests: u64,
    /// Responses rxe sent that the capture holds.
    pub responses: u64,
    /// Captured responses rocex reproduced exactly.
    pub matched: u64,
    /// Differences: a response either side sent that the other did not, or sent differently.
    pub mismatched: u64,
    /// Inferences made.
    pub inferred: u64,
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "connections={} requests={} responses={} matched={} mismatched={} inferred={}",
            self.connections,
            self.requests,
            self.responses,
            self.matched,
            self.mismatched,
            self.inferred
        )
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// rxe and rocex differ.
    Mismatch(String),
    /// Something inferred.
    Inference(String),
    /// A frame dropped because the capture holds it damaged.
    Damaged(String),
    /// A difference on a connection with a damaged frame: not rocex's to answer for.
    Unchecked(String),
    /// Verbose detail (matches, settings).
    Note(String),
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mismatch(s)
            | Self::Inference(s)
            | Self::Damaged(s)
            | Self::Unchecked(s)
            | Self::Note(s) => f.write_str(s),
        }
    }
}

/// The outcome of a replay.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Lines in the order they arose.
    pub lines: Vec<Line>,
    /// Frames not replayed, by kind.
    pub skipped: Skipped,
    /// The totals.
    pub totals: Totals,
    /// RoCE frames dropped as damaged, in capture order.
    pub damaged: Vec<Damage>,
    /// Differences on connections with a damaged frame, not counted as mismatches.
    pub unchecked: u64,
    /// The capture file ends inside a record after this many intact frames.
    pub truncated_after: Option<u64>,
    verbose: bool,
}

impl Report {
    pub(crate) fn new(verbose: bool) -> Self {
        Self {
            verbose,
            ..Self::default()
        }
    }

    /// Records a connection's plan: its inferences, and in verbose output its settings.
    pub(crate) fn planned(
        &mut self,
        conn: &Connection,
        inferences: &[Inference],
        settings: impl FnOnce() -> String,
    ) {
        for inf in inferences {
            self.infer(conn, inf.frame, inf.kind, &inf.text);
        }
        if self.verbose {
            let note = format!("note {} {}", conn.label(), settings());
            self.lines.push(Line::Note(note));
        }
    }

    pub(crate) fn infer(&mut self, conn: &Connection, frame: u64, kind: InferenceKind, text: &str) {
        self.totals.inferred += 1;
        self.lines.push(Line::Inference(format!(
            "infer {} frame={frame} {kind}: {text}",
            conn.label()
        )));
    }

    /// Lists the damaged frames, one line each.
    pub(crate) fn damage(&mut self, damaged: Vec<Damage>) {
        for d in &damaged {
            self.lines.push(Line::Damaged(format!(
                "damaged frame={}: {}: dropped, as rxe drops it",
                d.frame, d.why
            )));
        }
        self.damaged = damaged;
    }

    pub(crate) fn mismatch(
        &mut self,
        conn: &Connection,
        frame: u64,
        rxe: Option<&Response>,
        rocex: Option<&Response>,
    ) {
        let show =
            |r: Option<&Response>| r.map_or_else(|| "nothing".to_string(), Response::to_string);
        self.differ(conn, frame, &show(rxe), &show(rocex));
    }

    /// Records a difference: a mismatch, or on a connection with a damaged frame, an
    /// unchecked difference (the replay dropped a frame rxe received whole).
    pub(crate) fn differ(&mut self, conn: &Connection, frame: u64, rxe: &str, rocex: &str) {
        let what = format!(
            "{} frame={frame}: rxe sent {rxe}; rocex sent {rocex}",
            conn.label()
        );
        match self.damaged.iter().find(|d| d.touches(conn)) {
            Some(d) => {
                self.unchecked += 1;
                self.lines.push(Line::Unchecked(format!(
                    "unchecked {what} (damaged frame {} on this connection)",
                    d.frame
                )));
            }
            None => {
                self.totals.mismatched += 1;
                self.lines.push(Line::Mismatch(format!("mismatch {what}")));
            }
        }
    }

    pub(crate) fn matched(&mut self, conn: &Connection, frame: u64, r: &dyn fmt::Display) {
        self.totals.matched += 1;
        if self.verbose {
            self.lines.push(Line::Note(format!(
                "match {} frame={frame}: {r}",
                conn.label()
            )));
        }
    }

    /// Whether the replay found a mismatch, or could not check everything: a difference
    /// after a damaged frame, or a capture cut short.
    pub fn failed(&self) -> bool {
        self.totals.mismatched > 0 || self.unchecked > 0 || self.truncated_after.is_some()
    }

    /// The line that counts the damaged frames and what they left unchecked, if any.
    pub fn damaged_line(&self) -> Option<String> {
        (!self.damaged.is_empty()).then(|| {
            format!(
                "damaged frames={} icrc_bad={} malformed={} unchecked={}",
                self.damaged.len(),
                self.skipped.icrc_bad,
                self.damaged.len() as u64 - self.skipped.icrc_bad,
                self.unchecked
            )
        })
    }

    /// The line that says what was skipped, if anything was.
    pub fn skipped_line(&self) -> Option<String> {
        let s = &self.skipped;
        (s.total() > 0).then(|| {
            format!(
                "skipped frames={} non_roce={} malformed={} icrc_bad={} cm_qp1={} ud={} uc={} cnp={} orphan_responses={}",
                s.total(),
                s.non_roce,
                s.malformed,
                s.icrc_bad,
                s.cm,
                s.ud,
                s.uc,
                s.cnp,
                s.orphan_responses
            )
        })
    }
}

impl fmt::Display for Report {
    /// Every line, the skipped line, and the totals line last.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        if let Some(s) = self.skipped_line() {
            writeln!(f, "{s}")?;
        }
        if let Some(s) = self.damaged_line() {
            writeln!(f, "{s}")?;
        }
        if let Some(after) = self.truncated_after {
            writeln!(f, "truncated capture after frame {after}")?;
        }
        write!(f, "{}", self.totals)
    }
}
