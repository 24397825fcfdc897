//! Command-line flags and the TOML configuration file (the same keys; flags win).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use rocex_proto::verbs::Mtu;
use serde::Deserialize;

/// `rocexd`: one RoCE v2 device on an IP address, served to applications over a Unix
/// socket and shared-memory rings.
#[derive(Debug, clap::Parser)]
#[command(name = "rocexd", version)]
pub(crate) struct Args {
    /// The IP address to own (UDP port 4791 there); its RoCE v2 GID.
    #[arg(long)]
    pub(crate) addr: Option<IpAddr>,
    /// The control socket [default: $ROCEX_SOCKET, else <addr>.sock in $ROCEX_SOCKET_DIR,
    /// else in /run/rocex].
    #[arg(long)]
    pub(crate) socket: Option<PathBuf>,
    /// The port MTU in bytes of IB payload: 256, 512, 1024, 2048 or 4096 [default: 4096].
    #[arg(long)]
    pub(crate) mtu: Option<u32>,
    /// I/O backend: `udp`, `afpacket` or `uring` [default: udp].
    #[arg(long)]
    pub(crate) backend: Option<rocex_io::BackendKind>,
    /// One datagram per packet: no UDP GSO or GRO (the per-frame path).
    #[arg(long)]
    pub(crate) no_gso: bool,
    /// Every peer is rocex: the udp and uring backends then accept an ICRC only under the
    /// IPv4 identifications rocex sends with (0..63), not any (kernel rxe's): a random
    /// corruption passes with 2^-26 rather than 2^-16 (docs/security.md).
    #[arg(long)]
    pub(crate) peers_are_rocex: bool,
    /// Retransmit only when kernel rxe would: after the QP's whole ACK timeout, a READ's
    /// missing response left to it (docs/wire.md, "Recovery").
    #[arg(long)]
    pub(crate) rxe_recovery: bool,
    /// Every RC peer is a rocex engine with selective repeat on: recover from loss by
    /// selective repeat on rocex's own opcodes, not go-back-N (docs/wire.md, "Selective
    /// repeat"). Never towards kernel rxe or hardware, which drop those opcodes.
    #[arg(long)]
    pub(crate) selective_repeat: bool,
    /// PSNs an RC QP keeps in flight at most, 1..=8192 [default: 128, kernel rxe's]. Under
    /// go-back-N a wider window grows to this on a clean path and falls back to 128 after
    /// a loss; for long or loaded round trips, at the cost of more queue at a slow peer
    /// (docs/wire.md, "Recovery"). Under selective repeat, at most 256.
    #[arg(long, value_name = "N")]
    pub(crate) window: Option<u32>,
    /// Send RC and UC packets ECT(0), so that a marking switch marks them CE rather than
    /// dropping them; DCQCN answers the marks with CNPs and slows the QP a CNP names
    /// (docs/congestion.md). Off: TOS 0, as kernel rxe sends.
    #[arg(long)]
    pub(crate) ecn: bool,
    /// DSCP (0..63) of packets whose QP has no traffic class of its own [default: 0].
    #[arg(long, value_name = "N")]
    pub(crate) dscp: Option<u8>,
    /// DCQCN's parameters, `KEY=VALUE,...` over the defaults and the file's `[dcqcn]`
    /// table: react, g, alpha_period_us, increase_period_us, byte_counter, fast_recovery,
    /// additive_mbps, hyper_mbps, min_rate_mbps, line_rate_mbps, burst, cnp_interval_us
    /// (docs/congestion.md).
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub(crate) dcqcn: Option<String>,
    /// A TOML file with the same keys (addr, socket, mtu, backend, gso, peers_are_rocex,
    /// rxe_recovery, selective_repeat, window, ecn, dscp, pcap, spin_limit, inject, metrics,
    /// direct, [limits], [dcqcn]).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Write every frame sent and received to this pcap file.
    #[arg(long)]
    pub(crate) pcap: Option<PathBuf>,
    /// At most this many empty polls of all rings before the daemon sleeps in poll(2) (0:
    /// never spin); fewer when spinning does not pay (`spin.rs`).
    #[arg(long)]
    pub(crate) spin_limit: Option<u32>,
    /// Fault injection on every packet sent, for testing applications against a bad
    /// network: `loss=P,dup=P,reorder=P,corrupt=P,delay=DURATION,seed=N`.
    #[arg(long, value_name = "SPEC")]
    pub(crate) inject: Option<rocex_io::Faults>,
    /// Serve every counter in Prometheus' text format at http://ADDR/metrics
    /// (e.g. 127.0.0.1:9479).
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) metrics: Option<SocketAddr>,
    /// Offer clients the direct data path, or stop: each may run the engine in its own
    /// process, the kernel steering its QPs' packets to it by QPN slot (docs/architecture.md,
    /// "The direct data path"). Offered by default where it fits: the udp backend, DCQCN's
    /// default parameters, no --pcap and no --inject (which see only the daemon's packets).
    #[arg(long, conflicts_with = "no_direct")]
    pub(crate) direct: bool,
    /// Serve every client through the daemon: no direct slots.
    #[arg(long)]
    pub(crate) no_direct: bool,
    /// Per-client limits.
    #[command(flatten)]
    pub(crate) limits: crate::limits::LimitArgs,
}

/// The configuration file's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    addr: Option<IpAddr>,
    socket: Option<PathBuf>,
    mtu: Option<u32>,
    backend: Option<String>,
    gso: Option<bool>,
    peers_are_rocex: Option<bool>,
    rxe_recovery: Option<bool>,
    selective_repeat: Option<bool>,
    window: Option<u32>,
    ecn: Option<bool>,
    dscp: Option<u8>,
    pcap: Option<PathBuf>,
    spin_limit: Option<u32>,
    inject: Option<String>,
    metrics: Option<SocketAddr>,
    direct: Option<bool>,
    limits: Option<crate::limits::LimitKeys>,
    dcqcn: Option<toml::Table>,
}

/// The settings the daemon runs with.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The device address.
    pub(crate) addr: IpAddr,
    /// The control socket path.
    pub(crate) socket: PathBuf,
    /// The port MTU.
    pub(crate) mtu: Mtu,
    /// The I/O backend.
    pub(crate) backend: rocex_io::BackendKind,
    /// UDP GSO and GRO (off: one datagram per packet).
    pub(crate) gso: bool,
    /// Every peer is rocex: check every received ICRC.
    pub(crate) peers_are_rocex: bool,
    /// Retransmit only when rxe would (`Config::rxe_recovery`).
    pub(crate) rxe_recovery: bool,
    /// Selective repeat towards every RC peer (`Config::selective_repeat`).
    pub(crate) selective_repeat: bool,
    /// PSNs in flight at most (`Config::window`).
    pub(crate) window: u32,
    /// ECN and DCQCN (`Congestion::ecn`).
    pub(crate) ecn: bool,
    /// The DSCP of packets whose QP has no traffic class.
    pub(crate) dscp: u8,
    /// DCQCN's parameters (`Config::congestion`, its `ecn` from [`Self::ecn`]).
    pub(crate) congestion: rocex_proto::Congestion,
    /// Capture file.
    pub(crate) pcap: Option<PathBuf>,
    /// At most this many empty loop turns before sleeping.
    pub(crate) spin_limit: u32,
    /// Faults injected into every packet sent.
    pub(crate) inject: Option<rocex_io::Faults>,
    /// Where the Prometheus endpoint listens.
    pub(crate) metrics: Option<SocketAddr>,
    /// Whether clients get direct slots.
    pub(crate) direct: DirectSlots,
    /// Per-client limits.
    pub(crate) limits: crate::limits::Limits,
}

/// Why the settings are unusable.
#[derive(Debug)]
pub(crate) enum ConfigError {
    /// The file could not be read.
    Read(PathBuf, std::io::Error),
    /// The file is not valid TOML with the known keys.
    Parse(PathBuf, Box<toml::de::Error>),
    /// The fault specification in the file is not valid.
    Inject(rocex_io::FaultsError),
    /// Neither `--addr` nor `addr` in the file.
    NoAddr,
    /// An MTU that is not an IB MTU.
    Mtu(u32),
    /// A DSCP past 63 (six bits).
    Dscp(u8),
    /// A window of no PSNs, or wider than `rocex_proto::MAX_WINDOW`.
    Window(u32),
    /// A backend name that is not one of udp, afpacket, uring.
    Backend(rocex_io::UnknownBackend),
    /// A DCQCN parameter that is not one, or a value it cannot take.
    Dcqcn(rocex_proto::DcqcnParamError),
    /// `--direct` (or `direct = true`) with settings the direct data path cannot serve.
    Direct(DirectUnfit),
}

/// Whether rocexd offers direct slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectSlots {
    /// `--no-direct`, or settings it cannot serve ([`DirectUnfit`]).
    Off,
    /// The default where the settings fit: a steering group the host refuses leaves every
    /// client on the daemon path, with a warning.
    Offered,
    /// `--direct` or `direct = true`: rocexd stops when it cannot offer them.
    Required,
}

/// Why the direct data path cannot serve the settings: off by default then, an error when
/// asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectUnfit {
    /// A backend other than udp: clients get UDP sockets of the daemon's `SO_REUSEPORT`
    /// group.
    Backend(rocex_io::BackendKind),
    /// DCQCN parameters of its own: a direct client's engine runs the defaults, and would
    /// pace differently from the daemon's.
    Dcqcn,
    /// A capture: it would miss the direct clients' packets.
    Pcap,
    /// Fault injection: the direct clients' packets would go out unharmed.
    Inject,
}

impl std::fmt::Display for DirectUnfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Backend(b) => write!(
                f,
                "the direct data path needs the udp backend, not {b}: direct clients share its UDP port"
            ),
            Self::Dcqcn => f.write_str(
                "the direct data path with DCQCN parameters: a direct client's engine runs DCQCN's defaults",
            ),
            Self::Pcap => f.write_str(
                "the direct data path with --pcap: the capture would miss the direct clients' packets",
            ),
            Self::Inject => f.write_str(
                "the direct data path with --inject: the direct clients' packets would go out unharmed",
            ),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(p, e) => write!(f, "cannot read {}: {e}", p.display()),
            Self::Parse(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Inject(e) => write!(f, "inject: {e}"),
            Self::NoAddr => f.write_str("no address: give --addr IP or `addr` in the config"),
            Self::Mtu(m) => write!(f, "MTU {m} is not one of 256, 512, 1024, 2048, 4096"),
            Self::Dscp(d) => write!(f, "DSCP {d} is not in 0..=63"),
            Self::Window(w) => write!(
                f,
                "window {w} is not in 1..={} PSNs",
                rocex_proto::MAX_WINDOW
            ),
            Self::Backend(e) => write!(f, "{e}"),
            Self::Dcqcn(e) => write!(f, "{e}"),
            Self::Direct(why) => write!(f, "--direct: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// What rxe takes off the link's MTU for the headers of a RoCE v2 packet
/// (`RXE_MAX_HDR_LENGTH`).
const HEADERS: u32 = 80;

/// The port MTU for a link of `link_mtu` bytes, as rxe sets its active MTU
/// (`eth_mtu_int_to_enum`): the largest IB MTU that fits once the headers are off, 256 at
/// least. A 1500-byte Ethernet link gives 1024.
fn mtu_for_link(link_mtu: u32) -> Mtu {
    [Mtu::M4096, Mtu::M2048, Mtu::M1024, Mtu::M512]
        .into_iter()
        .find(|m| m.bytes() + HEADERS <= link_mtu)
        .unwrap_or(Mtu::M256)
}

/// The port MTU: `given` (bytes), else what the link of `addr` carries
/// ([`mtu_for_link`]), 4096 when no interface holds the address or the host will not say.
/// A given MTU the link cannot carry is kept, with a warning: its longer packets are
/// dropped at the sender.
fn port_mtu(addr: IpAddr, given: Option<u32>) -> Result<Mtu, ConfigError> {
    let given = given.map(mtu_of).transpose()?;
    let link = match rocex_io::link_mtu(addr) {
        Ok(link) => link,
        Err(e) if given.is_none() => {
            tracing::warn!("the MTU of {addr}'s link: {e}; the port MTU is 4096");
            None
        }
        Err(_) => None,
    };
    let fits = link.map(mtu_for_link);
    match (given, link, fits) {
        (Some(m), Some(link), Some(fits)) if fits.bytes() < m.bytes() => tracing::warn!(
            "MTU {} is more than {addr}'s link carries (its MTU {link}: at most {}); \
             longer packets are dropped at the sender",
            m.bytes(),
            fits.bytes(),
        ),
        _ => {}
    }
    Ok(given.or(fits).unwrap_or(Mtu::M4096))
}

fn mtu_of(bytes: u32) -> Result<Mtu, ConfigError> {
    [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() == bytes)
        .ok_or(ConfigError::Mtu(bytes))
}

/// The run directory of the default sockets: the one directory rocexd creates when it is
/// missing (a socket given elsewhere, `$ROCEX_SOCKET_DIR` included, needs its directory to
/// exist).
pub(crate) const RUN_DIR: &str = rocex_verbs::SOCKET_DIR;

/// The default socket of a daemon on `addr`: `$ROCEX_SOCKET` when set (so a client and
/// the daemon started in one environment agree), else `<addr>.sock` in the directory
/// clients search ([`rocex_verbs::socket_dir`]: `$ROCEX_SOCKET_DIR`, else `/run/rocex`).
pub(crate) fn default_socket(addr: IpAddr) -> PathBuf {
    std::env::var_os("ROCEX_SOCKET")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| rocex_verbs::socket_dir().join(format!("{addr}.sock")))
}

impl Args {
    /// Merges the flags over the file.
    pub(crate) fn settings(self) -> Result<Settings, ConfigError> {
        let file = match &self.config {
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).map_err(|e| ConfigError::Read(p.clone(), e))?;
                parse_file(p, &text)?
            }
            None => FileConfig::default(),
        };
        let addr = self.addr.or(file.addr).ok_or(ConfigError::NoAddr)?;
        let backend = match (self.backend, file.backend) {
            (Some(b), _) => b,
            (None, Some(name)) => name.parse().map_err(ConfigError::Backend)?,
            (None, None) => rocex_io::BackendKind::Udp,
        };
        let dscp = self.dscp.or(file.dscp).unwrap_or(0);
        if dscp > 63 {
            return Err(ConfigError::Dscp(dscp));
        }
        let window = self
            .window
            .or(file.window)
            .unwrap_or(rocex_proto::MAX_UNACKED_PSNS);
        if !(1..=rocex_proto::MAX_WINDOW).contains(&window) {
            return Err(ConfigError::Window(window));
        }
        let congestion = dcqcn(file.dcqcn.as_ref(), self.dcqcn.as_deref())?;
        let pcap = self.pcap.or(file.pcap);
        let inject = match (self.inject, file.inject) {
            (Some(f), _) => Some(f),
            (None, Some(text)) => Some(text.parse().map_err(ConfigError::Inject)?),
            (None, None) => None,
        };
        let unfit = if backend != rocex_io::BackendKind::Udp {
            Some(DirectUnfit::Backend(backend))
        } else if congestion != rocex_proto::Congestion::default() {
            Some(DirectUnfit::Dcqcn)
        } else if pcap.is_some() {
            Some(DirectUnfit::Pcap)
        } else {
            inject.map(|_| DirectUnfit::Inject)
        };
        let asked = match (self.direct, self.no_direct) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => file.direct,
        };
        let direct = match (asked, unfit) {
            (Some(true), Some(why)) => return Err(ConfigError::Direct(why)),
            (Some(true), None) => DirectSlots::Required,
            (Some(false), _) => DirectSlots::Off,
            (None, Some(why)) => {
                tracing::info!("no direct slots: {why}");
                DirectSlots::Off
            }
            (None, None) => DirectSlots::Offered,
        };
        Ok(Settings {
            addr,
            socket: self
                .socket
                .or(file.socket)
                .unwrap_or_else(|| default_socket(addr)),
            mtu: port_mtu(addr, self.mtu.or(file.mtu))?,
            backend,
            gso: !self.no_gso && file.gso.unwrap_or(true),
            peers_are_rocex: self.peers_are_rocex || file.peers_are_rocex.unwrap_or(false),
            rxe_recovery: self.rxe_recovery || file.rxe_recovery.unwrap_or(false),
            selective_repeat: self.selective_repeat || file.selective_repeat.unwrap_or(false),
            window,
            ecn: self.ecn || file.ecn.unwrap_or(false),
            dscp,
            congestion,
            pcap,
            spin_limit: self.spin_limit.or(file.spin_limit).unwrap_or(2000),
            inject,
            metrics: self.metrics.or(file.metrics),
            direct,
            limits: self.limits.merge(file.limits),
        })
    }
}

/// DCQCN's parameters: the defaults, the file's `[dcqcn]` table over them, the flag's
/// list over that.
fn dcqcn(
    table: Option<&toml::Table>,
    flag: Option<&str>,
) -> Result<rocex_proto::Congestion, ConfigError> {
    let mut c = rocex_proto::Congestion::default();
    for (key, value) in table.into_iter().flatten() {
        let text = match value {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        c.set(key, &text).map_err(ConfigError::Dcqcn)?;
    }
    c.set_all(flag.unwrap_or("")).map_err(ConfigError::Dcqcn)?;
    Ok(c)
}

fn parse_file(p: &Path, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse(p.to_owned(), Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn flags_override_the_file() {
        let dir = std::env::temp_dir().join(format!("rocexd-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(
            &f,
            "addr = \"10.0.0.1\"\nmtu = 1024\nsocket = \"/tmp/x.sock\"\n",
        )
        .unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap(), "--mtu", "2048"]);
        let s = a.settings().unwrap();
        assert_eq!(s.addr, IpAddr::from([10, 0, 0, 1]));
        assert_eq!(s.mtu, Mtu::M2048);
        assert_eq!(s.socket, PathBuf::from("/tmp/x.sock"));
        std::fs::write(&f, "adr = \"10.0.0.1\"\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        assert!(matches!(a.settings(), Err(ConfigError::Parse(..))));
        let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1", "--mtu", "1500"]);
        assert!(matches!(a.settings(), Err(ConfigError::Mtu(1500))));
        let a = Args::parse_from(["rocexd"]);
        assert!(matches!(a.settings(), Err(ConfigError::NoAddr)));
        std::fs::write(
            &f,
            "addr = \"10.0.0.1\"\nbackend = \"uring\"\ngso = false\npeers_are_rocex = true\nrxe_recovery = true\nselective_repeat = true\n",
        )
        .unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        let s = a.settings().unwrap();
        assert_eq!((s.backend, s.gso), (rocex_io::BackendKind::Uring, false));
        assert!(s.peers_are_rocex);
        assert!(s.rxe_recovery);
        assert!(s.selective_repeat);
        let a = Args::parse_from([
            "rocexd",
            "--config",
            f.to_str().unwrap(),
            "--backend",
            "udp",
        ]);
        assert_eq!(a.settings().unwrap().backend, rocex_io::BackendKind::Udp);
        let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1", "--no-gso"]);
        assert!(!a.settings().unwrap().gso);
        std::fs::write(&f, "addr = \"10.0.0.1\"\nmetrics = \"127.0.0.1:9479\"\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        assert_eq!(
            a.settings().unwrap().metrics,
            Some("127.0.0.1:9479".parse().unwrap())
        );
        let a = Args::parse_from([
            "rocexd",
            "--config",
            f.to_str().unwrap(),
            "--metrics",
            "[::1]:1",
        ]);
        assert_eq!(
            a.settings().unwrap().metrics,
            Some("[::1]:1".parse().unwrap())
        );
        std::fs::write(&f, "addr = \"10.0.0.1\"\nmetrics = \"9479\"\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        assert!(matches!(a.settings(), Err(ConfigError::Parse(..))));
        std::fs::write(&f, "addr = \"10.0.0.1\"\nbackend = \"tcp\"\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        assert!(matches!(a.settings(), Err(ConfigError::Backend(_))));
        assert!(Args::try_parse_from(["rocexd", "--backend", "tcp"]).is_err());
        let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1"]);
        let s = a.settings().unwrap();
        assert_eq!((s.ecn, s.dscp), (false, 0));
        std::fs::write(&f, "addr = \"10.0.0.1\"\necn = true\ndscp = 26\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        let s = a.settings().unwrap();
        assert_eq!((s.ecn, s.dscp), (true, 26));
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap(), "--dscp", "46"]);
        assert_eq!(a.settings().unwrap().dscp, 46);
        let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1", "--ecn", "--dscp", "64"]);
        assert!(matches!(a.settings(), Err(ConfigError::Dscp(64))));
        assert_eq!(s.window, 128, "kernel rxe's by default");
        std::fs::write(&f, "addr = \"10.0.0.1\"\nwindow = 512\n").unwrap();
        let a = Args::parse_from(["rocexd", "--config", f.to_str().unwrap()]);
        assert_eq!(a.settings().unwrap().window, 512);
        for bad in ["0", "8193"] {
            let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1", "--window", bad]);
            let e = a.settings().unwrap_err();
            assert!(matches!(e, ConfigError::Window(_)), "{bad}: {e:?}");
            assert_eq!(
                e.to_string(),
                format!("window {bad} is not in 1..=8192 PSNs")
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn dcqcn_parameters_from_the_file_and_the_flag() {
        let dir = std::env::temp_dir().join(format!("rocexd-dcqcn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(
            &f,
            "addr = \"10.0.0.1\"\n[dcqcn]\ng = 0.5\nline_rate_mbps = 10000\nreact = false\n",
        )
        .unwrap();
        let path = f.to_str().unwrap();
        let s = Args::parse_from(["rocexd", "--config", path])
            .settings()
            .unwrap();
        assert_eq!(
            (s.congestion.dcqcn.g, s.congestion.dcqcn.line_rate),
            (0.5, 10e9)
        );
        assert!(!s.congestion.dcqcn.react);
        let a = Args::parse_from(["rocexd", "--config", path, "--dcqcn", "g=0.25,burst=4096"]);
        let c = a.settings().unwrap().congestion;
        assert_eq!(
            (c.dcqcn.g, c.dcqcn.burst, c.dcqcn.line_rate),
            (0.25, 4096, 10e9)
        );
        let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1"]);
        assert_eq!(
            a.settings().unwrap().congestion,
            rocex_proto::Congestion::default()
        );
        for bad in ["gain=1", "g=2", "g", "min_rate_mbps=200000"] {
            let a = Args::parse_from(["rocexd", "--config", path, "--dcqcn", bad]);
            assert!(matches!(a.settings(), Err(ConfigError::Dcqcn(_))), "{bad}");
        }
        std::fs::write(&f, "addr = \"10.0.0.1\"\n[dcqcn]\nalpha = 1\n").unwrap();
        let e = Args::parse_from(["rocexd", "--config", path])
            .settings()
            .unwrap_err();
        assert!(
            e.to_string().starts_with("unknown DCQCN parameter `alpha`"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn direct_by_default_where_it_fits_and_an_error_when_asked_where_not() {
        let dir = std::env::temp_dir().join(format!("rocexd-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(&f, "addr = \"10.0.0.1\"\ndirect = true\n").unwrap();
        let path = f.to_str().unwrap();
        let direct = |args: &[&str]| {
            let a = Args::parse_from(["rocexd", "--addr", "10.0.0.1"].iter().chain(args));
            a.settings().map(|s| s.direct)
        };
        let off = |args: &[&str]| direct(args).unwrap() == DirectSlots::Off;
        assert_eq!(direct(&[]).unwrap(), DirectSlots::Offered);
        assert_eq!(direct(&["--ecn"]).unwrap(), DirectSlots::Offered);
        assert_eq!(direct(&["--direct"]).unwrap(), DirectSlots::Required);
        assert!(off(&["--no-direct"]));
        assert_eq!(direct(&["--config", path]).unwrap(), DirectSlots::Required);
        assert!(off(&["--config", path, "--no-direct"]));
        let unfit: [(&[&str], DirectUnfit); 5] = [
            (
                &["--backend", "afpacket"],
                DirectUnfit::Backend(rocex_io::BackendKind::AfPacket),
            ),
            (
                &["--backend", "uring"],
                DirectUnfit::Backend(rocex_io::BackendKind::Uring),
            ),
            (&["--dcqcn", "g=0.5"], DirectUnfit::Dcqcn),
            (&["--pcap", "x.pcap"], DirectUnfit::Pcap),
            (&["--inject", "loss=0.1"], DirectUnfit::Inject),
        ];
        for (args, why) in unfit {
            assert!(off(args), "{args:?} turns the default off");
            let asked = [args, &["--direct"]].concat();
            match direct(&asked) {
                Err(ConfigError::Direct(w)) => assert_eq!(w, why, "{args:?}"),
                other => panic!("{args:?} --direct: {other:?}"),
            }
            let file = [args, &["--config", path]].concat();
            assert!(
                matches!(direct(&file), Err(ConfigError::Direct(_))),
                "{args:?}"
            );
        }
        let e = direct(&["--backend", "uring", "--direct"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--direct: the direct data path needs the udp backend, not uring"),
            "{e}"
        );
        assert!(Args::try_parse_from(["rocexd", "--direct", "--no-direct"]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_default_mtu_is_what_the_link_carries_as_rxe_counts() {
        // rxe: eth_mtu_int_to_enum(mtu - RXE_MAX_HDR_LENGTH).
        for (link, mtu) in [
            (65536, Mtu::M4096),
            (9000, Mtu::M4096),
            (4176, Mtu::M4096),
            (4175, Mtu::M2048),
            (1500, Mtu::M1024),
            (1104, Mtu::M1024),
            (1103, Mtu::M512),
            (576, Mtu::M256),
            (68, Mtu::M256),
        ] {
            assert_eq!(mtu_for_link(link), mtu, "link MTU {link}");
        }
        // Loopback's link carries 65536; an address no interface holds, the largest.
        let lo = Args::parse_from(["rocexd", "--addr", "127.0.0.1"])
            .settings()
            .unwrap();
        assert_eq!(lo.mtu, Mtu::M4096);
    }
}
