//! `rocex perf`'s options, under perftest's names and within perftest's ranges, and the
//! parameters of a run they settle into: everything a run can refuse is refused here,
//! before any exchange or wait.

use std::path::PathBuf;
use std::time::Duration;

use super::{MAX_QPS, Op, RECVS_MAX, Test, in_flight, share};
use crate::oob;

/// perftest's `-A`, under its names or rocex's short ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AtomicType {
    /// CMP_AND_SWAP.
    #[value(alias = "CMP_AND_SWAP")]
    Cas,
    /// FETCH_AND_ADD.
    #[value(alias = "FETCH_AND_ADD")]
    Faa,
}

/// Where a perftest option's range comes from: perftest's own limits
/// (`perftest_parameters.h`: MIN_TX/MAX_TX, MAX_RX, MIN_CQ_MOD/MAX_CQ_MOD, MAX_INLINE),
/// so that what a stock tool refuses is refused here too, and before any exchange.
const MAX_TX: i64 = 15000;
const MAX_RX: i64 = 16384;
const MAX_CQ_MOD: i64 = 1024;
const MAX_INLINE: i64 = 1024;
/// The sizes `-a` runs: 2 to 2^23 bytes (perftest's `MAX_SIZE`), powers of two.
const ALL_SIZES: std::ops::RangeInclusive<u32> = 1..=23;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Operation.
    pub(super) op: Op,
    /// Bandwidth or latency.
    pub(super) test: Test,
    /// Server to connect to; without it, wait for a client (as perftest does).
    pub(super) server: Option<String>,
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long, default_value_t = 18515)]
    pub(super) port: u16,
    /// Message size in bytes, up to 2^31 (default 65536 for bw, 2 for lat; atomics are
    /// always 8).
    #[arg(short = 's', long, value_parser = clap::value_parser!(u32).range(1..=1 << 31))]
    pub(super) size: Option<u32>,
    /// Every size from 2 to 2^23 bytes, one result line each, as perftest's `-a` (give it
    /// to both sides: the server's buffers are then 8 MiB). Not atomics (one size), nor
    /// with `--duration` (as perftest).
    #[arg(short = 'a', long, conflicts_with_all = ["size", "duration"])]
    pub(super) all: bool,
    /// Iterations per QP (default 5000 for bw, 1000 for lat).
    #[arg(short = 'n', long, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    pub(super) iters: Option<u64>,
    /// Run for this many seconds instead of a number of iterations (give it to both
    /// sides, as perftest's `-D`: each keeps its own time; what is in flight a second past
    /// the end is not counted).
    #[arg(short = 'D', long, conflicts_with = "iters", value_parser = crate::device::parse_secs)]
    pub(super) duration: Option<f64>,
    /// QPs (bandwidth tests), 1 to 4096; with more than one, the depths per QP are cut so
    /// that 16 MiB (8192 requests at most) are in flight and 8192 receives posted in all.
    #[arg(short = 'q', long, visible_alias = "qp", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_QPS)))]
    pub(super) qps: u32,
    /// Path MTU (256 to 4096); the smaller of the two sides' is used.
    #[arg(short = 'm', long, default_value_t = 4096, value_parser = crate::device::parse_mtu)]
    pub(super) mtu: u32,
    /// Requests in flight per QP, 1 to 15000.
    #[arg(short = 't', long = "tx-depth", default_value_t = 128,
          value_parser = clap::value_parser!(u32).range(1..=MAX_TX))]
    pub(super) tx_depth: u32,
    /// Ask for a completion every this many requests per QP (bandwidth tests; perftest's
    /// CQ moderation), 1 to 1024 and at most the TX depth [default: 100, or the TX depth
    /// when that is less]; one completion retires the requests before it.
    #[arg(short = 'Q', long = "cq-mod",
          value_parser = clap::value_parser!(u32).range(1..=MAX_CQ_MOD))]
    pub(super) cq_mod: Option<u32>,
    /// Receives posted per QP (SEND tests), 1 to 16384.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 512,
          value_parser = clap::value_parser!(u32).range(1..=MAX_RX))]
    pub(super) rx_depth: u32,
    /// Send messages up to this size inline, 0 to 1024 (write and send tests).
    #[arg(short = 'I', long, visible_alias = "inline_size", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=MAX_INLINE))]
    pub(super) inline: u32,
    /// Check every byte received or read against the pattern the peer wrote (both ends rocex).
    #[arg(long)]
    pub(super) verify: bool,
    /// Print one JSON object (one per size with `-a`) instead of the table.
    #[arg(long)]
    pub(super) json: bool,
    /// The atomic operation (atomic tests): CMP_AND_SWAP (cas) or FETCH_AND_ADD (faa)
    /// [default: FETCH_AND_ADD].
    #[arg(
        short = 'A',
        long = "atomic-type",
        visible_alias = "atomic_type",
        value_enum
    )]
    pub(super) atomic_type: Option<AtomicType>,
    /// Report bandwidth in Gb/s (10^9 bits) instead of MB/s (2^20 bytes), as perftest's
    /// option of that name (give it to both sides: the client's report travels in its unit).
    #[arg(long = "report_gbits", visible_alias = "report-gbits")]
    pub(super) report_gbits: bool,
    /// GID index (accepted for perftest's command line; the GID is the exchange's address).
    #[arg(short = 'x', long = "gid-index")]
    pub(super) gid_index: Option<u32>,
    /// Device (accepted for perftest's command line).
    #[arg(short = 'd', long = "ib-dev")]
    pub(super) ib_dev: Option<String>,
    /// Port of the device: a rocex device has one, port 1.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=1))]
    pub(super) ib_port: u8,
    /// Do not warn when the CPU frequency is not at its maximum (perftest's `-F`; accepted:
    /// rocex times with the monotonic clock, not CPU cycles, and never warns).
    #[arg(short = 'F', long = "CPU-freq")]
    pub(super) cpu_freq: bool,
    /// Seconds a client keeps trying while nothing listens at the server's port.
    #[arg(long, value_name = "SECS", default_value_t = oob::CONNECT_WAIT.as_secs_f64(),
          value_parser = crate::device::parse_secs)]
    pub(super) connect_timeout: f64,
    /// Run on the rocexd at this control socket (also `$ROCEX_SOCKET`) instead of an
    /// engine in this process on the exchange's address.
    #[arg(long)]
    pub(super) socket: Option<PathBuf>,
    /// Fault injection on every packet the in-process engine sends (rocexd's syntax):
    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N`; printed on stderr at the end.
    /// Refused with `--socket`: there the daemon's own `--inject` applies.
    #[arg(long, value_name = "SPEC")]
    pub(super) inject: Option<rocex_io::Faults>,
    /// The in-process engine's packet I/O (ignored with `--socket`: the daemon's own).
    #[command(flatten)]
    pub(super) io: crate::device::PortArgs,
}

/// The settled parameters of a run.
#[derive(Debug, Clone)]
pub(crate) struct Params {
    pub(crate) op: Op,
    pub(crate) test: Test,
    pub(crate) client: bool,
    pub(crate) size: u32,
    pub(crate) iters: u64,
    pub(crate) duration: Option<Duration>,
    pub(crate) qps: u32,
    pub(crate) tx_depth: u32,
    /// Requests per signaled one (bandwidth clients), at most `tx_depth`.
    pub(crate) cq_mod: u32,
    pub(crate) rx_depth: u32,
    pub(crate) inline: u32,
    pub(crate) verify: bool,
    /// Whether the peer is rocex, so that there is a pattern to verify against.
    pub(crate) peer_rocex: bool,
    pub(crate) json: bool,
    pub(crate) atomic: AtomicType,
    /// `-a`: every size of [`ALL_SIZES`]; `size` is then the largest, which the buffers
    /// are laid out for.
    pub(crate) all: bool,
    /// Bandwidth in Gb/s instead of MB/s.
    pub(crate) gbits: bool,
}

impl Params {
    /// The message sizes the run measures, in order.
    pub(crate) fn sizes(&self) -> Vec<u32> {
        if self.all {
            ALL_SIZES.map(|i| 1 << i).collect()
        } else {
            vec![self.size]
        }
    }

    /// These parameters for one of [`Params::sizes`].
    pub(crate) fn with_size(&self, size: u32) -> Self {
        Self {
            size,
            ..self.clone()
        }
    }
}

/// The options settled into a run's parameters; what they do not allow together is an
/// error (clap has checked each one's range).
pub(super) fn params(a: &Args) -> Result<Params, String> {
    let size = if a.op == Op::Atomic {
        8
    } else if a.all {
        1 << ALL_SIZES.end()
    } else {
        a.size.unwrap_or(if a.test == Test::Bw { 65536 } else { 2 })
    };
    if a.test == Test::Lat && a.qps != 1 {
        return Err("latency tests use one QP (--qps)".into());
    }
    if a.all && a.op == Op::Atomic {
        return Err("-a runs the write, read and send tests (atomics have one size)".into());
    }
    if a.inline > 0 && matches!(a.op, Op::Read | Op::Atomic) {
        return Err("--inline applies to write and send tests (as in perftest)".into());
    }
    if a.atomic_type.is_some() && a.op != Op::Atomic {
        return Err("--atomic-type applies to the atomic tests".into());
    }
    if a.inject.is_some() && crate::device::daemon_socket(a.socket.as_deref()).is_some() {
        return Err(
            "--inject applies to the engine in this process; on a rocexd, start the daemon with --inject"
                .into(),
        );
    }
    let duration = a.duration.map(Duration::from_secs_f64);
    let tx_depth = if a.test == Test::Lat {
        1
    } else {
        share(a.tx_depth, a.qps, in_flight(size))
    };
    let cq_mod = match a.cq_mod {
        Some(m) if a.test == Test::Bw && m > a.tx_depth => {
            return Err(format!(
                "--cq-mod {m} is more than the TX depth ({}): a completion could never be asked for",
                a.tx_depth
            ));
        }
        // With many QPs the depth per QP is cut, and the moderation with it.
        Some(m) => m.min(tx_depth),
        None => 100.min(tx_depth),
    };
    Ok(Params {
        op: a.op,
        test: a.test,
        client: a.server.is_some(),
        size,
        iters: a
            .iters
            .unwrap_or(if a.test == Test::Bw { 5000 } else { 1000 }),
        duration,
        qps: a.qps,
        tx_depth,
        cq_mod,
        rx_depth: share(a.rx_depth, a.qps, u64::from(RECVS_MAX)),
        inline: a.inline,
        verify: a.verify,
        peer_rocex: false,
        json: a.json,
        atomic: a.atomic_type.unwrap_or(AtomicType::Faa),
        all: a.all,
        gbits: a.report_gbits,
    })
}
