//! The report: one line per mismatch and per inference, and the totals line.

use core::fmt;

use crate::connection::{Connection, Skipped};
use crate::infer::InferenceKind;
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
    /// Verbose detail (matches, settings).
    Note(String),
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mismatch(s) | Self::Inference(s) | Self::Note(s) => f.write_str(s),
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
    verbose: bool,
}

impl Report {
    pub(crate) fn new(verbose: bool) -> Self {
        Self {
            verbose,
            ..Self::default()
        }
    }

    pub(crate) fn infer(&mut self, conn: &Connection, frame: u64, kind: InferenceKind, text: &str) {
        self.totals.inferred += 1;
        self.lines.push(Line::Inference(format!(
            "infer {} frame={frame} {kind}: {text}",
            conn.label()
        )));
    }

    pub(crate) fn mismatch(
        &mut self,
        conn: &Connection,
        frame: u64,
        rxe: Option<&Response>,
        rocex: Option<&Response>,
    ) {
        self.totals.mismatched += 1;
        let show =
            |r: Option<&Response>| r.map_or_else(|| "nothing".to_string(), Response::to_string);
        self.lines.push(Line::Mismatch(format!(
            "mismatch {} frame={frame}: rxe sent {}; rocex sent {}",
            conn.label(),
            show(rxe),
            show(rocex)
        )));
    }

    pub(crate) fn matched(&mut self, conn: &Connection, frame: u64, r: &Response) {
        self.totals.matched += 1;
        if self.verbose {
            self.lines.push(Line::Note(format!(
                "match {} frame={frame}: {r}",
                conn.label()
            )));
        }
    }

    pub(crate) fn note(&mut self, conn: &Connection, text: &str) {
        self.lines
            .push(Line::Note(format!("note {} {text}", conn.label())));
    }

    /// Whether any mismatch was found.
    pub fn failed(&self) -> bool {
        self.totals.mismatched > 0
    }

    /// The line that says what was skipped, if anything was.
    pub fn skipped_line(&self) -> Option<String> {
        let s = &self.skipped;
        (s.total() > 0).then(|| {
            format!(
                "skipped frames={} non_roce={} malformed={} cm_qp1={} ud={} uc={} cnp={} orphan_responses={}",
                s.total(),
                s.non_roce,
                s.malformed,
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
        write!(f, "{}", self.totals)
    }
}
