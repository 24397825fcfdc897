//! The engine the command-line tools run: on rocex-io's UDP port, seeded from the OS, or
//! the rocexd they are pointed at.

use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rocex_io::{BackendKind, BackendOptions, Driver, FaultCounters, Faults, UdpPort};
use rocex_proto::verbs::{Mtu, QpCap, QpType, RecvWr, SendWr};
use rocex_proto::{Config, Engine, PdId, QpInit};

/// The path MTU of its size in bytes.
pub(crate) fn mtu_of(bytes: u32) -> io::Result<Mtu> {
    [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() == bytes)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "the MTU must be 256, 512, 1024, 2048 or 4096",
            )
        })
}

/// clap's parser of an MTU option: the bytes, one of the five IB MTUs.
pub(crate) fn parse_mtu(s: &str) -> Result<u32, String> {
    let bytes: u32 = s.parse().map_err(|e| format!("{e}"))?;
    mtu_of(bytes).map(|_| bytes).map_err(|e| e.to_string())
}

/// clap's parser of a time in seconds: a positive, finite number.
pub(crate) fn parse_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if v.is_finite() && v > 0.0 && v < 1e9 {
        Ok(v)
    } else {
        Err("must be a positive number of seconds".to_owned())
    }
}

/// 32 bytes from the OS for the engine's CSPRNG (QPNs, keys, PSNs).
pub(crate) fn seed() -> [u8; 32] {
    let mut s = [0u8; 32];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| io::Read::read_exact(&mut f, &mut s))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        s[..16].copy_from_slice(&t.as_nanos().to_le_bytes());
    }
    s
}

/// An engine configuration for `local` on the UDP backend: port MTU 4096, every packet
/// from UDP port 4791 (a socket cannot choose its source port per QP), seeded from the OS.
pub(crate) fn config(local: IpAddr) -> Config {
    let mut c = Config::new(local, seed());
    c.port_mtu = Mtu::M4096;
    c.udp_source_port = Some(4791);
    c
}

/// `engine` on rocex-io's UDP port at `local`, with `inject`'s faults (rocexd's `--inject`
/// syntax) applied to every packet it sends.
pub(crate) fn driver(engine: Engine, local: IpAddr, inject: Option<Faults>) -> io::Result<Driver> {
    Ok(injected(Driver::new(engine, UdpPort::bind(local)?), inject))
}

fn injected(mut d: Driver, inject: Option<Faults>) -> Driver {
    if let Some(f) = inject {
        d.inject(f);
    }
    d
}

/// The packet I/O of a tool's in-process engine (rocexd's options of the same names).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PortArgs {
    /// I/O backend: `udp`, `afpacket` (whole frames through mapped rings; CAP_NET_RAW)
    /// or `uring`.
    #[arg(long, default_value = "udp")]
    backend: BackendKind,
    /// One datagram per packet each way: no UDP GSO or GRO batching (the per-frame path,
    /// as with a kernel rxe peer).
    #[arg(long)]
    no_gso: bool,
    /// Selective repeat towards the peer, which must be rocex with it on too (rocexd's
    /// `--selective-repeat`; docs/wire.md, "Selective repeat"): with only one end on, the
    /// first SEND or WRITE fails with a remote invalid request error.
    #[arg(long)]
    selective_repeat: bool,
    /// PSNs an RC QP keeps in flight at most, 128 (kernel rxe's) by default (rocexd's
    /// `--window`; docs/wire.md, "Recovery"): under go-back-N it grows to this on a clean
    /// path and falls back to 128 after a loss.
    #[arg(long, value_name = "N", default_value_t = rocex_proto::MAX_UNACKED_PSNS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(rocex_proto::MAX_WINDOW)))]
    window: u32,
}

/// A fresh engine for `local` on the backend `port` asks for, with `inject`'s faults.
pub(crate) fn open_driver(
    local: IpAddr,
    port: &PortArgs,
    inject: Option<Faults>,
) -> io::Result<Driver> {
    let opts = BackendOptions {
        no_gso: port.no_gso,
        no_gro: port.no_gso,
        ..BackendOptions::default()
    };
    let backend = rocex_io::open(port.backend, local, opts)?;
    let mut cfg = config(local);
    cfg.udp_source_port = backend.fixed_source_port();
    cfg.selective_repeat = port.selective_repeat;
    cfg.window = port.window;
    Ok(injected(
        Driver::with_backend(Engine::new(cfg), backend),
        inject,
    ))
}

/// Prints what fault injection did, on stderr, in one `key=value` line for scripts that
/// account for the faults (the interop runs match `corrupted=` against the capture).
pub(crate) fn report_faults(tool: &str, faults: Option<FaultCounters>) {
    if let Some(c) = faults {
        eprintln!(
            "{tool}: injected lost={} duplicated={} reordered={} corrupted={}",
            c.lost, c.duplicated, c.reordered, c.corrupted
        );
    }
}

/// The rocexd control socket a tool should use: `flag`, else `$ROCEX_SOCKET`; `None`
/// means run an engine in this process.
pub(crate) fn daemon_socket(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("ROCEX_SOCKET").map(PathBuf::from))
}

/// A verbs error as an I/O error, for the tools' error paths.
pub(crate) fn verbs_err(e: rocex_proto::VerbsError) -> io::Error {
    io::Error::other(e.to_string())
}

/// A QP whose sends and receives both complete on `cq`, as every tool's QP does.
pub(crate) fn create_qp(
    e: &mut Engine,
    qp_type: QpType,
    pd: PdId,
    cq: u32,
    cap: QpCap,
) -> io::Result<u32> {
    e.create_qp(QpInit {
        qp_type,
        ..QpInit::rc(pd, cq, cap)
    })
    .map_err(verbs_err)
}

/// Posting to a driver's engine at the driver's clock, a refusal as an I/O error.
pub(crate) trait Post {
    fn post_send(&mut self, qpn: u32, wr: SendWr) -> io::Result<()>;
    fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> io::Result<()>;
}

impl Post for Driver {
    fn post_send(&mut self, qpn: u32, wr: SendWr) -> io::Result<()> {
        let now = self.now();
        self.engine.post_send(now, qpn, wr).map_err(verbs_err)
    }

    fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> io::Result<()> {
        let now = self.now();
        self.engine.post_recv(now, qpn, wr).map_err(verbs_err)
    }
}
