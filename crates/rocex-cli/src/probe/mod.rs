//! `rocex probe`: the rxe lab probe (`proto-tests/rxe-lab/probe/probe.c`, `rxe-probe` in the
//! guest). One verb at a time over an RC (or UC) QP, every completion printed, with the
//! probe's out-of-band line protocol (version 1, TCP port 18600), so that either side can
//! be the C probe on kernel rxe. See docs/rxe-lab.md, "The probe" and "Probe out-of-band
//! protocol (version 1)".
//!
//! The pieces: `plan` (the operations and settings both sides agree on), `line` (the
//! out-of-band lines and the QP line's format), `ctx` (the device, its QP and memory),
//! `status` (libibverbs' names for statuses and opcodes), and one file for each role:
//! `client` (posts the operations and checks each result) and `server` (answers them and
//! checks what arrived).

use std::io;
use std::process::ExitCode;

macro_rules! say {
    ($ctx_role:expr, $($t:tt)*) => {
        println!("[{}] {}", $ctx_role, format_args!($($t)*))
    };
}

mod client;
mod ctx;
mod line;
mod plan;
mod server;
mod status;

use plan::parse_num;

const PROTO_VERSION: u32 = 1;
const ATOMIC_AREA: u64 = 64;
const ATOMIC_INIT: u64 = 0x1000;
const ATOMIC_WRITE_VALUE: u64 = 0xa5a5_a5a5_5a5a_5a5a;
const IMM_BASE: u32 = 0x1234_5600;
/// The application address of the probe's buffer.
const BASE: u64 = 0x0000_5600_0000_0000;
/// The bytes each side fills its buffer with, so that the other can check what it got.
fn pat_client(i: u64) -> u8 {
    (i.wrapping_mul(13).wrapping_add(0x22)) as u8
}

fn pat_server(i: u64) -> u8 {
    (i.wrapping_mul(7).wrapping_add(0x11)) as u8
}

const DEFAULT_OPS: &str = "send,send_imm,write,write_imm,read,cas,faa";

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    role: Role,
}

#[derive(clap::Subcommand)]
enum Role {
    /// The responder: takes its parameters from the client's PLAN line.
    Server(Common),
    /// The requester: runs the operations against PEER.
    Client(ClientArgs),
}

#[derive(clap::Args)]
/// What both roles take: the out-of-band exchange, the device names the C probe takes, and
/// fault injection.
struct Common {
    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long, default_value_t = 18600)]
    port: u16,
    /// Device name (accepted for compatibility).
    #[arg(short = 'd', long = "dev")]
    dev: Option<String>,
    /// GID index (accepted for compatibility; the GID is the address the exchange uses).
    #[arg(short = 'g', long = "gid-idx")]
    gid_idx: Option<u32>,
    /// Receive timeout of the out-of-band exchange, in seconds.
    #[arg(long, default_value_t = 60)]
    wait: u64,
    /// Fault injection on every packet this side sends (rocexd's syntax):
    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=D,seed=N` (docs/faults.md); printed on
    /// stderr at the end.
    #[arg(long, value_name = "SPEC")]
    inject: Option<rocex_io::Faults>,
}

#[derive(clap::Args)]
struct ClientArgs {
    /// The server's address.
    peer: String,
    #[command(flatten)]
    common: Common,
    /// Operations in order: send send_imm send_inv write write_imm read cas faa
    /// atomic_write flush, or all (comma-separated).
    #[arg(long, default_value = DEFAULT_OPS)]
    ops: String,
    /// Message size in bytes (rounded up to a multiple of 8, at least 8).
    #[arg(long, default_value_t = 64)]
    size: u64,
    /// Iterations of each operation (send_inv runs once).
    #[arg(long, default_value_t = 1)]
    iters: u32,
    /// Path MTU (256, 512, 1024, 2048 or 4096).
    #[arg(long, default_value_t = 1024)]
    mtu: u32,
    /// Starting PSN of both sides (decimal or 0x hex); random by default.
    #[arg(long, value_parser = parse_num)]
    psn: Option<i64>,
    /// Local ACK timeout exponent.
    #[arg(long, default_value_t = 17)]
    timeout: u8,
    /// Retry count.
    #[arg(long, default_value_t = 7)]
    retry: u8,
    /// RNR retry count.
    #[arg(long = "rnr-retry", default_value_t = 7)]
    rnr_retry: u8,
    /// The responder's min_rnr_timer.
    #[arg(long = "min-rnr", default_value_t = 12)]
    min_rnr: u8,
    /// Have the server post its receives this many ms after READY.
    #[arg(long = "rnr-delay", default_value_t = 0)]
    rnr_delay: u32,
    /// Unreliable Connected QPs.
    #[arg(long)]
    uc: bool,
    /// Flip bits 8-23 of the rkey (implies --expect rem_access).
    #[arg(long = "bad-rkey")]
    bad_rkey: bool,
    /// FLUSH placement type.
    #[arg(long = "flush-type", default_value = "global", value_parser = ["global", "persistent"])]
    flush_type: String,
    /// An error status that is the success condition: rem_access rem_inv_req rem_op
    /// retry_exc rnr_retry_exc loc_prot wr_flush, or a number.
    #[arg(long)]
    expect: Option<String>,
}

/// A fatal error: printed as `FATAL`, exit status 2.
struct Fatal(String);

impl From<io::Error> for Fatal {
    fn from(e: io::Error) -> Self {
        Self(e.to_string())
    }
}

impl From<rocex_proto::VerbsError> for Fatal {
    fn from(e: rocex_proto::VerbsError) -> Self {
        Self(e.to_string())
    }
}

type Res<T> = Result<T, Fatal>;

fn fatal<T>(msg: impl Into<String>) -> Res<T> {
    Err(Fatal(msg.into()))
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let (role, r) = match &a.role {
        Role::Server(s) => ("server", server::run(s)),
        Role::Client(c) => ("client", client::run(c)),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Fatal(m)) => {
            say!(role, "FATAL: {m}");
            ExitCode::from(2)
        }
    }
}
