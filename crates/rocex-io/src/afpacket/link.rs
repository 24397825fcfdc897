//! The network interface that holds the local address.

use std::io;
use std::net::IpAddr;

use super::sys::{self, IfAddrKind};

/// The interface RoCE frames leave and arrive on.
#[derive(Debug, Clone)]
pub(super) struct Link {
    /// Interface name, for messages and the kernel's neighbour table.
    pub(super) name: String,
    pub(super) ifindex: u32,
    pub(super) mac: [u8; 6],
    /// The largest IP packet the interface sends.
    pub(super) mtu: u32,
    /// The interface resolves no neighbours (loopback): every frame goes to MAC zero.
    pub(super) noarp: bool,
}

impl Link {
    /// Finds the interface of the calling thread's network namespace that holds `local`.
    pub(super) fn holding(local: IpAddr) -> io::Result<Self> {
        let all = sys::interfaces()?;
        let Some(owner) = all
            .iter()
            .find(|a| matches!(a.addr, IfAddrKind::Ip(ip) if ip == local))
        else {
            return Err(io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("no interface holds {local}"),
            ));
        };
        let (ifindex, mac) = all
            .iter()
            .filter(|a| a.name == owner.name)
            .find_map(|a| match a.addr {
                IfAddrKind::Link { ifindex, mac } => Some((ifindex, mac)),
                _ => None,
            })
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "interface {} (holding {local}) has no link layer",
                        owner.name
                    ),
                )
            })?;
        let noarp = owner.flags & (libc::IFF_NOARP | libc::IFF_LOOPBACK) as u32 != 0;
        Ok(Self {
            mtu: sys::mtu(&owner.name)?,
            name: owner.name.clone(),
            ifindex,
            mac,
            noarp,
        })
    }
}
