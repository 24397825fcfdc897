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
    /// print only failures and a summary line; exit non-zero on any failure.
    #[arg(long)]
    check: bool,
    /// Treat UDP port P as RoCE too (4791 always is). Repeatable.
    #[arg(long = "roce-port", value_name = "P")]
    roce_ports: Vec<u16>,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let frames = match capture::read(&args.file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rocex dump: {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    let ports = Ports::with(&args.roce_ports);
    let t0 = frames.first().map_or(0.0, |f| f.ts);
    let mut out = BufWriter::new(io::stdout().lock());
    let mut tally = Tally::default();
    for (i, c) in frames.iter().enumerate() {
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
    if args.check && tally.bad > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
