//! `rocex conform`: conformance against kernel rxe by replaying captures.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use rocex_conform::{Options, replay_file, replay_requester_file};

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Feed each RC connection's captured requests, in order, into a fresh rocex responder
    /// and compare its answers with kernel rxe's. Prints one line per mismatch, per
    /// inference and per damaged frame (a failed ICRC: dropped, as rxe drops it), then
    /// `connections=N requests=N responses=N matched=N mismatched=N inferred=N`; exits 1 on
    /// any mismatch, on a difference after a damaged frame and on a capture cut short (whose
    /// intact frames it replays), 2 when the capture cannot be read or holds no RoCE frame.
    Replay(ReplayArgs),
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The capture (pcap or pcapng, Ethernet link type).
    file: PathBuf,
    /// Treat UDP port P as RoCE too (4791 always is). Repeatable.
    #[arg(long = "roce-port", value_name = "P")]
    roce_ports: Vec<u16>,
    /// Also print every matched response and each replayed QP's settings.
    #[arg(long)]
    verbose: bool,
    /// Replay the requesters instead: post the work requests each connection's request
    /// stream shows into a fresh rocex requester, hand it rxe's responses at their
    /// captured times, and compare the requests it sends with rxe's.
    #[arg(long)]
    requester: bool,
    /// With --requester: rocex's own recovery (a READ restarted at its first gap, an early
    /// retransmit deadline) instead of rxe's timing, so that the report shows where rocex
    /// goes back sooner than rxe did (docs/wire.md, "Recovery").
    #[arg(long, requires = "requester")]
    rocex_recovery: bool,
}

pub(crate) fn run(args: &Args) -> ExitCode {
    match &args.command {
        Command::Replay(a) => replay(a),
    }
}

fn replay(args: &ReplayArgs) -> ExitCode {
    let opts = Options {
        roce_ports: args.roce_ports.clone(),
        verbose: args.verbose,
        rocex_recovery: args.rocex_recovery,
    };
    let replay = if args.requester {
        replay_requester_file
    } else {
        replay_file
    };
    let report = match replay(&args.file, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rocex conform replay: {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    let mut out = BufWriter::new(io::stdout().lock());
    // A closed stdout (piped into head) is not an error worth reporting.
    let _ = writeln!(out, "{report}").and_then(|()| out.flush());
    if report.failed() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
