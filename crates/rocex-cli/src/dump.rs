//! `rocex dump`: a tcpdump for RoCE v2 captures, and the capture conformance check.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use rocex_dump::{Ports, Tally, Verdict, analyze, capture};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The capture (pcap or pcapng, Ethernet link type).
    file: PathBuf,
    /// Print one JSON object per frame instead of a line.
    #[arg(long)]
    json: bool,
    /// Check that every RoCE frame parses, has a valid ICRC and re-emits to the same bytes;
    /// print only failures and a summary line; exit non-zero on any failure, and when the
    /// capture holds no RoCE frame at all.
    #[arg(long)]
    check: bool,
    /// Treat UDP port P as RoCE too (4791 always is). Repeatable.
    #[arg(long = "roce-port", value_name = "P")]
    roce_ports: Vec<u16>,
}

/// Exit status of a capture that could not be read whole.
const UNREADABLE: u8 = 2;

pub(crate) fn run(args: &Args) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("rocex dump: {}: {e}", args.file.display());
        ExitCode::from(UNREADABLE)
    };
    let cap = match capture::open(&args.file) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let ports = Ports::with(&args.roce_ports);
    let t0 = cap.frames.first().map_or(0.0, |f| f.ts);
    let mut out = BufWriter::new(io::stdout().lock());
    let mut tally = Tally::default();
    for (i, c) in cap.frames.iter().enumerate() {
        let a = analyze(i as u64 + 1, c.ts, &c.data, &ports);
        tally.add(&a.verdict);
        let written = if args.check {
            match &a.verdict {
                Verdict::Bad(why) => writeln!(
                    out,
                    "frame {}: {why}: {}",
                    a.summary.frame,
                    a.summary.line(t0)
                ),
                _ => Ok(()),
            }
        } else if args.json {
            serde_json::to_writer(&mut out, &a.summary)
                .map_err(io::Error::from)
                .and_then(|()| writeln!(out))
        } else {
            writeln!(out, "{}", a.summary.line(t0))
        };
        if written.is_err() {
            // stdout closed (e.g. piped into head): stop quietly.
            return ExitCode::SUCCESS;
        }
    }
    if args.check {
        let _ = writeln!(out, "{tally}");
    }
    let _ = out.flush();
    if let Some(e) = cap.truncation() {
        return fail(&e);
    }
    if args.check && tally.roce == 0 {
        eprintln!(
            "rocex dump --check: {}: no RoCE frame: nothing to check",
            args.file.display()
        );
        return ExitCode::FAILURE;
    }
    if args.check && tally.bad > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
