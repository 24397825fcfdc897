//! The 40 bytes a UD receive buffer starts with: where the responder writes the packet's
//! IP header (rxe `rxe_resp.c: execute`), so that a receiver learns who sent it.

use core::net::IpAddr;

/// Bytes of the GRH that UD receive buffers start with.
pub const GRH_LEN: usize = 40;

/// The sender's address in a UD receive buffer's first 40 bytes: an IPv6 header's source,
/// or, for IPv4, the source of the IPv4 header in the last 20 bytes.
pub fn grh_source(grh: &[u8; GRH_LEN]) -> IpAddr {
    if grh[0] >> 4 == 6 {
        let mut s = [0u8; 16];
        s.copy_from_slice(&grh[8..24]);
        IpAddr::from(s)
    } else {
        IpAddr::from([grh[32], grh[33], grh[34], grh[35]])
    }
}
