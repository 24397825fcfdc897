//! The socket and the eventfd of the uring backend.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use socket2::{Domain, Protocol, Socket, Type};

use crate::BackendOptions;

/// A UDP socket on `local:4791` as the UDP backend makes it: DF with identification 0,
/// 8 MiB buffers, the configured DSCP and ECN.
pub(super) fn udp_socket(local: IpAddr, opts: &BackendOptions) -> io::Result<UdpSocket> {
    if opts.dscp > 63 || opts.ecn > 3 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "DSCP {} / ECN {} out of range (0..64 / 0..4)",
                opts.dscp, opts.ecn
            ),
        ));
    }
    let s = Socket::new(
        Domain::for_address(SocketAddr::new(local, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    let _ = s.set_recv_buffer_size(8 << 20);
    let _ = s.set_send_buffer_size(8 << 20);
    let tos = u32::from(opts.dscp << 2 | opts.ecn);
    let (level, name, value) = if local.is_ipv4() {
        s.set_tos_v4(tos)?;
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )
    } else {
        s.set_tclass_v6(tos)?;
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DO,
        )
    };
    crate::sockopt::set(&s, level, name, &value)?;
    if local.is_ipv6() {
        crate::udp::accept_zero_checksums(&s)?;
    }
    crate::udp::bind_roce_port(&s, local)?;
    // Blocking: io_uring waits for readiness itself, whereas on a non-blocking socket it
    // completes a receive with EAGAIN at once and a send into a full buffer with EAGAIN.
    Ok(s.into())
}

/// A non-blocking eventfd.
pub(super) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2); the descriptor is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Resets the eventfd's count, if it has one.
pub(super) fn drain(fd: &OwnedFd) -> io::Result<()> {
    let mut count = 0u64;
    // SAFETY: reads the 8-byte counter into `count`, which lives for the call.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::WouldBlock {
            return Err(e);
        }
    }
    Ok(())
}
