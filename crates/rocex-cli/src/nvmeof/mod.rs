//! `rocex nvmeof`: an NVMe over Fabrics RDMA host on a rocexd. Connects the admin queue
//! and one I/O queue to a target (Linux's nvmet-rdma, any NVMe-oF RDMA controller),
//! identifies the controller and a namespace, writes a pattern, flushes, reads it back
//! and compares, optionally measures reads and writes at several sizes and depths, and
//! ends the association (`docs/nvmeof.md`).

mod io;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rocex_nvmeof::{Host, HostConfig};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The target's address.
    target: IpAddr,
    /// The target's rdma_cm port (TCP port space).
    #[arg(long, default_value_t = 4420)]
    port: u16,
    /// The subsystem's NQN.
    #[arg(long)]
    nqn: String,
    /// This host's NQN [default: one derived from the host identifier].
    #[arg(long)]
    hostnqn: Option<String>,
    /// The namespace.
    #[arg(long, default_value_t = 1)]
    nsid: u32,
    /// The daemon's control socket [default: $ROCEX_SOCKET, else the only rocexd running].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Commands in flight on the I/O queue while verifying (at least 16 proves depth).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=127))]
    qd: u16,
    /// Entries of the admin queue (32, the binding's usual and Linux's most; another
    /// value tests how a target refuses it).
    #[arg(long, default_value_t = rocex_nvmeof::ADMIN_QUEUE_DEPTH, value_parser = clap::value_parser!(u16).range(2..=128))]
    admin_depth: u16,
    /// Bytes of each verifying command (a multiple of the block size).
    #[arg(long, default_value_t = 4096)]
    size: u32,
    /// Bytes the verify pass writes and reads back.
    #[arg(long, default_value_t = 1 << 20)]
    verify_bytes: u64,
    /// Measure: each I/O size (bytes, comma-separated) ...
    #[arg(long, value_delimiter = ',')]
    bench_sizes: Vec<u32>,
    /// ... at each depth (comma-separated), writes then reads, random offsets.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    bench_depths: Vec<u16>,
    /// Seconds of each measured run.
    #[arg(long, default_value_t = 5.0, value_parser = crate::device::parse_secs)]
    bench_secs: f64,
    /// Fail unless Identify Controller's serial number is this.
    #[arg(long)]
    expect_serial: Option<String>,
    /// Fail unless Identify Controller's model number is this.
    #[arg(long)]
    expect_model: Option<String>,
    /// Fail unless the namespace holds this many bytes.
    #[arg(long)]
    expect_bytes: Option<u64>,
    /// Seconds any one wait (connection, response) may take.
    #[arg(long, default_value_t = 30.0, value_parser = crate::device::parse_secs)]
    timeout: f64,
}

pub(crate) fn run(a: &Args) -> ExitCode {
    match go(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocex nvmeof: {e}");
            ExitCode::FAILURE
        }
    }
}

type Failure = Box<dyn std::error::Error>;

fn go(a: &Args) -> Result<(), Failure> {
    let socket = crate::choose::daemon(a.socket.as_deref())?;
    // The daemon path: NVMe/RDMA connects by rdma_cm, and a queue learns of the target's
    // disconnect from its QP, which rocexd moves to ERROR on the DREQ (a direct context's
    // moves only when its CM events are polled).
    let ctx = rocex_verbs::Context::open_daemon_path(&socket)?;
    let hostid = io::host_id();
    let hostnqn = a
        .hostnqn
        .clone()
        .unwrap_or_else(|| format!("nqn.2014-08.org.nvmexpress:uuid:{}", io::uuid_text(&hostid)));
    let max_io = a.bench_sizes.iter().copied().fold(a.size, u32::max);
    let depth = a.bench_depths.iter().copied().fold(a.qd, u16::max);
    let cfg = HostConfig {
        subnqn: a.nqn.clone(),
        hostnqn,
        hostid,
        admin_depth: a.admin_depth,
        io_queues: 1,
        io_depth: depth.max(2),
        max_io,
        timeout: Duration::from_secs_f64(a.timeout),
    };
    let mut host = Host::connect(&ctx, a.target, a.port, &cfg)?;
    let c = host.controller().clone();
    let v = host.version();
    let crq =
        |d: Option<u16>| d.map_or_else(String::new, |d| format!(" (the controller takes {d})"));
    let admin_crq = crq(host.admin().controller_depth());
    let io_crq = crq(host.io(0).and_then(|q| q.controller_depth()));
    println!(
        "connected: {}:{} cntlid {} (NVMe {}.{}), admin queue {} deep{admin_crq}, 1 I/O queue {} deep{io_crq}",
        a.target,
        a.port,
        host.cntlid(),
        v >> 16,
        v >> 8 & 0xff,
        cfg.admin_depth,
        cfg.io_depth
    );
    println!(
        "controller: serial {:?} model {:?} firmware {:?} mdts {} namespaces {} subnqn {}",
        c.serial, c.model, c.firmware, c.mdts, c.nn, c.subnqn
    );
    let ns = host.identify_namespace(a.nsid)?;
    println!(
        "namespace {}: {} blocks of {} bytes ({} bytes)",
        a.nsid,
        ns.nsze,
        ns.block_size,
        ns.bytes()
    );
    expect("serial", a.expect_serial.as_deref(), &c.serial)?;
    expect("model", a.expect_model.as_deref(), &c.model)?;
    if let Some(b) = a.expect_bytes.filter(|&b| b != ns.bytes()) {
        return Err(format!(
            "namespace size: expected {b} bytes, Identify says {}",
            ns.bytes()
        )
        .into());
    }
    let disk = io::Disk {
        nsid: a.nsid,
        block: ns.block_size,
        bytes: ns.bytes(),
    };
    let q = host.io(0).ok_or("no I/O queue")?;
    io::verify(q, &disk, a.size, a.qd, a.verify_bytes)?;
    for &size in &a.bench_sizes {
        for &qd in &a.bench_depths {
            io::bench(q, &disk, size, qd, Duration::from_secs_f64(a.bench_secs))?;
        }
    }
    host.disconnect()?;
    println!("disconnected: shutdown complete, queues closed");
    Ok(())
}

fn expect(what: &str, want: Option<&str>, got: &str) -> Result<(), Failure> {
    match want {
        Some(w) if w != got => Err(format!("{what}: expected {w:?}, Identify says {got:?}").into()),
        _ => Ok(()),
    }
}
