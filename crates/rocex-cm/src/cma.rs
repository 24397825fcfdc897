//! rdma_cm's addressing on top of the CM: the service ID that names a port in a port
//! space, and the header the kernel's rdma_cm puts at the start of a REQ's private data
//! (its `cma_hdr`: version, IP version, the active side's port, source and destination
//! addresses), which the passive side matches against its listeners.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::bits::{fields, view};
use crate::{Error, ErrorKind, Part};

/// rdma_cm's TCP port space (`RDMA_PS_TCP`): RC connections (rping, cmatose).
pub const PS_TCP: u16 = 0x0106;
/// rdma_cm's UDP port space (`RDMA_PS_UDP`).
pub const PS_UDP: u16 = 0x0111;
/// rdma_cm's IB port space (`RDMA_PS_IB`).
pub const PS_IB: u16 = 0x013f;
/// The header version rdma_cm writes and accepts.
pub const CMA_VERSION: u8 = 0x00;
/// Bytes of the header.
pub const HDR_LEN: usize = 36;

/// The service ID of `port` in port space `ps`: rdma_cm's `(ps << 16) + port`.
pub const fn service_id(ps: u16, port: u16) -> u64 {
    ((ps as u64) << 16) | port as u64
}

/// The port space and port of an rdma_cm service ID, or `None` when the ID is not one.
pub const fn port_of(service_id: u64) -> Option<(u16, u16)> {
    if service_id >> 32 != 0 {
        return None;
    }
    Some(((service_id >> 16) as u16, service_id as u16))
}

view!(
    /// A zero-copy view of rdma_cm's private-data header.
    Hdr,
    Part::CmaHdr,
    HDR_LEN
);

fields!(Hdr {
    /// Header version (0).
    cma_version / set_cma_version: u8 = (0, 0, 8);
    /// IP version: 4 or 6 (the high nibble of byte 1).
    ip_version / set_ip_version: u8 = (1, 0, 4);
    /// The active side's rdma_cm port.
    port / set_port: u16 = (2, 0, 16);
});

impl<T: AsRef<[u8]>> Hdr<T> {
    fn addr(&self, at: usize, v4: bool) -> IpAddr {
        let b = &self.buffer.as_ref()[at..at + 16];
        if v4 {
            IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))
        } else {
            let mut o = [0u8; 16];
            o.copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(o))
        }
    }
}

/// rdma_cm's private-data header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The active side's rdma_cm port.
    pub src_port: u16,
    /// The active side's address.
    pub src: IpAddr,
    /// The passive side's address.
    pub dst: IpAddr,
}

impl Repr {
    /// Reads the header at the start of a REQ's private data.
    pub fn parse<T: AsRef<[u8]>>(h: &Hdr<T>) -> crate::Result<Self> {
        h.check_len()?;
        if h.cma_version() != CMA_VERSION {
            return Err(Error::new(
                Part::CmaHdr,
                0,
                ErrorKind::Unsupported("an rdma_cm header version other than 0"),
            ));
        }
        let v4 = match h.ip_version() {
            4 => true,
            6 => false,
            _ => {
                return Err(Error::new(
                    Part::CmaHdr,
                    1,
                    ErrorKind::BadValue("the IP version is neither 4 nor 6"),
                ));
            }
        };
        Ok(Self {
            src_port: h.port(),
            src: h.addr(4, v4),
            dst: h.addr(20, v4),
        })
    }

    /// Writes the header; both addresses must be of one IP version.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut Hdr<T>) -> crate::Result<()> {
        h.check_len()?;
        if self.src.is_ipv4() != self.dst.is_ipv4() {
            return Err(Error::new(
                Part::CmaHdr,
                4,
                ErrorKind::BadValue("the addresses differ in IP version"),
            ));
        }
        let b = h.buffer.as_mut();
        b[..HDR_LEN].fill(0);
        for (at, ip) in [(4, self.src), (20, self.dst)] {
            match ip {
                IpAddr::V4(v4) => b[at + 12..at + 16].copy_from_slice(&v4.octets()),
                IpAddr::V6(v6) => b[at..at + 16].copy_from_slice(&v6.octets()),
            }
        }
        h.set_cma_version(CMA_VERSION);
        h.set_ip_version(if self.src.is_ipv4() { 4 } else { 6 });
        h.set_port(self.src_port);
        Ok(())
    }
}
