//! `rocex baseline`: what the kernel's own UDP path does on this host, and what the ICRC
//! costs its CPU, as the references the performance comparison measures rocex against
//! (docs/performance.md).
//!
//! Native and minimal on purpose: one datagram per system call, no protocol, nothing but
//! the socket calls, so the numbers are the kernel's ceiling and not a language runtime's.
//! Each mode prints one JSON object on stdout.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(clap::Subcommand, Debug)]
enum Mode {
    /// Count datagrams, one `recv` each, from the first until SECONDS pass or the sender
    /// stops (half a second of silence).
    Sink {
        /// Address and port to bind.
        bind: SocketAddr,
        /// Longest run, in seconds.
        seconds: f64,
    },
    /// Send SIZE-byte datagrams, one `send` each, for SECONDS.
    Blast {
        /// Where to send.
        dest: SocketAddr,
        /// UDP payload bytes.
        size: usize,
        /// How long, in seconds.
        seconds: f64,
    },
    /// Echo every datagram back, busy-polling a non-blocking socket, until a one-byte
    /// datagram or SECONDS pass.
    Pong {
        /// Address and port to bind.
        bind: SocketAddr,
        /// Longest run, in seconds.
        seconds: f64,
    },
    /// Busy-polling ping-pong client: ITERS round trips of SIZE bytes (after a tenth as
    /// many, at most 1000, to warm up), then the round-trip distribution.
    Ping {
        /// The pong's address.
        dest: SocketAddr,
        /// UDP payload bytes.
        size: usize,
        /// Round trips timed.
        iters: usize,
    },
    /// Computes the ICRC of one WRITE middle packet (MTU 4096: 4108 bytes) over and over
    /// on one core for SECONDS: the CPU every RoCE v2 byte costs a software sender and
    /// again its receiver, which a TCP stream does not pay (its checksum is offloaded).
    Icrc {
        /// How long, in seconds.
        seconds: f64,
    },
}

pub(crate) fn run(args: &Args) -> ExitCode {
    let r = match args.mode {
        Mode::Sink { bind, seconds } => sink(bind, seconds),
        Mode::Blast {
            dest,
            size,
            seconds,
        } => blast(dest, size, seconds),
        Mode::Pong { bind, seconds } => pong(bind, seconds),
        Mode::Ping { dest, size, iters } => ping(dest, size, iters),
        Mode::Icrc { seconds } => icrc(seconds),
    };
    match r {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocex baseline: {e}");
            ExitCode::FAILURE
        }
    }
}

fn socket(addr: SocketAddr) -> io::Result<Socket> {
    Socket::new(Domain::for_address(addr), Type::DGRAM, None)
}

fn sink(bind: SocketAddr, seconds: f64) -> io::Result<serde_json::Value> {
    let s = socket(bind)?;
    // What rocex's UDP port asks for (the kernel caps it at net.core.rmem_max).
    s.set_recv_buffer_size(8 << 20)?;
    s.bind(&bind.into())?;
    let s = UdpSocket::from(s);
    let quiet = Duration::from_millis(500);
    s.set_read_timeout(Some(quiet))?;
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut first = None;
    let mut last = Instant::now();
    eprintln!("ready");
    while last < deadline {
        match s.recv(&mut buf) {
            Ok(k) => {
                last = Instant::now();
                // The window opens at the first datagram.
                if first.is_none() {
                    first = Some(last);
                } else {
                    n += 1;
                    bytes += k as u64;
                }
            }
            Err(e) if is_timeout(&e) => {
                if first.is_some() {
                    break;
                }
                last = Instant::now();
            }
            Err(e) => return Err(e),
        }
    }
    let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    Ok(serde_json::json!({
        "received": n,
        "seconds": secs,
        "mpps": per_s(n as f64) / 1e6,
        "gbps_payload": per_s(bytes as f64 * 8.0) / 1e9,
    }))
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn blast(dest: SocketAddr, size: usize, seconds: f64) -> io::Result<serde_json::Value> {
    let s = socket(dest)?;
    s.set_send_buffer_size(8 << 20)?;
    let s = UdpSocket::from(s);
    s.connect(dest)?;
    let payload = vec![0u8; size];
    let (mut n, mut errors) = (0u64, 0u64);
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(seconds);
    loop {
        for _ in 0..64 {
            match s.send(&payload) {
                Ok(_) => n += 1,
                // ENOBUFS or a refused port: the sender outran the path; counted.
                Err(_) => errors += 1,
            }
        }
        if Instant::now() >= end {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(serde_json::json!({
        "sent": n,
        "errors": errors,
        "seconds": secs,
        "mpps": n as f64 / secs / 1e6,
    }))
}

fn pong(bind: SocketAddr, seconds: f64) -> io::Result<serde_json::Value> {
    let s = UdpSocket::bind(bind)?;
    s.set_nonblocking(true)?;
    let mut buf = vec![0u8; 65536];
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    let mut spins = 0u32;
    eprintln!("ready");
    loop {
        match s.recv_from(&mut buf) {
            Ok((1, _)) => break, // the client's "stop"
            Ok((k, src)) => {
                s.send_to(&buf[..k], src)?;
                n += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                spins = spins.wrapping_add(1);
                if spins % 4096 == 0 && Instant::now() > end {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(serde_json::json!({ "echoed": n }))
}

fn ping(dest: SocketAddr, size: usize, iters: usize) -> io::Result<serde_json::Value> {
    if iters == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ITERS must be at least 1",
        ));
    }
    let s = UdpSocket::bind(SocketAddr::new(unspecified(dest), 0))?;
    s.connect(dest)?;
    s.set_nonblocking(true)?;
    let payload = vec![0u8; size.max(2)];
    let mut buf = vec![0u8; 65536];
    let warm = (iters / 10).min(1000);
    let mut rtt = Vec::with_capacity(iters);
    let mut spins = 0u64;
    let stall = Duration::from_secs(5);
    for i in 0..warm + iters {
        let t0 = Instant::now();
        s.send(&payload)?;
        loop {
            match s.recv(&mut buf) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    spins += 1;
                    if spins % 4096 == 0 && t0.elapsed() > stall {
                        return Err(io::Error::other(format!("echo {i} did not come back")));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if i >= warm {
            rtt.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    let _ = s.send(&[0]);
    rtt.sort_by(f64::total_cmp);
    let q = |p: f64| rtt[((p * rtt.len() as f64) as usize).min(rtt.len() - 1)];
    Ok(serde_json::json!({
        "iters": iters,
        "size": size,
        "rtt_us_p50": q(0.5),
        "rtt_us_p99": q(0.99),
        "rtt_us_p999": q(0.999),
        "rtt_us_min": rtt[0],
        "rtt_us_max": rtt[rtt.len() - 1],
        "spins_per_rtt": spins as f64 / (warm + iters) as f64,
        "recv_call_us": empty_recv_us()?,
    }))
}

fn unspecified(dest: SocketAddr) -> std::net::IpAddr {
    match dest {
        SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}

/// The cost of one non-blocking `recv` that finds nothing: what a busy poll pays per spin.
fn empty_recv_us() -> io::Result<f64> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_nonblocking(true)?;
    let mut buf = [0u8; 64];
    let k = 20_000;
    let t0 = Instant::now();
    for _ in 0..k {
        let _ = s.recv(&mut buf);
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(k))
}

fn icrc(seconds: f64) -> io::Result<serde_json::Value> {
    use rocex_wire::icrc::{IcrcForm, compute_for};
    use rocex_wire::{Opcode, ROCE_V2_PORT, bth};
    let (src, dst) = ([198, 18, 0, 1].into(), [198, 18, 0, 2].into());
    // BTH and 4096 bytes of data, as rocex's sender hands them to the ICRC.
    let mut packet = vec![0x5au8; bth::LEN + 4096];
    packet[0] = Opcode::RC_RDMA_WRITE_MIDDLE.0;
    let mut n = 0u64;
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(seconds);
    loop {
        for _ in 0..256 {
            packet[bth::LEN] = n as u8; // one byte differs each time: nothing to hoist
            let crc = compute_for(src, dst, 49152, ROCE_V2_PORT, &packet, IcrcForm::Spec)
                .map_err(|e| io::Error::other(e.to_string()))?;
            std::hint::black_box(crc);
            n += 1;
        }
        if Instant::now() >= end {
            break;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let bytes = n as f64 * packet.len() as f64;
    Ok(serde_json::json!({
        "packets": n,
        "packet_bytes": packet.len(),
        "seconds": secs,
        "ns_per_packet": secs * 1e9 / n as f64,
        "gbps": bytes * 8.0 / secs / 1e9,
    }))
}
