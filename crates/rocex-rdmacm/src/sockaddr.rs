//! C socket addresses to and from `std::net`, and the GID RoCE v2 gives an IP address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{sa_family_t, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t};

use crate::abi::ibv_gid;

/// The address at `p` (`AF_INET` or `AF_INET6`), or `None` for NULL or another family.
///
/// # Safety
///
/// `p` is NULL or points at a socket address as long as its family says.
pub unsafe fn read(p: *const sockaddr) -> Option<SocketAddr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per the contract; every family starts with sa_family.
    match i32::from(unsafe { (*p).sa_family }) {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let s = unsafe { p.cast::<sockaddr_in>().read_unaligned() };
            let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let s = unsafe { p.cast::<sockaddr_in6>().read_unaligned() };
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(s.sin6_port),
                s.sin6_flowinfo,
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// The family at `p`, or `AF_UNSPEC` for NULL.
///
/// # Safety
///
/// `p` is NULL or points at a socket address.
pub unsafe fn family(p: *const sockaddr) -> i32 {
    if p.is_null() {
        libc::AF_UNSPEC
    } else {
        // SAFETY: per the contract.
        i32::from(unsafe { (*p).sa_family })
    }
}

/// `a` as a C socket address in `out`; its length.
pub fn write(out: &mut sockaddr_storage, a: SocketAddr) -> socklen_t {
    // SAFETY: sockaddr_storage is plain bytes; zero is every field's empty value.
    *out = unsafe { core::mem::zeroed() };
    let p: *mut sockaddr_storage = out;
    match a {
        SocketAddr::V4(v) => {
            let s = sockaddr_in {
                sin_family: libc::AF_INET as sa_family_t,
                sin_port: v.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in, and is aligned for, sockaddr_storage.
            unsafe { p.cast::<sockaddr_in>().write(s) };
            size_of::<sockaddr_in>() as socklen_t
        }
        SocketAddr::V6(v) => {
            let s = sockaddr_in6 {
                sin6_family: libc::AF_INET6 as sa_family_t,
                sin6_port: v.port().to_be(),
                sin6_flowinfo: v.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v.ip().octets(),
                },
                sin6_scope_id: v.scope_id(),
            };
            // SAFETY: a sockaddr_in6 fits in, and is aligned for, sockaddr_storage.
            unsafe { p.cast::<sockaddr_in6>().write(s) };
            size_of::<sockaddr_in6>() as socklen_t
        }
    }
}

/// The address in `s`, if it holds one of `AF_INET` or `AF_INET6`.
pub fn stored(s: &sockaddr_storage) -> Option<SocketAddr> {
    // SAFETY: a sockaddr_storage holds any family.
    unsafe { read((s as *const sockaddr_storage).cast()) }
}

/// The RoCE v2 GID of an IP address: IPv4 mapped into IPv6, or the IPv6 address.
pub fn gid(ip: IpAddr) -> ibv_gid {
    let raw = match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    ibv_gid { raw }
}

/// An unspecified address of `ip`'s family.
pub fn any_like(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_survive_the_c_form() {
        for a in ["198.18.0.1:7471", "[fd00::1]:65535", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            // SAFETY: zero is sockaddr_storage's empty value.
            let mut s: sockaddr_storage = unsafe { core::mem::zeroed() };
            let len = write(&mut s, a);
            let want = if a.is_ipv4() { 16 } else { 28 };
            assert_eq!(len, want);
            assert_eq!(stored(&s), Some(a));
        }
    }

    #[test]
    fn an_ipv4_gid_is_the_mapped_address() {
        let g = gid(IpAddr::from([198, 18, 0, 1]));
        assert_eq!(g.raw[..12], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(g.raw[12..], [198, 18, 0, 1]);
    }
}
