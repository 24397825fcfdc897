//! The out-of-band connection: the probe's line protocol over TCP (docs/rxe-lab.md, "Probe
//! out-of-band protocol (version 1)"), and the QP line each side sends.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant as WallClock};

use rocex_io::Driver;

use super::{Res, fatal};

const LINE_MAX_LEN: usize = 512;

/// The out-of-band connection: lines in, lines out. Once the device runs, every wait for
/// a line keeps the engine answering its peer.
pub(super) struct Line {
    stream: TcpStream,
    buf: Vec<u8>,
    timeout: Duration,
}

impl Line {
    pub(super) fn new(stream: TcpStream, timeout: Duration) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            stream,
            buf: Vec::new(),
            timeout,
        })
    }

    pub(super) fn send(&mut self, line: &str) -> Res<()> {
        let mut data = line.as_bytes().to_vec();
        data.truncate(LINE_MAX_LEN - 2);
        data.push(b'\n');
        let mut off = 0;
        let start = WallClock::now();
        while off < data.len() {
            match self.stream.write(&data[off..]) {
                Ok(0) => return fatal("oob write: connection closed"),
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if start.elapsed() > self.timeout {
                        return fatal("oob write: timeout");
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return fatal(format!("oob write: {e}")),
            }
        }
        Ok(())
    }

    /// The next line, pumping `driver` (if any) while none is there.
    pub(super) fn recv(&mut self, mut driver: Option<&mut Driver>) -> Res<String> {
        let start = WallClock::now();
        let mut tmp = [0u8; 512];
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let mut line = String::from_utf8_lossy(&line[..i]).into_owned();
                line.truncate(LINE_MAX_LEN - 1);
                return Ok(line);
            }
            match self.stream.read(&mut tmp) {
                Ok(0) => return fatal("oob: peer closed the connection"),
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return fatal(format!("oob read: {e}")),
            }
            if start.elapsed() > self.timeout {
                return fatal("oob read: timeout");
            }
            match driver.as_deref_mut() {
                Some(d) => d.wait(Duration::from_millis(2))?,
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
}

pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

pub(super) fn gid_hex(g: &[u8; 16]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

/// The peer's QP line.
#[derive(Debug, Clone, Copy)]
pub(super) struct PeerInfo {
    pub(super) qpn: u32,
    pub(super) psn: u32,
    pub(super) gid: [u8; 16],
    pub(super) rkey: u32,
    pub(super) vaddr: u64,
    pub(super) len: u64,
}

pub(super) fn parse_qp_line(line: &str) -> Option<PeerInfo> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 7 || f[0] != "QP" || f[3].len() != 32 {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        *b = u8::from_str_radix(f[3].get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(PeerInfo {
        qpn: u32::from_str_radix(f[1], 16).ok()?,
        psn: u32::from_str_radix(f[2], 16).ok()?,
        gid,
        rkey: u32::from_str_radix(f[4], 16).ok()?,
        vaddr: u64::from_str_radix(f[5], 16).ok()?,
        len: f[6].parse().ok()?,
    })
}

pub(super) fn tcp_connect(host: &str, port: u16, wait_s: u64) -> Res<TcpStream> {
    let end = WallClock::now() + Duration::from_secs(wait_s);
    loop {
        if let Ok(s) = TcpStream::connect((host, port)) {
            return Ok(s);
        }
        if WallClock::now() >= end {
            return fatal(format!("cannot connect to {host}:{port}"));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(super) fn tcp_accept(port: u16) -> Res<TcpStream> {
    // Dual-stack where the system allows it (bindv6only 0), else IPv4.
    let l = TcpListener::bind(SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port)))
        .or_else(|_| TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port))));
    let l = match l {
        Ok(l) => l,
        Err(e) => return fatal(format!("listen on {port}: {e}")),
    };
    say!("server", "listening on tcp port {port}");
    match l.accept() {
        Ok((s, _)) => Ok(s),
        Err(e) => fatal(format!("accept: {e}")),
    }
}
