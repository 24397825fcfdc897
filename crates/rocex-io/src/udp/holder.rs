//! Binding RoCE's UDP port with one owner per address, and naming the owner when it is
//! taken.
//!
//! Every backend binds `addr:4791` without `SO_REUSEADDR` (afpacket binds it too, as its
//! guard against the kernel): two engines on one address would otherwise share the port,
//! and the kernel would hand each datagram to one of them at random, the other's peers
//! timing out. A restart needs no reuse option: a closed UDP socket frees its port at once
//! (UDP has no TIME_WAIT). When the bind fails with `EADDRINUSE`, the error names the
//! socket holding the port, found as `ss -lup` finds it: the socket's inode in
//! `/proc/net/udp` (or `udp6`), then the process with a descriptor for that inode. A
//! steering group (`crate::SteerGroup`) shares the port among its own sockets only, and
//! the same tables tell it whether a socket it handed out is still held by another process.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsRawFd;

use rocex_wire::ROCE_V2_PORT;
use socket2::Socket;

/// Binds `s` to `local:4791`; an address already in use is refused with an error that
/// names the address and, when this process can see it, the process that holds it.
pub(crate) fn bind_roce_port(s: &Socket, local: IpAddr) -> io::Result<()> {
    let addr = SocketAddr::new(local, ROCE_V2_PORT);
    s.bind(&addr.into()).map_err(|e| {
        if e.kind() != io::ErrorKind::AddrInUse {
            return io::Error::new(e.kind(), format!("cannot bind UDP {addr}: {e}"));
        }
        in_use(addr)
    })
}

/// `EADDRINUSE` for `addr`, naming who holds it.
fn in_use(addr: SocketAddr) -> io::Error {
    let who = holders(addr).map_or_else(
        || {
            "a socket of no process this user can see (another user's, or the kernel's \
            rdma_rxe)"
                .to_owned()
        },
        |h| h.join(", "),
    );
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "UDP {addr} is already in use by {who}: one RoCE engine per address; stop \
             it or give this one another address"
        ),
    )
}

/// `EADDRINUSE` naming the holders when a UDP socket other than `ours` (inodes) keeps
/// `local:4791` from being bound: what a group of `SO_REUSEPORT` sockets checks before and
/// after it binds, since a second group of the same user would join it instead of failing.
pub(crate) fn bound_elsewhere(local: IpAddr, ours: &[u64]) -> io::Result<()> {
    let addr = SocketAddr::new(local, ROCE_V2_PORT);
    if blocking_inodes(addr).iter().all(|i| ours.contains(i)) {
        Ok(())
    } else {
        Err(in_use(addr))
    }
}

/// The inode of the socket `fd`, as `/proc/self/fd` names it (`socket:[N]`).
pub(crate) fn socket_inode(fd: &impl AsRawFd) -> io::Result<u64> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    inode_of(&link).ok_or_else(|| io::Error::other(format!("{} is not a socket", link.display())))
}

/// The inode a descriptor's `/proc` link names when it is a socket (`socket:[N]`).
fn inode_of(link: &std::path::Path) -> Option<u64> {
    link.to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Every process in `/proc` with the sockets its descriptors name, or the error reading
/// them gave (NotFound: it has exited since the directory was listed).
fn processes() -> io::Result<impl Iterator<Item = (u32, io::Result<Vec<u64>>)>> {
    Ok(std::fs::read_dir("/proc")?.flatten().filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        let sockets = std::fs::read_dir(entry.path().join("fd")).map(|fds| {
            fds.flatten()
                .filter_map(|fd| inode_of(&std::fs::read_link(fd.path()).ok()?))
                .collect()
        });
        Some((pid, sockets))
    }))
}

/// Which of the sockets `inodes` a process other than this one may hold a descriptor of,
/// in one pass over `/proc`: those one does, and all of them when a process's descriptors
/// cannot be read (another user's, to a daemon that is not root), since it might.
pub(crate) fn held_elsewhere(inodes: &[u64]) -> Vec<u64> {
    if inodes.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let Ok(procs) = processes() else {
        return inodes.to_vec();
    };
    let mut held = Vec::new();
    for (_, sockets) in procs.filter(|(pid, _)| *pid != me) {
        match sockets {
            Ok(s) => held.extend(s.into_iter().filter(|i| inodes.contains(i))),
            // Gone since the directory was listed: holds nothing.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => return inodes.to_vec(),
        }
    }
    held.sort_unstable();
    held.dedup();
    held
}

/// The inodes of the UDP sockets that keep `addr` from being bound (one bound to `addr`
/// itself or to the wildcard address on its port), from `/proc/net/udp` and `udp6`.
fn blocking_inodes(addr: SocketAddr) -> Vec<u64> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/udp", "/proc/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        inodes.extend(text.lines().skip(1).filter_map(|l| {
            let (bound, inode) = parse_line(l)?;
            (bound.port() == addr.port() && blocks(bound.ip(), addr.ip())).then_some(inode)
        }));
    }
    inodes
}

/// The processes holding a UDP socket that keeps `addr` from being bound (one bound to
/// `addr` itself or to the wildcard address on its port), as `pid N (command line)`;
/// `None` when there is none this process can see.
fn holders(addr: SocketAddr) -> Option<Vec<String>> {
    let inodes = blocking_inodes(addr);
    if inodes.is_empty() {
        return None;
    }
    let found: Vec<String> = processes()
        .ok()?
        .filter(|(_, s)| {
            s.as_ref()
                .is_ok_and(|s| s.iter().any(|i| inodes.contains(i)))
        })
        .map(|(pid, _)| format!("pid {pid} ({})", command_line(pid)))
        .collect();
    (!found.is_empty()).then_some(found)
}

/// Whether a socket bound to `bound` keeps `want` from being bound on the same port.
fn blocks(bound: IpAddr, want: IpAddr) -> bool {
    let mapped = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    bound.is_unspecified() || mapped(bound) == mapped(want)
}

/// A process's command line with its arguments joined by spaces, or its name.
fn command_line(pid: u32) -> String {
    let args = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let line = args
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ");
    if line.is_empty() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        return comm.trim().to_owned();
    }
    line
}

/// The local address and the inode of one line of `/proc/net/udp{,6}`: `sl local remote st
/// tx:rx tr:tm retrnsmt uid timeout inode ...`, an address as hexadecimal 32-bit words
/// whose bytes in memory are the address's (`udp4_format_sock`, `udp6_sock_seq_show`).
fn parse_line(line: &str) -> Option<(SocketAddr, u64)> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (ip, port) = fields.get(1)?.split_once(':')?;
    let inode = fields.get(9)?.parse().ok()?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        ip.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?.to_ne_bytes())),
        32 => {
            let mut b = [0u8; 16];
            for (i, chunk) in b.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(i)?.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some((SocketAddr::new(ip, port), inode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_lines_read_as_the_kernel_writes_them() {
        // Little-endian words, as on x86-64 and arm64.
        if cfg!(target_endian = "little") {
            let v4 = "  12: 0500007F:12B7 00000000:0000 07 00000000:00000000 00:00000000 \
                      00000000     0        0 98765 2 0000000000000000 0";
            assert_eq!(
                parse_line(v4),
                Some(("127.0.0.5:4791".parse().unwrap(), 98765))
            );
            let v6 = "  3: 00000000000000000000000001000000:12B7 \
                      00000000000000000000000000000000:0000 07 00000000:00000000 \
                      00:00000000 00000000     0        0 4242 2 0000000000000000 0";
            assert_eq!(parse_line(v6), Some(("[::1]:4791".parse().unwrap(), 4242)));
        }
        assert_eq!(parse_line("  sl  local_address rem_address   st"), None);
    }

    #[test]
    fn the_wildcard_and_a_mapped_address_block_an_address() {
        let a: IpAddr = "127.0.0.5".parse().unwrap();
        assert!(blocks("0.0.0.0".parse().unwrap(), a));
        assert!(blocks("::".parse().unwrap(), a));
        assert!(blocks("::ffff:127.0.0.5".parse().unwrap(), a));
        assert!(!blocks("127.0.0.6".parse().unwrap(), a));
    }
}
