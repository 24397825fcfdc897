//! The IPv4 identification of GSO segments, and what it does to their ICRCs.
//!
//! An unconnected socket sending with DF gives a datagram identification 0, the header the
//! engine computes every ICRC for; but the kernel numbers the segments of one GSO send
//! 0, 1, 2, ... (`inet_gso_segment`), and the ICRC covers the identification. Segment `i`
//! must therefore carry the ICRC for ID `i`, which is the ID-0 ICRC XOR a delta that
//! depends only on `i` and the packet's length (`rocex_wire::icrc::ipv4_id_delta`). GSO
//! sends come in few lengths, so the deltas for IDs 1..63 are kept per length.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use rocex_proto::IcrcStatus;
use rocex_wire::icrc::{self, IcrcForm};
use rocex_wire::{Opcode, ROCE_V2_PORT, packet::ICRC_LEN};

use super::batch::MAX_SEGMENTS;

/// Lengths remembered before the cache starts over (received garbage may bring many).
const MAX_LENGTHS: usize = 64;
/// Bits of the highest segment ID.
const ID_BITS: usize = (MAX_SEGMENTS - 1).count_ones() as usize;

/// Deltas for IDs 1..[`MAX_SEGMENTS`] (exclusive), per transport length and ICRC form,
/// and the ICRC prefixes of the datagrams received lately.
#[derive(Debug, Default)]
pub(crate) struct IdDeltas {
    tables: HashMap<(usize, IcrcForm), Box<[u32; MAX_SEGMENTS - 1]>>,
    prefixes: icrc::PrefixCache,
}

impl IdDeltas {
    /// The deltas for a packet of `transport_len` bytes (BTH to the end of the pad):
    /// element `i - 1` is for ID `i`.
    pub(super) fn table(
        &mut self,
        transport_len: usize,
        form: IcrcForm,
    ) -> &[u32; MAX_SEGMENTS - 1] {
        if self.tables.len() >= MAX_LENGTHS && !self.tables.contains_key(&(transport_len, form)) {
            self.tables.clear();
        }
        self.tables.entry((transport_len, form)).or_insert_with(|| {
            // The delta is linear in the ID: one CRC pass per bit, XORs for the rest.
            let bits: [u32; ID_BITS] =
                std::array::from_fn(|b| icrc::ipv4_id_delta(1 << b, transport_len, form));
            Box::new(std::array::from_fn(|i| {
                let id = i + 1;
                (0..ID_BITS)
                    .filter(|b| id & (1 << b) != 0)
                    .fold(0, |d, b| d ^ bits[b])
            }))
        })
    }

    /// Gives segment `id` of a GSO send its ICRC: the ID-0 one in `packet` XOR the delta.
    pub(super) fn fix_segment(&mut self, id: usize, packet: &mut [u8]) {
        let Some(body) = packet.len().checked_sub(ICRC_LEN) else {
            return;
        };
        if id == 0 || id >= MAX_SEGMENTS || body == 0 {
            return;
        }
        let delta = self.table(body, form_of(packet))[id - 1];
        for (b, d) in packet[body..].iter_mut().zip(icrc::to_wire(delta)) {
            *b ^= d;
        }
    }

    /// Checks a received packet's ICRC with one CRC computation: valid when it is the
    /// ICRC for IPv4 identification 0 (a rocex datagram) or for the ID of a GSO segment
    /// (1..63), `Invalid` otherwise. IPv6 has no identification: ID 0 only.
    pub(crate) fn check(&mut self, src: SocketAddr, dst: IpAddr, payload: &[u8]) -> IcrcStatus {
        let Some(body) = payload.len().checked_sub(ICRC_LEN).filter(|&b| b > 0) else {
            return IcrcStatus::Invalid;
        };
        let form = form_of(payload);
        let found = icrc::from_wire([
            payload[body],
            payload[body + 1],
            payload[body + 2],
            payload[body + 3],
        ]);
        let Ok(computed) = self.prefixes.compute_for(
            src.ip(),
            dst,
            src.port(),
            ROCE_V2_PORT,
            &payload[..body],
            form,
        ) else {
            return IcrcStatus::Invalid;
        };
        if found == computed {
            return IcrcStatus::Valid;
        }
        let delta = found ^ computed;
        if src.is_ipv4() && self.table(body, form).contains(&delta) {
            IcrcStatus::Valid
        } else {
            IcrcStatus::Invalid
        }
    }
}

fn form_of(packet: &[u8]) -> IcrcForm {
    IcrcForm::for_opcode(Opcode(packet.first().copied().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: SocketAddr = SocketAddr::new(
        IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 1)),
        ROCE_V2_PORT,
    );
    const DST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 2));

    /// A packet with the ICRC rocex's engine gives it (for ID 0).
    fn packet(len: usize) -> Vec<u8> {
        let mut p: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
        p[0] = 0x0a; // RC RDMA WRITE MIDDLE
        let body = len - ICRC_LEN;
        let c = icrc::compute_for(
            SRC.ip(),
            DST,
            ROCE_V2_PORT,
            ROCE_V2_PORT,
            &p[..body],
            IcrcForm::Spec,
        )
        .unwrap();
        p[body..].copy_from_slice(&icrc::to_wire(c));
        p
    }

    #[test]
    fn the_table_matches_the_delta_of_each_id() {
        let mut ids = IdDeltas::default();
        let t = *ids.table(4108, IcrcForm::Spec);
        for id in [1u16, 2, 5, 32, 63] {
            assert_eq!(
                t[id as usize - 1],
                icrc::ipv4_id_delta(id, 4108, IcrcForm::Spec)
            );
        }
    }

    #[test]
    fn fixed_segments_check_valid_and_corrupted_ones_do_not() {
        let mut ids = IdDeltas::default();
        for id in [0, 1, 7, 63] {
            let mut p = packet(4112);
            ids.fix_segment(id, &mut p);
            assert_eq!(ids.check(SRC, DST, &p), IcrcStatus::Valid, "id {id}");
            p[100] ^= 4;
            assert_eq!(ids.check(SRC, DST, &p), IcrcStatus::Invalid, "id {id}");
        }
        // The same fix applied to a corrupted packet keeps it invalid.
        let mut p = packet(1000);
        p[20] ^= 1;
        ids.fix_segment(3, &mut p);
        assert_eq!(ids.check(SRC, DST, &p), IcrcStatus::Invalid);
        // Too short to hold an ICRC: invalid, no panic.
        assert_eq!(ids.check(SRC, DST, &[0x0a, 1, 2]), IcrcStatus::Invalid);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut ids = IdDeltas::default();
        for len in 100..300 {
            ids.table(len, IcrcForm::Spec);
        }
        assert!(ids.tables.len() <= MAX_LENGTHS);
    }
}
