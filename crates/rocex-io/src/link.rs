//! The link an address is on, as the host reports it: its MTU bounds the largest RoCE
//! packet the link carries, so a port's MTU is chosen from it as rxe chooses its own.

use std::io;
use std::net::IpAddr;

use crate::afpacket::sys::{IfAddrKind, interfaces, mtu};

/// The MTU of the interface that holds `addr` in this thread's network namespace; `None`
/// when no interface holds it (a wildcard address, or one not configured yet).
pub fn link_mtu(addr: IpAddr) -> io::Result<Option<u32>> {
    let held = |i: &crate::afpacket::sys::IfAddr| matches!(i.addr, IfAddrKind::Ip(a) if a == addr);
    interfaces()?
        .into_iter()
        .find(held)
        .map(|i| mtu(&i.name))
        .transpose()
}
