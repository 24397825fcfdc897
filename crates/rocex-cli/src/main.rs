//! `rocex`: the rocex command-line tool.

mod conform;
mod dump;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// rocex: a software RoCE v2 NIC.
#[derive(Parser)]
#[command(name = "rocex", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the RoCE v2 frames of a pcap or pcapng capture, one line (or JSON object) each.
    Dump(dump::Args),
    /// Replay captured request streams into rocex's responder and compare with kernel rxe's responses.
    Conform(conform::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Dump(args) => dump::run(&args),
        Command::Conform(args) => conform::run(&args),
    }
}
