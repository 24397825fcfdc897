//! `rocexd`: the rocex daemon. One RoCE v2 device on one IP address: the engine on a
//! packet I/O backend (by default a batched UDP socket bound to port 4791), served to
//! applications through a Unix control socket and shared-memory rings (`docs/abi.md`,
//! `docs/daemon.md`).

mod client;
mod cm;
mod config;
mod limits;
mod metrics;
mod net;
mod pcap;
mod process_region;
mod pump;
mod server;
mod shared_region;
mod spin;
mod wire_latency;

use std::io::{self, IsTerminal};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;
use rocex_proto::{Config, Engine, QpnSlot};

/// Set by SIGINT/SIGTERM; the event loop checks it every turn (poll(2) wakes with EINTR).
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
        // `sigaction` gets a zeroed struct with the handler and an empty mask, and no
        // SA_RESTART so that poll(2) returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Makes sure the control socket's directory exists: the default run directory is
/// created, any other must exist already (a mistyped `--socket` leaves no directories
/// behind, created as root).
fn socket_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(()),
    };
    if dir == Path::new(config::RUN_DIR) {
        return std::fs::create_dir_all(dir);
    }
    if !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "directory {} does not exist (rocexd creates only {})",
                dir.display(),
                config::RUN_DIR
            ),
        ));
    }
    Ok(())
}

/// Binds the control socket (its directory made sure of by [`socket_dir`]), replacing a
/// stale file but refusing to steal the socket of a daemon that still answers.
fn bind_control(path: &Path) -> io::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("a daemon already serves {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    UnixListener::bind(path)
}

fn seed() -> [u8; 32] {
    let mut s = [0u8; 32];
    if rustix::rand::getrandom(&mut s, rustix::rand::GetRandomFlags::empty()).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        s[..16].copy_from_slice(&t.to_le_bytes());
        s[16..20].copy_from_slice(&std::process::id().to_le_bytes());
    }
    s
}

fn run(settings: config::Settings) -> Result<(), Box<dyn std::error::Error>> {
    let mut cfg = Config::new(settings.addr, seed());
    cfg.port_mtu = settings.mtu;
    cfg.max_cqe = 1 << 16;
    cfg.rxe_recovery = settings.rxe_recovery;
    cfg.selective_repeat = settings.selective_repeat;
    cfg.window = settings.window;
    cfg.congestion = settings.congestion;
    cfg.congestion.ecn = settings.ecn;
    // Checked before the port is taken, so that a bad path fails before anything else.
    socket_dir(&settings.socket)
        .map_err(|e| format!("control socket {}: {e}", settings.socket.display()))?;
    let metrics = match settings.metrics {
        Some(a) => Some(metrics::bind(a).map_err(|e| format!("metrics endpoint {a}: {e}"))?),
        None => None,
    };
    let (backend, group) = net::open(&settings)
        .map_err(|e| format!("{} backend on {}: {e}", settings.backend, settings.addr))?;
    cfg.udp_source_port = backend.fixed_source_port();
    if group.is_some() {
        // The daemon's QPs (QP1 aside) are slot 0's; the clients' engines take the others.
        cfg.qpn_slot = Some(QpnSlot {
            bits: net::SLOT_BITS,
            slot: 0,
        });
    }
    let direct = group.map(|g| {
        let grant = net::grant(&cfg, g.options());
        server::Direct::new(g, grant, settings.limits.max_qps as usize)
    });
    let engine = Engine::new(cfg);
    let tap = match &settings.pcap {
        Some(p) => Some(pcap::Tap::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let listener = bind_control(&settings.socket)
        .map_err(|e| format!("control socket {}: {e}", settings.socket.display()))?;
    if let Some(m) = metrics {
        metrics::spawn(m, settings.socket.clone()).map_err(|e| format!("metrics endpoint: {e}"))?;
    }
    tracing::info!(
        addr = %settings.addr,
        socket = %settings.socket.display(),
        mtu = settings.mtu.bytes(),
        backend = %settings.backend,
        gso = settings.gso,
        peers_are_rocex = settings.peers_are_rocex,
        ecn = settings.ecn,
        dscp = settings.dscp,
        metrics = ?settings.metrics,
        direct = ?settings.direct,
        "rocexd serving"
    );
    let socket = settings.socket.clone();
    let local = backend.local();
    let watch = net::Watch::new(net::options(&settings), local, tap);
    let mut server = server::Server::new(
        net::driver(engine, backend, &settings),
        watch,
        listener,
        settings,
        direct,
    )?;
    let r = server.run(&STOP);
    let _ = std::fs::remove_file(&socket);
    drop(server);
    r?;
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let settings = match config::Args::parse().settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rocexd: {e}");
            return ExitCode::from(2);
        }
    };
    install_signals();
    match run(settings) {
        Ok(()) => ExitCode::SUCCESS,
        // Once, plainly: a fatal error is not a log record to filter out.
        Err(e) => {
            eprintln!("rocexd: {e}");
            ExitCode::FAILURE
        }
    }
}
