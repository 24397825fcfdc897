//! RoCE v2 over a UDP socket.
//!
//! The socket is unconnected and has path-MTU discovery on (`IP_PMTUDISC_DO`), so the
//! kernel sends every datagram with DF and IPv4 identification 0: the IP header the
//! engine assumed when it computed the ICRC (`rocex_wire::icrc::compute_for`). Every
//! datagram leaves from port 4791, which the engine is told (`Config::udp_source_port`),
//! since the ICRC covers the source port.
//!
//! A UDP socket does not show the received IP header, so the ICRC of a received packet
//! cannot be checked here unless its sender is rocex (identification 0); packets from
//! other senders are handed to the engine as unchecked and counted there.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// The RoCE v2 UDP port.
const ROCE_PORT: u16 = 4791;

/// A UDP socket bound to `ip:4791`.
#[derive(Debug)]
pub struct UdpPort {
    sock: UdpSocket,
    local: IpAddr,
}

impl UdpPort {
    /// Binds `ip:4791`.
    pub fn bind(ip: IpAddr) -> io::Result<Self> {
        let domain = if ip.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        s.set_reuse_address(true)?;
        // Large buffers: a burst of a 128-packet window must not be dropped by the kernel.
        let _ = s.set_recv_buffer_size(8 << 20);
        let _ = s.set_send_buffer_size(8 << 20);
        set_pmtudisc_do(&s, ip.is_ipv4())?;
        s.bind(&SocketAddr::new(ip, ROCE_PORT).into())?;
        s.set_nonblocking(true)?;
        Ok(Self {
            sock: s.into(),
            local: ip,
        })
    }

    /// The bound address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// Sends one datagram to `dest:4791`. A full socket buffer is not an error: the
    /// packet is dropped as a network would drop it, and the transport retransmits.
    pub fn send(&self, dest: IpAddr, payload: &[u8]) -> io::Result<()> {
        match self.sock.send_to(payload, SocketAddr::new(dest, ROCE_PORT)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Receives one datagram if one is waiting.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
        match self.sock.recv_from(buf) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits until a datagram is readable or `timeout` passes.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        let mut fds = [libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of one pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
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
    let value: libc::c_int = value;
    // SAFETY: the option value is a c_int that lives for the call, with its size passed.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
