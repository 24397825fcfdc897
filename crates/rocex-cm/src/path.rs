//! A path as a REQ describes it (IBTA §12.6, table 106: the primary path at byte 52 and
//! the alternate at byte 96, 44 bytes each). On RoCE v2 the LIDs are the permissive LID
//! and the GIDs are the IP addresses (IPv4-mapped for IPv4).

use core::net::{IpAddr, Ipv6Addr};

use crate::bits::{blocks, fields, view};
use crate::{Part, check_widths};

view!(
    /// A zero-copy view of a REQ's path.
    Path,
    Part::Req,
    44
);

fields!(Path {
    /// Local port LID.
    local_lid / set_local_lid: u16 = (0, 0, 16);
    /// Remote port LID.
    remote_lid / set_remote_lid: u16 = (2, 0, 16);
    /// Flow label (20 bits).
    flow_label / set_flow_label: u32 = (36, 0, 20);
    /// Packet rate (6 bits).
    packet_rate / set_packet_rate: u8 = (39, 2, 6);
    /// Traffic class.
    traffic_class / set_traffic_class: u8 = (40, 0, 8);
    /// Hop limit.
    hop_limit / set_hop_limit: u8 = (41, 0, 8);
    /// Service level (4 bits).
    sl / set_sl: u8 = (42, 0, 4);
    /// Subnet local (0 on RoCE v2: every packet carries a routable IP header).
    subnet_local / set_subnet_local: u8 = (42, 4, 1);
    /// Local ACK timeout exponent (5 bits).
    local_ack_timeout / set_local_ack_timeout: u8 = (43, 0, 5);
});

blocks!(Path {
    /// Local port GID.
    local_gid / set_local_gid: [u8; 16] = 4;
    /// Remote port GID.
    remote_gid / set_remote_gid: [u8; 16] = 20;
});

/// The RoCE v2 GID of an IP address: IPv4 addresses are IPv4-mapped (`::ffff:a.b.c.d`).
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The IP address of a RoCE v2 GID.
pub fn ip_of_gid(gid: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(gid);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

/// A path's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Local port LID (0xFFFF, permissive, on RoCE).
    pub local_lid: u16,
    /// Remote port LID.
    pub remote_lid: u16,
    /// Local port GID.
    pub local_gid: [u8; 16],
    /// Remote port GID.
    pub remote_gid: [u8; 16],
    /// Flow label, 0..2^20.
    pub flow_label: u32,
    /// Packet rate, 0..64.
    pub packet_rate: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Service level, 0..16.
    pub sl: u8,
    /// Subnet local.
    pub subnet_local: bool,
    /// Local ACK timeout exponent, 0..32.
    pub local_ack_timeout: u8,
}

impl Repr {
    /// Reads a path.
    pub fn parse<T: AsRef<[u8]>>(p: &Path<T>) -> crate::Result<Self> {
        p.check_len()?;
        Ok(Self {
            local_lid: p.local_lid(),
            remote_lid: p.remote_lid(),
            local_gid: p.local_gid(),
            remote_gid: p.remote_gid(),
            flow_label: p.flow_label(),
            packet_rate: p.packet_rate(),
            traffic_class: p.traffic_class(),
            hop_limit: p.hop_limit(),
            sl: p.sl(),
            subnet_local: p.subnet_local() != 0,
            local_ack_timeout: p.local_ack_timeout(),
        })
    }

    /// Writes a path (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Path<T>) -> crate::Result<()> {
        p.check_len()?;
        check_widths(
            Part::Req,
            &[
                (36, self.flow_label.into(), 20, "flow label"),
                (39, self.packet_rate.into(), 6, "packet rate"),
                (42, self.sl.into(), 4, "SL"),
                (43, self.local_ack_timeout.into(), 5, "ACK timeout"),
            ],
        )?;
        p.buffer.as_mut()[..44].fill(0);
        p.set_local_lid(self.local_lid);
        p.set_remote_lid(self.remote_lid);
        p.set_local_gid(&self.local_gid);
        p.set_remote_gid(&self.remote_gid);
        p.set_flow_label(self.flow_label);
        p.set_packet_rate(self.packet_rate);
        p.set_traffic_class(self.traffic_class);
        p.set_hop_limit(self.hop_limit);
        p.set_sl(self.sl);
        p.set_subnet_local(u8::from(self.subnet_local));
        p.set_local_ack_timeout(self.local_ack_timeout);
        Ok(())
    }
}
