//! The GID table and node GUID, as kernel rxe builds them for a netdev: the node GUID is
//! the interface MAC as an EUI-64 (`addrconf_addr_eui48`), GID 0 the link-local address
//! built from it (fe80::EUI-64), GID 1 the IPv4-mapped address (RoCE v2).
//!
//! The MAC is that of the local interface holding the daemon's address (`getifaddrs`), so
//! a program in the daemon's network namespace sees the same GUID as `ip link` shows. A
//! daemon whose address no local interface holds (another namespace, loopback) gets a
//! locally administered MAC made of `02:00` and the IPv4 address.

use std::ffi::CStr;
use std::net::IpAddr;

use crate::abi::*;
use crate::ctx::Ctx;
use crate::symver;

/// `IBV_GID_TYPE_ROCE_V2` (`enum ibv_gid_type`).
const GID_TYPE_ROCE_V2: u32 = 2;
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (rdma-core's private `enum ibv_gid_type_sysfs`).
const GID_TYPE_SYSFS_ROCE_V2: u32 = 1;
/// Entries in the GID table, as rxe reports (`RXE_PORT_GID_TBL_LEN`); only the first two
/// are set, the rest read as zero.
pub(crate) const GID_TBL_LEN: u32 = 1024;

/// The MAC of the interface holding `addr`, or a stand-in made of the address.
pub(crate) fn mac_for(addr: IpAddr) -> [u8; 6] {
    local_mac(addr).unwrap_or_else(|| match addr {
        IpAddr::V4(a) => {
            let o = a.octets();
            [0x02, 0x00, o[0], o[1], o[2], o[3]]
        }
        IpAddr::V6(a) => {
            let o = a.octets();
            [0x02, 0x00, o[12], o[13], o[14], o[15]]
        }
    })
}

/// Looks the address up among the local interfaces, then the interface's link address.
fn local_mac(addr: IpAddr) -> Option<[u8; 6]> {
    let mut head: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut name = None;
    let mut macs = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string of the list.
        let n = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_owned();
        // SAFETY: ifa_addr points at a sockaddr of the family it names.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                let a = IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes());
                if a == addr {
                    name = Some(n);
                }
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                if IpAddr::from(sin.sin6_addr.s6_addr) == addr {
                    name = Some(n);
                }
            }
            libc::AF_PACKET => {
                // SAFETY: an AF_PACKET address is a sockaddr_ll.
                let ll = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_ll>() };
                if ll.sll_halen == 6 {
                    let mut m = [0u8; 6];
                    m.copy_from_slice(&ll.sll_addr[..6]);
                    macs.push((n, m));
                }
            }
            _ => {}
        }
    }
    // SAFETY: `head` came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    let name = name?;
    macs.into_iter()
        .find(|(n, m)| *n == name && *m != [0; 6])
        .map(|(_, m)| m)
}

/// The EUI-64 of a MAC (the universal/local bit flipped, ff:fe in the middle).
pub(crate) fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The two GIDs: fe80::EUI-64 and the address (IPv4-mapped for IPv4).
pub(crate) fn gid_table(addr: IpAddr, mac: [u8; 6]) -> [[u8; 16]; 2] {
    let mut ll = [0u8; 16];
    ll[0] = 0xfe;
    ll[1] = 0x80;
    ll[8..].copy_from_slice(&eui64(mac));
    let ip = match addr {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    };
    [ll, ip]
}

/// The peer address a GID names: IPv4-mapped GIDs are IPv4 addresses.
pub(crate) fn gid_addr(gid: &[u8; 16]) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(*gid);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

/// `ibv_query_gid`: index 0 or 1 of port 1; the rest of the table is zero.
///
/// # Safety
///
/// `context` is a context of this library; `gid` points at 16 writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: i32,
    gid: *mut ibv_gid,
) -> i32 {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    match u32::try_from(index)
        .ok()
        .filter(|&i| port_num == 1 && i < GID_TBL_LEN)
    {
        Some(i) => {
            let raw = ctx.gids.get(i as usize).copied().unwrap_or_default();
            // SAFETY: `gid` is writable per the contract.
            unsafe { (*gid).raw = raw };
            0
        }
        None => -1,
    }
}

/// `_ibv_query_gid_ex` (behind verbs.h's `ibv_query_gid_ex`).
///
/// # Safety
///
/// `context` is a context of this library; `entry` points at `entry_size` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    context: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> i32 {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
        return libc::EINVAL;
    }
    // The kernel's answers (`rdma_get_gid_attr`): no such port is EINVAL, an index beyond
    // the table or at an empty entry ENODATA.
    if port_num != 1 {
        return libc::EINVAL;
    }
    if gid_index >= 2 {
        return libc::ENODATA;
    }
    // SAFETY: `entry` is writable per the contract.
    unsafe {
        entry.write(ibv_gid_entry {
            gid: ibv_gid {
                raw: ctx.gids[gid_index as usize],
            },
            gid_index,
            port_num,
            gid_type: GID_TYPE_ROCE_V2,
            ndev_ifindex: 0,
        })
    };
    0
}

/// `_ibv_query_gid_table` (behind verbs.h's `ibv_query_gid_table`).
///
/// # Safety
///
/// `context` is a context of this library; `entries` points at `max_entries` writable
/// entries of `entry_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
        return -(libc::EINVAL as isize);
    }
    if max_entries < 2 {
        return -(libc::EINVAL as isize);
    }
    for i in 0..2u32 {
        // SAFETY: `entries` holds at least two entries of entry_size bytes.
        let e = unsafe { entries.cast::<u8>().add(i as usize * entry_size) }.cast();
        // SAFETY: per the contract.
        let r = unsafe { _ibv_query_gid_ex(context, 1, i, e, 0, entry_size) };
        if r != 0 {
            return -(r as isize);
        }
    }
    2
}

/// `ibv_query_gid_type` (rdma-core's private node, which ibv_devinfo imports): every GID
/// is RoCE v2.
///
/// # Safety
///
/// `gid_type` points at a writable `u32`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    _context: *mut ibv_context,
    port_num: u8,
    index: u32,
    gid_type: *mut u32,
) -> i32 {
    if port_num != 1 || index >= GID_TBL_LEN {
        return libc::EINVAL;
    }
    // SAFETY: per the contract.
    unsafe { *gid_type = GID_TYPE_SYSFS_ROCE_V2 };
    0
}

symver! {
    ibv_query_gid @ "IBVERBS_1.1",
    _ibv_query_gid_ex @ "IBVERBS_1.11",
    _ibv_query_gid_table @ "IBVERBS_1.11",
    ibv_query_gid_type @ "IBVERBS_PRIVATE_34",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_gid_is_the_eui64_of_the_mac() {
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        let [ll, ip] = gid_table("198.18.0.1".parse().unwrap(), mac);
        assert_eq!(
            ll,
            [
                0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56
            ]
        );
        assert_eq!(gid_addr(&ip), "198.18.0.1".parse::<IpAddr>().unwrap());
    }
}
