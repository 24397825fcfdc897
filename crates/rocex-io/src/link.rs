//! The link an address is on, as the host reports it: its MTU bounds the largest RoCE
//! packet the link carries, so a port's MTU is chosen from it as rxe chooses its own.

use std::io;
use std::net::IpAddr;

use crate::afpacket::sys::{IfAddr, IfAddrKind, gro, interfaces, mtu};

/// The MTU of the interface that holds `addr` in this thread's network namespace; `None`
/// when no interface holds it (a wildcard address, or one not configured yet).
pub fn link_mtu(addr: IpAddr) -> io::Result<Option<u32>> {
    link_of(addr)?.map(|i| mtu(&i.name)).transpose()
}

/// Whether the interface that holds `addr` may join received datagrams (GRO) before they
/// reach a socket; `None` when no interface holds it. Loopback never does (a loopback
/// address of `127.0.0.0/8` need not be one the interface lists): it hands each packet to
/// the stack as it was sent, whatever its GRO flag says.
pub(crate) fn link_gro(addr: IpAddr) -> io::Result<Option<bool>> {
    if addr.is_loopback() {
        return Ok(Some(false));
    }
    let Some(i) = link_of(addr)? else {
        return Ok(None);
    };
    match i.flags & libc::IFF_LOOPBACK as u32 != 0 {
        true => Ok(Some(false)),
        false => gro(&i.name).map(Some),
    }
}

/// The interface that holds `addr` in this thread's network namespace.
fn link_of(addr: IpAddr) -> io::Result<Option<IfAddr>> {
    let held = |i: &IfAddr| matches!(i.addr, IfAddrKind::Ip(a) if a == addr);
    Ok(interfaces()?.into_iter().find(held))
}
