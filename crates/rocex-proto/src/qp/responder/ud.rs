//! UD receives: single-packet SENDs whose Q_Key matches, placed behind the 40 bytes rxe
//! writes in front of the data (rxe `rxe_resp.c: execute`).

use core::net::IpAddr;

use rocex_wire::packet::ICRC_LEN;
use rocex_wire::{PacketRepr, bth, deth};

use super::place;
use crate::Ctx;
use crate::qp::Qp;
use crate::verbs::{GRH_LEN, WcOpcode};

/// The IPv4 header's first byte: version 4, five 32-bit words (no options).
const IPV4_VERSION_IHL: u8 = 0x45;
/// The IPv6 header's first byte: version 6, traffic class 0.
const IPV6_VERSION: u8 = 0x60;
const IPV4_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;
const IPPROTO_UDP: u8 = 17;
/// The TTL or hop limit written (Linux's default).
const HOP_LIMIT: u8 = 64;

impl Qp {
    /// A UD request: dropped (and counted) without a DETH, with another Q_Key or with no
    /// receive posted; else received, the GRH first.
    pub(super) fn ud_request(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &PacketRepr<'_>,
        src: IpAddr,
        dst: IpAddr,
    ) {
        let Some(deth) = pkt.deth else {
            ctx.counters.drop_wrong_transport += 1;
            return;
        };
        if deth.qkey != self.attr.qkey {
            ctx.counters.drop_bad_qkey += 1;
            return;
        }
        let Some(wr) = self.rq.pop_front() else {
            ctx.counters.drop_unreliable += 1;
            return;
        };
        let grh = grh(src, dst, pkt.payload.len());
        let placed = place(ctx, self.pd, &wr, 0, &grh)
            .and_then(|()| place(ctx, self.pd, &wr, GRH_LEN as u64, pkt.payload));
        let mut wc = self.recv_wc(
            wr.wr_id,
            WcOpcode::Recv,
            (GRH_LEN + pkt.payload.len()) as u64,
        );
        wc.src_qp = deth.src_qp;
        wc.imm_data = pkt.immdt.map(|i| i.data);
        if let Err(r) = placed {
            wc.status = r.recv_status;
        }
        ctx.counters.rdma_recvs += 1;
        ctx.complete(self.recv_cq, wc, pkt.bth.solicited);
    }
}

/// The 40 bytes a UD receive buffer starts with: for IPv4, 20 bytes of zero and the IPv4
/// header; for IPv6, the IPv6 header (rxe `rxe_resp.c: execute`).
fn grh(src: IpAddr, dst: IpAddr, payload: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    let udp_len = UDP_HEADER_LEN + bth::LEN + deth::LEN + payload + ICRC_LEN;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let h = &mut g[GRH_LEN - IPV4_HEADER_LEN..];
            h[0] = IPV4_VERSION_IHL;
            h[2..4].copy_from_slice(&((IPV4_HEADER_LEN + udp_len) as u16).to_be_bytes());
            h[8] = HOP_LIMIT;
            h[9] = IPPROTO_UDP;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            g[0] = IPV6_VERSION;
            g[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            g[6] = IPPROTO_UDP;
            g[7] = HOP_LIMIT;
            g[8..24].copy_from_slice(&s.octets());
            g[24..40].copy_from_slice(&d.octets());
        }
        _ => {}
    }
    g
}

#[cfg(test)]
mod grh_tests {
    use super::grh;
    use crate::verbs::grh_source;
    use std::net::IpAddr;

    #[test]
    fn the_source_comes_back_out_of_the_grh() {
        for (s, d) in [("198.18.0.1", "198.18.0.2"), ("fd00::1", "fd00::2")] {
            let (s, d): (IpAddr, IpAddr) = (s.parse().unwrap(), d.parse().unwrap());
            assert_eq!(grh_source(&grh(s, d, 100)), s);
        }
    }
}
