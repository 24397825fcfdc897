//! Reading RoCE v2 captures and saying what is in them.
//!
//! [`capture`] reads pcap and pcapng files; [`analyze`] parses one frame, checks its ICRC
//! and its round trip, and gives a [`summary::FrameSummary`] that prints as a tcpdump-like
//! line or serializes as JSON. `rocex dump` and the conformance tests share this code.
//!
//! Captures are untrusted input: the crate holds no `unsafe` code, and the compiler keeps
//! it so.
#![forbid(unsafe_code)]

pub mod capture;
pub mod summary;

use rocex_wire::ROCE_V2_PORT;
use rocex_wire::frame::{Frame, IcrcCheck};

pub use summary::FrameSummary;

/// Which UDP destination ports carry RoCE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports(Vec<u16>);

impl Ports {
    /// Port 4791 and `extra`.
    pub fn with(extra: &[u16]) -> Self {
        let mut v = vec![ROCE_V2_PORT];
        v.extend_from_slice(extra);
        Self(v)
    }

    /// True when `port` carries RoCE.
    pub fn contains(&self, port: u16) -> bool {
        self.0.contains(&port)
    }
}

impl Default for Ports {
    fn default() -> Self {
        Self::with(&[])
    }
}

/// What `--check` says of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not a RoCE frame (not UDP to a RoCE port): not checked.
    NotRoce,
    /// Parses, carries a valid ICRC and re-emits to the same bytes.
    Ok,
    /// A RoCE frame that fails, and why.
    Bad(String),
}

/// The result of analysing one frame.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// What the frame holds.
    pub summary: FrameSummary,
    /// Whether it passes the check.
    pub verdict: Verdict,
}

/// Parses a frame, checks its ICRC and that it re-emits to the identical bytes.
pub fn analyze(index: u64, ts: f64, data: &[u8], ports: &Ports) -> Analysis {
    let mut summary = FrameSummary::outer(index, ts, data);
    if !summary.dport.is_some_and(|p| ports.contains(p)) || summary.proto.as_deref() != Some("UDP")
    {
        return Analysis {
            summary,
            verdict: Verdict::NotRoce,
        };
    }
    summary.roce = true;
    let frame = match Frame::parse_with(data, |p| ports.contains(p)) {
        Ok(f) => f,
        Err(e) => {
            summary.error = Some(e.to_string());
            return Analysis {
                summary,
                verdict: Verdict::Bad(e.to_string()),
            };
        }
    };
    let check = frame.check_icrc();
    summary.fill(&frame, check);
    let verdict = match check {
        IcrcCheck::Invalid { computed, found } => Verdict::Bad(format!(
            "ICRC mismatch: computed {computed:#010x}, found {found:#010x}"
        )),
        IcrcCheck::Valid(form) => {
            let mut repr = frame.repr.clone();
            repr.icrc_form = form;
            round_trip(&repr, data)
        }
    };
    Analysis { summary, verdict }
}

fn round_trip(repr: &rocex_wire::FrameRepr<'_>, data: &[u8]) -> Verdict {
    let mut out = vec![0u8; repr.buffer_len()];
    match repr.emit(&mut out) {
        Err(e) => Verdict::Bad(format!("re-emit failed: {e}")),
        Ok(n) if out[..n] == *data => Verdict::Ok,
        Ok(n) => {
            let at = out[..n]
                .iter()
                .zip(data)
                .position(|(a, b)| a != b)
                .unwrap_or(n.min(data.len()));
            Verdict::Bad(format!(
                "re-emitted frame differs from the capture at byte {at} ({n} bytes emitted, {} captured)",
                data.len()
            ))
        }
    }
}

/// Counts for the summary line of `--check`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Frames read.
    pub frames: u64,
    /// RoCE frames among them.
    pub roce: u64,
    /// RoCE frames that passed.
    pub ok: u64,
    /// RoCE frames that failed.
    pub bad: u64,
}

impl Tally {
    /// Counts one verdict.
    pub fn add(&mut self, v: &Verdict) {
        self.frames += 1;
        match v {
            Verdict::NotRoce => {}
            Verdict::Ok => {
                self.roce += 1;
                self.ok += 1;
            }
            Verdict::Bad(_) => {
                self.roce += 1;
                self.bad += 1;
            }
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "frames={} roce={} ok={} bad={}",
            self.frames, self.roce, self.ok, self.bad
        )
    }
}
