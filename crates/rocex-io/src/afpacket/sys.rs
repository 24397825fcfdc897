//! The system calls of the packet sockets: creation, options, binding to an interface and
//! sending to a link-layer address. Every `unsafe` block of the backend outside the ring
//! mapping is here.

use std::io;
use std::mem::{self, MaybeUninit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::tx::MAX_FRAMES;

/// EtherTypes the sockets are bound to.
pub(super) const ETH_P_ALL: u16 = libc::ETH_P_ALL as u16;
pub(super) const ETH_P_ARP: u16 = libc::ETH_P_ARP as u16;
pub(super) const ETH_P_IPV6: u16 = libc::ETH_P_IPV6 as u16;

/// Opens an `AF_PACKET` socket of `kind` (`SOCK_RAW`: whole frames; `SOCK_DGRAM`: the
/// payload of frames of one EtherType) that receives nothing until [`bind`].
pub(super) fn packet_socket(kind: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_PACKET, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(if e.kind() == io::ErrorKind::PermissionDenied {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the afpacket backend needs CAP_NET_RAW (run as root or grant the capability)",
            )
        } else {
            e
        });
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn link_addr(ifindex: u32, protocol: u16, mac: Option<[u8; 6]>) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { mem::zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = protocol.to_be();
    a.sll_ifindex = ifindex as i32;
    if let Some(mac) = mac {
        a.sll_halen = 6;
        a.sll_addr[..6].copy_from_slice(&mac);
    }
    a
}

/// Binds a packet socket to the frames of `protocol` on interface `ifindex`.
pub(super) fn bind(fd: &OwnedFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    let a = link_addr(ifindex, protocol, None);
    // SAFETY: `a` is a complete sockaddr_ll whose size is passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&a as *const libc::sockaddr_ll).cast(),
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `bytes` as the payload of a frame of `protocol` to `mac` (a `SOCK_DGRAM` packet
/// socket: the kernel writes the Ethernet header).
pub(super) fn send_to(
    fd: &OwnedFd,
    ifindex: u32,
    protocol: u16,
    mac: [u8; 6],
    bytes: &[u8],
) -> io::Result<()> {
    let a = link_addr(ifindex, protocol, Some(mac));
    // SAFETY: `bytes` and `a` are live for the call, their sizes passed.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT,
            (&a as *const libc::sockaddr_ll).cast(),
            mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends the frames at `frames` (offset, length; [`MAX_FRAMES`] at most) of `buf` with one
/// `sendmmsg` on the bound socket `fd`; returns how many the kernel took.
pub(super) fn send_frames(
    fd: &OwnedFd,
    buf: &[u8],
    frames: &[(usize, usize)],
) -> io::Result<usize> {
    let n = frames.len().min(MAX_FRAMES);
    // Only the `n` entries used are written: zeroing all of them cost more than a small
    // packet's whole send path.
    let mut iovs = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_FRAMES];
    let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_FRAMES];
    for ((iov, m), &(at, len)) in iovs.iter_mut().zip(&mut msgs).zip(&frames[..n]) {
        let frame = &buf[at..at + len];
        let iov = iov.write(libc::iovec {
            iov_base: frame.as_ptr().cast_mut().cast(),
            iov_len: frame.len(),
        });
        // SAFETY: an all-zero mmsghdr is a valid empty one.
        let h = m.write(unsafe { mem::zeroed() });
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: the first `n` headers are written, each pointing at one iovec over bytes of
    // `buf`, all live for the call; the kernel only reads them (and writes `msg_len`).
    let sent = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            msgs.as_mut_ptr().cast(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// Receives one datagram if one is waiting.
pub(super) fn try_recv(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is writable for its length.
    let r = unsafe {
        libc::recv(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if r >= 0 {
        return Ok(Some(r as usize));
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(None)
    } else {
        Err(e)
    }
}

/// One entry of getifaddrs(3): an interface and one of its addresses.
#[derive(Debug)]
pub(crate) struct IfAddr {
    pub(crate) name: String,
    pub(crate) flags: u32,
    pub(crate) addr: IfAddrKind,
}

/// What an [`IfAddr`] holds.
#[derive(Debug)]
pub(crate) enum IfAddrKind {
    /// An IP address.
    Ip(std::net::IpAddr),
    /// The link layer: interface index and hardware address.
    Link { ifindex: u32, mac: [u8; 6] },
    /// Anything else.
    Other,
}

/// Every interface address of the calling thread's network namespace.
pub(crate) fn interfaces() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until freeifaddrs;
        // each `ifa_addr` points to a sockaddr of the family it names.
        unsafe {
            let ifa = &*p;
            let name = std::ffi::CStr::from_ptr(ifa.ifa_name)
                .to_string_lossy()
                .into_owned();
            let addr = if ifa.ifa_addr.is_null() {
                IfAddrKind::Other
            } else {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                        IfAddrKind::Ip(
                            std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)).into(),
                        )
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                        IfAddrKind::Ip(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr).into())
                    }
                    libc::AF_PACKET => {
                        let sll = &*ifa.ifa_addr.cast::<libc::sockaddr_ll>();
                        let mut mac = [0; 6];
                        if sll.sll_halen == 6 {
                            mac.copy_from_slice(&sll.sll_addr[..6]);
                        }
                        IfAddrKind::Link {
                            ifindex: sll.sll_ifindex as u32,
                            mac,
                        }
                    }
                    _ => IfAddrKind::Other,
                }
            };
            out.push(IfAddr {
                name,
                flags: ifa.ifa_flags,
                addr,
            });
            p = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The MTU of interface `name`.
pub(crate) fn mtu(name: &str) -> io::Result<u32> {
    let mut req = ifreq(name)?;
    interface_ioctl(libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the MTU member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// Whether interface `name` has generic receive offload on (`ETHTOOL_GGRO`), under which
/// its driver's NAPI joins the datagrams of a flow before any socket is looked up.
pub(crate) fn gro(name: &str) -> io::Result<bool> {
    /// `struct ethtool_value`.
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    const ETHTOOL_GGRO: u32 = 0x2b;
    let mut value = EthtoolValue {
        cmd: ETHTOOL_GGRO,
        data: 0,
    };
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    interface_ioctl(libc::SIOCETHTOOL, &mut req)?;
    Ok(value.data != 0)
}

/// An `ifreq` naming interface `name`, all else zero.
fn ifreq(name: &str) -> io::Result<libc::ifreq> {
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is too long"),
        ));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// An interface ioctl `request` on `req` (and what it points to), through a UDP socket.
fn interface_ioctl(request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    let s =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    // SAFETY: the request reads the name from and writes its answer into `req`, or into
    // the buffer `req` points to, all of which live for the call.
    if unsafe { libc::ioctl(s.as_raw_fd(), request, req as *mut libc::ifreq) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
