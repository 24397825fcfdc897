//! The socket every UDP-based backend runs on: bound to `local:4791`, DF with
//! identification 0, large buffers, the options' DSCP and ECN, and over IPv6 zero UDP
//! checksums accepted.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;

use socket2::{Domain, Protocol, Socket, Type};

use super::{bind_roce_port, sys};
use crate::BackendOptions;

/// A blocking UDP socket bound to `local:4791` as the UDP and uring backends use it: DF
/// with identification 0, 8 MiB buffers, the options' DSCP and ECN, and over IPv6 zero
/// checksums accepted.
pub(crate) fn roce_socket(local: IpAddr, opts: BackendOptions) -> io::Result<Socket> {
    let s = unbound_roce_socket(local, opts)?;
    bind_roce_port(&s, local)?;
    Ok(s)
}

/// [`roce_socket`] before its bind, for a caller that sets more options first (a steering
/// group's `SO_REUSEPORT`).
pub(crate) fn unbound_roce_socket(local: IpAddr, opts: BackendOptions) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(SocketAddr::new(local, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    set_buffers(&s);
    set_pmtudisc_do(&s, local.is_ipv4())?;
    set_tos(&s, local.is_ipv4(), opts)?;
    if local.is_ipv6() {
        accept_zero_checksums(&s)?;
    }
    Ok(s)
}

/// What a port sets on its socket however it was made: non-blocking, UDP GRO unless the
/// options say no, and the received TOS reported (the ECN field DCQCN's notification point
/// reads).
pub(crate) fn configure(sock: &UdpSocket, v4: bool, opts: BackendOptions) -> io::Result<()> {
    sock.set_nonblocking(true)?;
    // A kernel without UDP GRO delivers datagrams one by one, which is also correct.
    if !opts.no_gro {
        let _ = sys::enable_gro(sock.as_fd());
    }
    sys::enable_recv_tos(sock.as_fd(), v4)
}

/// 8 MiB each way: a window of 128 requests of 64 KiB arrives as one burst, and a receive
/// buffer that overflows drops packets the sender must then resend (go-back-N resends the
/// whole window). The plain options are capped at `net.core.rmem_max`/`wmem_max`, 208 KiB
/// by default, about 25 packets of 4 KiB in a slow receiver's queue; the `FORCE` options
/// pass the cap with `CAP_NET_ADMIN` (rocexd, and so its direct clients' sockets), the
/// plain ones do what the cap allows without it.
fn set_buffers(s: &Socket) {
    const SIZE: libc::c_int = 8 << 20;
    let fd = s.as_fd();
    if sys::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, SIZE).is_err() {
        let _ = s.set_recv_buffer_size(SIZE as usize);
    }
    if sys::set_int_opt(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, SIZE).is_err() {
        let _ = s.set_send_buffer_size(SIZE as usize);
    }
}

/// The datagrams the kernel has dropped at the socket (`SO_MEMINFO`'s `SK_MEMINFO_DROPS`,
/// `linux/sock_diag.h`): a full receive queue, a filter's refusal. 0 where unreadable.
pub(crate) fn kernel_drops(sock: &UdpSocket) -> u64 {
    /// `SK_MEMINFO_VARS` and `SK_MEMINFO_DROPS`.
    const VARS: usize = 9;
    const DROPS: usize = 8;
    let info: io::Result<[u32; VARS]> =
        crate::sockopt::get(sock, libc::SOL_SOCKET, libc::SO_MEMINFO);
    info.map_or(0, |i| u64::from(i[DROPS]))
}

/// Sends datagrams with the options' DSCP and ECN (`IP_TOS`/`IPV6_TCLASS`) unless their
/// message says otherwise.
fn set_tos(s: &Socket, v4: bool, opts: BackendOptions) -> io::Result<()> {
    if opts.dscp > 63 || opts.ecn > 3 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "DSCP {} / ECN {} out of range (0..64 / 0..4)",
                opts.dscp, opts.ecn
            ),
        ));
    }
    let tos = u32::from(opts.dscp << 2 | opts.ecn);
    if v4 {
        s.set_tos_v4(tos)
    } else {
        s.set_tclass_v6(tos)
    }
}

fn set_pmtudisc_do(s: &Socket, v4: bool) -> io::Result<()> {
    let (level, name, value) = if v4 {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    } else {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    };
    sys::set_int_opt(s.as_fd(), level, name, value)
}

/// Lets an IPv6 socket receive datagrams whose UDP checksum is 0, which Linux drops by
/// default (RFC 8200 requires the checksum; RFC 6935 lets tunnels leave it out). Kernel rxe
/// sends 0 over IPv6 as over IPv4 (every frame of `pcaps/probe_ipv6.pcap`); the ICRC, which
/// over IPv6 covers the whole header, checks them instead. A non-zero checksum is still
/// verified by the kernel.
fn accept_zero_checksums(s: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    crate::sockopt::set(
        s,
        libc::IPPROTO_UDP,
        libc::UDP_NO_CHECK6_RX,
        &1 as &libc::c_int,
    )
}
