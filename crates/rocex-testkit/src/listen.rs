//! Readiness of a server a test starts: the address a process listens on (TCP) or has
//! bound (UDP), read from `/proc`, so that a test starts its client once the server is
//! there rather than after a guess of a sleep, and a server given port 0 tells the test
//! which port the kernel chose (no port picked by binding and releasing it, which another
//! process may take in between).
//!
//! `/proc/PID/fd` names each socket's inode; `/proc/PID/net/{tcp,udp}{,6}` lists the
//! sockets of the process's network namespace with their inodes (`proc(5)`), so this works
//! for a server inside a namespace too (`ip netns exec` execs the program).

use std::collections::HashSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::process::Child;
use std::time::{Duration, Instant};

/// Which sockets count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP sockets in the LISTEN state.
    Tcp,
    /// Bound UDP sockets.
    Udp,
}

/// `/proc/net/tcp`'s state number for LISTEN (`TCP_LISTEN` in the kernel's `tcp_states.h`).
const TCP_LISTEN: &str = "0A";

/// The local addresses of `pid`'s own sockets of `proto` (TCP: listening ones), empty
/// when the process is gone.
pub fn bound(pid: u32, proto: Proto) -> Vec<SocketAddr> {
    let inodes: HashSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_str()?;
            l.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect();
    let name = match proto {
        Proto::Tcp => "tcp",
        Proto::Udp => "udp",
    };
    [name.to_owned(), format!("{name}6")]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|table| parse_table(&table, proto))
        .filter(|(_, inode)| inodes.contains(inode))
        .map(|(addr, _)| addr)
        .collect()
}

/// `(local address, inode)` of each row of a `/proc/net/{tcp,udp}{,6}` table (the header
/// line aside) that counts for `proto`.
fn parse_table(table: &str, proto: Proto) -> Vec<(SocketAddr, u64)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            if proto == Proto::Tcp && *state != TCP_LISTEN {
                return None;
            }
            Some((parse_addr(local)?, inode.parse().ok()?))
        })
        .collect()
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address as the kernel
/// prints it, in 32-bit words of host byte order, and the port in hex.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        ip.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// A TCP port on every address that refuses connections for as long as the returned
/// socket lives: bound, never listening, so no other process can listen there meanwhile
/// (a port found free by binding and closing a listener may be taken before it is used).
pub fn refusing_port() -> (OwnedFd, u16) {
    use rustix::net::{AddressFamily, SocketType, ipproto};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, Some(ipproto::TCP))
        .expect("a TCP socket");
    rustix::net::bind(&fd, &SocketAddr::from(([0, 0, 0, 0], 0))).expect("bind port 0");
    let at = rustix::net::getsockname(&fd).expect("its address");
    let port = SocketAddr::try_from(at).expect("an IPv4 address").port();
    (fd, port)
}

/// Waits until `child` has a socket of `proto` (TCP: listening) and returns its address.
///
/// # Panics
///
/// When `child` exits first (quoting what it printed to a piped stderr) or after `limit`:
/// `who` names it.
#[track_caller]
pub fn wait_bound(child: &mut Child, proto: Proto, limit: Duration, who: &str) -> SocketAddr {
    let end = Instant::now() + limit;
    loop {
        if let Some(a) = bound(child.id(), proto).first() {
            return *a;
        }
        if let Some(st) = child.try_wait().expect("wait for a child") {
            let mut said = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut said);
            }
            panic!("{who} exited ({st}) before it bound a {proto:?} socket: {said}");
        }
        assert!(
            Instant::now() < end,
            "{who} bound no {proto:?} socket within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows as Linux 6.1 prints them.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A2B4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0
";

    #[test]
    fn listening_rows_and_addresses_are_read_as_the_kernel_prints_them() {
        assert_eq!(
            parse_table(TCP, Proto::Tcp),
            [("127.0.0.1:8080".parse().unwrap(), 4242)]
        );
        assert_eq!(parse_table(TCP, Proto::Udp).len(), 2);
        assert_eq!(
            parse_table(TCP6, Proto::Tcp),
            [("[::1]:22".parse().unwrap(), 99)]
        );
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("0100007:1F90"), None);
    }

    #[test]
    fn a_listener_of_this_process_is_found_and_others_are_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let me = std::process::id();
        assert!(bound(me, Proto::Tcp).contains(&l.local_addr().unwrap()));
        assert!(bound(me, Proto::Udp).contains(&u.local_addr().unwrap()));
        assert!(!bound(me, Proto::Tcp).contains(&u.local_addr().unwrap()));
        let at = l.local_addr().unwrap();
        drop(l);
        assert!(!bound(me, Proto::Tcp).contains(&at));
    }

    #[test]
    fn a_refusing_port_refuses_and_is_not_listed() {
        let (_fd, port) = refusing_port();
        let e = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(
            !bound(std::process::id(), Proto::Tcp)
                .iter()
                .any(|a| a.port() == port)
        );
    }
}
