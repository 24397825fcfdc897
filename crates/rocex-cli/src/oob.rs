//! Out-of-band connection setup as libibverbs' examples and perftest do it: a TCP
//! connection over which each side sends its LID, QPN, PSN and GID, and the RoCE v2 GID
//! of an IP address.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What each side tells the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dest {
    pub(crate) lid: u16,
    pub(crate) qpn: u32,
    pub(crate) psn: u32,
    pub(crate) gid: [u8; 16],
}

// The GID of an address and back: rdma_cm's, which the exchanges use too.
pub(crate) use rocex_cm::path::{gid_of, ip_of_gid as ip_of};

/// ibv_rc_pingpong's message: `"%04x:%06x:%06x:%s"` with the GID as 32 hex digits
/// (`gid_to_wire_gid`), sent with its terminating NUL: 52 bytes.
pub(crate) const MSG_LEN: usize = 52;

impl Dest {
    pub(crate) fn encode(&self) -> [u8; MSG_LEN] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn, self.psn);
        let mut out = [0u8; MSG_LEN];
        out[..text.len()].copy_from_slice(text.as_bytes());
        out
    }

    pub(crate) fn decode(msg: &[u8]) -> io::Result<Self> {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad peer address message: {why}"),
            )
        };
        let text = std::str::from_utf8(msg)
            .map_err(|_| bad("not text"))?
            .trim_end_matches('\0');
        let mut parts = text.split(':');
        let mut hex = |n: usize| -> io::Result<u32> {
            let p = parts.next().ok_or_else(|| bad("too few fields"))?;
            if p.len() != n {
                return Err(bad("a field has the wrong width"));
            }
            u32::from_str_radix(p, 16).map_err(|_| bad("not hexadecimal"))
        };
        let lid = hex(4)? as u16;
        let qpn = hex(6)?;
        let psn = hex(6)?;
        let g = parts.next().ok_or_else(|| bad("no GID"))?;
        if g.len() != 32 {
            return Err(bad("the GID is not 32 hex digits"));
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16)
                .map_err(|_| bad("the GID is not hexadecimal"))?;
        }
        Ok(Self { lid, qpn, psn, gid })
    }
}

/// How long a client waits for its server to start listening, unless told otherwise.
pub(crate) const CONNECT_WAIT: Duration = Duration::from_secs(20);

/// An error that says which address it concerns.
fn at(addr: impl std::fmt::Display, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {addr}: {e}"))
}

/// Connects to `server` (a name or address) on TCP `port`. A name that does not resolve
/// fails at once; a server that refuses or does not answer (it may still be starting, or
/// a SYN was lost) is tried again for up to `wait` in all, after one line on stderr that
/// says so; each try gives up after a second, so that no kernel timeout outlasts `wait`.
pub(crate) fn connect(
    tool: &str,
    server: &str,
    port: u16,
    wait: Duration,
) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (server, port)
        .to_socket_addrs()
        .map_err(|e| at(format!("{server} (port {port})"), "cannot resolve", e))?
        .collect();
    let Some(&first) = addrs.first() else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {server}: no address"),
        ));
    };
    let start = Instant::now();
    let mut told = false;
    loop {
        let mut last = (first, io::Error::from(io::ErrorKind::ConnectionRefused));
        for &addr in &addrs {
            let left = wait.saturating_sub(start.elapsed());
            let each = left.clamp(Duration::from_millis(100), Duration::from_secs(1));
            match TcpStream::connect_timeout(&addr, each) {
                Ok(s) => {
                    s.set_read_timeout(Some(Duration::from_secs(60)))?;
                    return Ok(s);
                }
                Err(e) => last = (addr, e),
            }
        }
        let (addr, e) = last;
        // A refusal or silence may change; anything else (no route, ...) will not.
        let again = matches!(
            e.kind(),
            io::ErrorKind::ConnectionRefused | io::ErrorKind::TimedOut
        );
        if !again || start.elapsed() >= wait {
            let waited = if told {
                format!(" (waited {} s)", wait.as_secs_f64())
            } else {
                String::new()
            };
            let e = at(addr, "cannot connect to", e);
            return Err(io::Error::new(e.kind(), format!("{e}{waited}")));
        }
        if !told {
            let why = if e.kind() == io::ErrorKind::TimedOut {
                "nothing answers"
            } else {
                "nothing listens"
            };
            eprintln!(
                "{tool}: {why} on {addr} yet; trying again for up to {} s",
                wait.as_secs_f64()
            );
            told = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits for one client on TCP `port` (all addresses).
pub(crate) fn accept(port: u16) -> io::Result<TcpStream> {
    let addr = SocketAddr::from(([0, 0, 0, 0], port));
    let listener = TcpListener::bind(addr).map_err(|e| at(addr, "cannot listen on", e))?;
    let (s, _) = listener
        .accept()
        .map_err(|e| at(addr, "cannot accept a client on", e))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    Ok(s)
}

/// `e` with the peer's address in front, for errors of an established exchange.
pub(crate) fn with_peer(s: &TcpStream, e: io::Error) -> io::Error {
    match s.peer_addr() {
        Ok(peer) => at(peer, "out-of-band exchange with", e),
        Err(_) => e,
    }
}

/// Sends our address message.
pub(crate) fn send(s: &mut TcpStream, d: &Dest) -> io::Result<()> {
    s.write_all(&d.encode())
}

/// Reads the peer's address message.
pub(crate) fn recv(s: &mut TcpStream) -> io::Result<Dest> {
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg)?;
    Dest::decode(&msg)
}

/// The client's last word: "done" with its NUL.
pub(crate) fn send_done(s: &mut TcpStream) -> io::Result<()> {
    s.write_all(b"done\0")
}

/// The server waits for "done"; a client that closes at once is fine too.
pub(crate) fn wait_done(s: &mut TcpStream) {
    let mut done = [0u8; 5];
    let _ = s.read(&mut done);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn message_matches_rc_pingpong() {
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xe4792e,
            gid: gid_of([198, 18, 0, 11].into()),
        };
        let m = d.encode();
        assert_eq!(
            &m[..51],
            b"0000:000011:e4792e:00000000000000000000ffffc612000b"
        );
        assert_eq!(m[51], 0);
        assert_eq!(Dest::decode(&m).unwrap(), d);
        assert_eq!(ip_of(d.gid), IpAddr::from([198, 18, 0, 11]));
        assert!(Dest::decode(b"0000:11:e4792e:00").is_err());
    }
}
