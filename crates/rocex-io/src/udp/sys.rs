//! The batched system calls: `sendmmsg(2)` with a `UDP_SEGMENT` control message on each
//! GSO run and an `IP_TOS`/`IPV6_TCLASS` one on each message whose TOS is not the
//! socket's (`ip(7)`, `ipv6(7)`), `recvmmsg(2)` with room for each datagram's `UDP_GRO` control message
//! (`udp(7)`, `linux/udp.h`). All the `unsafe` of the UDP backend is here.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `linux/udp.h`: sockopt level and names (libc lacks them for glibc targets).
const SOL_UDP: libc::c_int = 17;
/// Send: the segment size of a GSO send (a `u16` control message).
const UDP_SEGMENT: libc::c_int = 103;
/// Sockopt: coalesce received datagrams; receive: their segment size (a `c_int`).
const UDP_GRO: libc::c_int = 104;

/// Most messages one send carries.
pub(super) const MAX_MSGS: usize = 64;
/// Most datagrams one receive takes (its arrays are set up on every call, even an empty one).
pub(super) const MAX_RX: usize = 32;

/// Room for two control messages carrying an `int` each (received: `UDP_GRO` and the TOS
/// or traffic class; sent: `UDP_SEGMENT` and the TOS), aligned as `cmsghdr` requires.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; 64]);

/// One message of a send: the send buffer's byte ranges `spans[spans.start..spans.end]`
/// of the send's span list (`(at, len)` each), one after another, to `dest`, cut by the
/// kernel into datagrams of `segment` bytes (the last may be shorter) when it is set, each
/// with IP TOS (traffic class) `tos` when it is set, else the socket's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TxMsg {
    pub(super) dest: SocketAddr,
    pub(super) spans: Range<usize>,
    pub(super) segment: Option<u16>,
    pub(super) tos: Option<u8>,
}

/// One received datagram: `len` bytes at the start of its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RxDatagram {
    /// The sender; `None` for an address family other than IPv4 and IPv6.
    pub(super) src: Option<SocketAddr>,
    pub(super) len: usize,
    /// The size of the coalesced segments (`UDP_GRO`), if the kernel coalesced any.
    pub(super) segment: Option<usize>,
    /// The datagram did not fit its slot.
    pub(super) truncated: bool,
    /// The IP header's TOS or traffic class byte (`IP_TOS`/`IPV6_TCLASS`), 0 if the kernel
    /// gave none.
    pub(super) tos: u8,
}

/// Sets an `int` socket option.
pub(super) fn set_int_opt(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    crate::sockopt::set(&fd, level, name, &value)
}

/// Turns UDP GRO on: the kernel may hand over many same-size datagrams as one.
pub(super) fn enable_gro(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_opt(fd, SOL_UDP, UDP_GRO, 1)
}

/// Writes `a` into `s`; returns its length.
fn write_addr(a: SocketAddr, s: &mut libc::sockaddr_in6) -> libc::socklen_t {
    match a {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in6 is larger than and as aligned as sockaddr_in.
            unsafe { std::ptr::write((s as *mut libc::sockaddr_in6).cast(), sin) };
            mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            *s = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

fn zeroed_in6() -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data for which all zeroes is a valid value.
    unsafe { mem::zeroed() }
}

/// The address the kernel wrote into a receive's name buffer.
fn read_addr(s: &libc::sockaddr_in6) -> Option<SocketAddr> {
    match libc::c_int::from(s.sin6_family) {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in, as the family says; sockaddr_in6 is
            // larger and as aligned.
            let sin: libc::sockaddr_in =
                unsafe { std::ptr::read((s as *const libc::sockaddr_in6).cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(s.sin6_port)))
        }
        _ => None,
    }
}

fn empty_msghdr() -> libc::msghdr {
    // SAFETY: msghdr is plain data (null pointers, zero lengths) when zeroed.
    unsafe { mem::zeroed() }
}

/// Sends up to [`MAX_MSGS`] of `msgs`, whose bytes lie in `buf` at `spans`, in one
/// `sendmmsg`. Returns how many messages the kernel took; an error means it took none
/// (the error is the first message's).
///
/// # Panics
///
/// If a message's spans lie outside `spans`, or a span outside `buf`.
pub(super) fn sendmmsg(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    spans: &[(usize, usize)],
    msgs: &[TxMsg],
) -> io::Result<usize> {
    let n = msgs.len().min(MAX_MSGS);
    // One iovec a span, all made before any header points into them.
    let iovs: Vec<libc::iovec> = msgs[..n]
        .iter()
        .flat_map(|m| &spans[m.spans.clone()])
        .map(|&(at, len)| {
            let bytes = &buf[at..at + len];
            libc::iovec {
                // The kernel only reads through it (sendmmsg).
                iov_base: bytes.as_ptr().cast_mut().cast(),
                iov_len: bytes.len(),
            }
        })
        .collect();
    // Only the `n` entries used are written: zeroing all of them cost more than a small
    // packet's whole send path.
    let mut names = [const { MaybeUninit::<libc::sockaddr_in6>::uninit() }; MAX_MSGS];
    let mut controls = [const { MaybeUninit::<Control>::uninit() }; MAX_MSGS];
    let mut hdrs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; MAX_MSGS];
    let mut first_iov = 0;
    for (i, m) in msgs[..n].iter().enumerate() {
        let name = names[i].write(zeroed_in6());
        let mut h = empty_msghdr();
        h.msg_namelen = write_addr(m.dest, name);
        h.msg_name = (name as *mut libc::sockaddr_in6).cast();
        h.msg_iov = iovs[first_iov..].as_ptr().cast_mut();
        h.msg_iovlen = m.spans.len() as _;
        first_iov += m.spans.len();
        // SAFETY: CMSG_SPACE is arithmetic on its argument.
        let (seg_space, tos_space) = unsafe {
            (
                libc::CMSG_SPACE(mem::size_of::<u16>() as u32) as usize,
                libc::CMSG_SPACE(mem::size_of::<libc::c_int>() as u32) as usize,
            )
        };
        let space = m.segment.map_or(0, |_| seg_space) + m.tos.map_or(0, |_| tos_space);
        if space > 0 {
            let control = controls[i].write(Control([0; 64]));
            h.msg_control = control.0.as_mut_ptr().cast();
            h.msg_controllen = space as _;
            // SAFETY: msg_control points at 64 bytes aligned for cmsghdr, more than the
            // `space` (at most 48) that msg_controllen gives the headers and their data,
            // so every header CMSG_FIRSTHDR and CMSG_NXTHDR return lies inside it.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h);
                if let Some(seg) = m.segment {
                    (*c).cmsg_level = SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg);
                    c = libc::CMSG_NXTHDR(&h, c);
                }
                if let Some(tos) = m.tos {
                    let (level, kind) = match m.dest {
                        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
                        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
                    };
                    (*c).cmsg_level = level;
                    (*c).cmsg_type = kind;
                    (*c).cmsg_len = libc::CMSG_LEN(mem::size_of::<libc::c_int>() as u32) as _;
                    let v = libc::c_int::from(tos);
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), v);
                }
            }
        }
        hdrs[i].write(libc::mmsghdr {
            msg_hdr: h,
            msg_len: 0,
        });
    }
    // SAFETY: `hdrs[..n]` are written and point into `names`, `iovs`, `controls` and
    // `buf`, all alive and unmoved for the call; the kernel reads no further than `n`.
    let r = unsafe { libc::sendmmsg(fd.as_raw_fd(), hdrs.as_mut_ptr().cast(), n as u32, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Receives up to one datagram per `slot`-byte slot of `bufs` (at most `N`, which is at
/// most [`MAX_RX`]) in one non-blocking `recvmmsg`, describing each in `out` (cleared
/// first). Returns how many came; none waiting is `Ok(0)`. The headers for `N` slots are
/// built on every call, so a small `N` makes an empty poll cheap.
pub(super) fn recvmmsg<const N: usize>(
    fd: BorrowedFd<'_>,
    bufs: &mut [u8],
    slot: usize,
    out: &mut Vec<RxDatagram>,
) -> io::Result<usize> {
    out.clear();
    // sockaddr_in6 holds a sockaddr_in too, in a quarter of a sockaddr_storage.
    const { assert!(N <= MAX_RX) };
    let mut names = [zeroed_in6(); N];
    let mut controls = [Control([0; 64]); N];
    let mut iovs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; N];
    // SAFETY: mmsghdr is plain data when zeroed.
    let mut hdrs: [libc::mmsghdr; N] = unsafe { mem::zeroed() };
    let mut n = 0;
    for (i, chunk) in bufs.chunks_exact_mut(slot).take(N).enumerate() {
        iovs[i] = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: chunk.len(),
        };
        let mut h = empty_msghdr();
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_in6).cast();
        h.msg_namelen = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        h.msg_control = controls[i].0.as_mut_ptr().cast();
        h.msg_controllen = mem::size_of::<Control>() as _;
        hdrs[i].msg_hdr = h;
        n = i + 1;
    }
    // SAFETY: `hdrs[..n]` point into `names`, `controls`, `iovs` and `bufs`, all alive,
    // unmoved and exclusively borrowed for the call.
    let r = unsafe {
        libc::recvmmsg(
            fd.as_raw_fd(),
            hdrs.as_mut_ptr(),
            n as u32,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    for (h, name) in hdrs.iter().zip(&names).take(r as usize) {
        out.push(RxDatagram {
            src: read_addr(name),
            len: (h.msg_len as usize).min(slot),
            segment: gro_segment(&h.msg_hdr),
            tos: received_tos(&h.msg_hdr),
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        });
    }
    Ok(out.len())
}

/// Asks for each datagram's TOS (IPv4) or traffic class (IPv6) as a control message, which
/// carries its ECN field.
pub(super) fn enable_recv_tos(fd: BorrowedFd<'_>, v4: bool) -> io::Result<()> {
    if v4 {
        set_int_opt(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
    } else {
        set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)
    }
}

/// The TOS (`IP_TOS`, one byte) or traffic class (`IPV6_TCLASS`, an `int`) among a
/// received message's control messages (`ip(7)`, `ipv6(7)`).
fn received_tos(h: &libc::msghdr) -> u8 {
    // SAFETY: as in `gro_segment`; an IP_TOS message carries one byte, an IPV6_TCLASS
    // message one c_int.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IP, libc::IP_TOS) => return *libc::CMSG_DATA(c),
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    let tc = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return tc as u8;
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

/// The `UDP_GRO` segment size among a received message's control messages.
fn gro_segment(h: &libc::msghdr) -> Option<usize> {
    // SAFETY: `h` is a msghdr the kernel filled, whose msg_control still points into the
    // live control array with msg_controllen the length the kernel wrote; the CMSG macros
    // stay within it, and the data of a SOL_UDP/UDP_GRO message is one c_int.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_UDP && (*c).cmsg_type == UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(size).ok().filter(|&s| s > 0);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}
