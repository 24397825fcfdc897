//! `rocex`: the rocex command-line tool.

mod baseline;
mod choose;
mod cm;
mod conform;
mod demo;
mod device;
mod devinfo;
mod dump;
mod nvmeof;
mod oob;
mod perf;
mod pingpong;
mod probe;
mod progress;
mod run;
mod soak;
mod stat;
mod top;

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
    /// The kernel's own UDP path on this host (one datagram per call, busy-poll ping-pong):
    /// the reference rocex's performance is measured against.
    Baseline(baseline::Args),
    /// Print the RoCE v2 frames of a pcap or pcapng capture, one line (or JSON object) each.
    Dump(dump::Args),
    /// Replay captured request streams into rocex's responder and compare with kernel rxe's responses.
    Conform(conform::Args),
    /// Ping-pong SENDs over an RC QP, compatible with ibv_rc_pingpong on the wire and in its
    /// out-of-band exchange (TCP port 18515), so either side can be the stock tool.
    Pingpong(pingpong::Args),
    /// Two rocex engines on 127.0.0.1 and 127.0.0.2: a ping-pong and a verified WRITE stream.
    Demo(demo::Args),
    /// Show the device a rocexd serves (like ibv_devinfo).
    Devinfo(devinfo::Args),
    /// perftest-style bandwidth and latency tests (write, read, send, atomic), compatible with
    /// perftest's out-of-band exchange.
    Perf(perf::Args),
    /// The rxe lab probe's single-operation tests (SEND_WITH_IMM/INV, WRITE_WITH_IMM, READ,
    /// atomics, ATOMIC_WRITE, FLUSH, bad rkey, RNR, PSN wrap), speaking its out-of-band
    /// protocol.
    Probe(probe::Args),
    /// librdmacm's rping over rdma_cm (CM MADs on QP1): SEND, RDMA READ and WRITE, either
    /// side compatible with the stock tool.
    Rping(cm::rping::Args),
    /// librdmacm's ucmatose over rdma_cm: connect, exchange messages, disconnect.
    Ucmatose(cm::cmatose::Args),
    /// Many mixed, checked messages over QP pairs between two rocexd: nothing lost, duplicated,
    /// corrupted or reordered, atomics consistent.
    Soak(soak::Args),
    /// An NVMe over Fabrics RDMA host on a rocexd: connect to a target (admin and I/O
    /// queue), Identify, write, flush, read back and compare, measure, disconnect.
    Nvmeof(nvmeof::Args),
    /// Run an unmodified RDMA program (perftest, ibv_rc_pingpong, ...) on rocex: rocex's
    /// libibverbs.so.1 first on its library path.
    Run(run::RunArgs),
    /// Print the directory of rocex's drop-in libibverbs.so.1, for LD_LIBRARY_PATH.
    Libdir(run::LibdirArgs),
    /// A rocexd's counters: the engine's (rxe's hw_counters names), the daemon's, injected
    /// faults, and each QP's state and PSNs (like `rdma statistic`).
    Stat(stat::Args),
    /// A live view of a rocexd: its totals and each QP's rates, queue depths and retries
    /// left, redrawn every interval on a terminal (one view into a pipe).
    Top(top::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Baseline(args) => baseline::run(&args),
        Command::Dump(args) => dump::run(&args),
        Command::Conform(args) => conform::run(&args),
        Command::Pingpong(args) => pingpong::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Devinfo(args) => devinfo::run(&args),
        Command::Perf(args) => perf::run(&args),
        Command::Probe(args) => probe::run(&args),
        Command::Rping(args) => cm::rping::run(&args),
        Command::Ucmatose(args) => cm::cmatose::run(&args),
        Command::Soak(args) => soak::run(&args),
        Command::Stat(args) => stat::run(&args),
        Command::Top(args) => top::run(&args),
        Command::Nvmeof(args) => nvmeof::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Libdir(args) => run::run_libdir(&args),
    }
}
