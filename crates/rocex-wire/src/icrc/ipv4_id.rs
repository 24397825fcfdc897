//! Checking an ICRC without the IPv4 header it covers: a UDP socket shows the receiver
//! everything in that header but the identification.
//!
//! The ICRC masks TOS, TTL and the header checksum but not the identification, which the
//! sender's kernel chooses: 0 for a DF datagram from an unconnected socket, 0, 1, 2, ...
//! for the segments of a UDP GSO send, a per-destination counter for kernel rxe
//! (`__ip_select_ident`). Everything else is known to the receiver: version and header
//! length (RoCE v2 senders use no options), the total length (the datagram's plus 28), DF
//! with no fragment offset (RoCE v2 datagrams are sent with DF and never fragmented,
//! `prepare_ipv4_hdr` in rxe), the protocol and both addresses.
//!
//! CRC-32 is affine over GF(2): for one packet length, the ICRC with identification `id`
//! is the ICRC with identification 0 XOR `L(id)`, where `L` is linear in the 16 bits of
//! `id` and does not depend on the packet's content. `L` is one-to-one: its columns are
//! the CRC remainders of 16 consecutive input bits, `x^k * x^i mod P` for `i < 16`, and no
//! non-zero polynomial of degree below 16 is a multiple of the degree-32 `P`. So for a
//! received ICRC at most one identification fits, and elimination over the 16 columns
//! ([`IdMap::solve`]) finds it or shows that none does, with one CRC computation per
//! packet. What that costs in assurance is in `docs/security.md`: a random corruption
//! passes when its ICRC lands in the 2^16 of 2^32 values `L` reaches, 2^-16.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::{IcrcForm, PrefixCache, ipv4_id_delta};
use crate::{Opcode, ROCE_V2_PORT, packet::ICRC_LEN};

/// Bits of the IPv4 identification.
const ID_BITS: usize = 16;
/// CRC-32's reflected polynomial (zlib's).
const POLY: u32 = 0xedb8_8320;
/// Packet lengths [`SocketCheck`] keeps maps for before it starts over (received garbage
/// may bring many).
const MAX_MAPS: usize = 256;

/// The linear map from an IPv4 identification to the change it makes to the ICRC of a
/// packet of one length, and its inverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMap {
    /// `columns[b]`: the ICRC change of identification `1 << b`.
    columns: [u32; ID_BITS],
    /// The columns reduced to echelon form: each row's highest set bit (its pivot) is
    /// set in no row after it; with the identification bits that XOR to it.
    rows: [(u32, u16); ID_BITS],
}

impl IdMap {
    /// The map for a packet whose transport part (BTH through pad, without the ICRC) is
    /// `transport_len` bytes, with a 20-byte IPv4 header.
    pub fn new(transport_len: usize, form: IcrcForm) -> Self {
        // Bit 7 of the identification is the last of its 16 bits the CRC reads (the
        // reflected CRC reads each byte from its least significant bit, the high byte
        // first: bits 8..15, then 0..7). Each bit read earlier is one more step of the
        // CRC register over a zero bit: one delta computed with the CRC gives all 16.
        let last = ipv4_id_delta(1 << 7, transport_len, form);
        let mut columns = [0; ID_BITS];
        let mut c = last;
        for steps in 0..ID_BITS {
            // Bits 7, 6, ..., 0, then 15, 14, ..., 8.
            let bit = if steps < 8 { 7 - steps } else { 23 - steps };
            columns[bit] = c;
            c = zero_bit(c);
        }
        Self {
            columns,
            rows: echelon(&columns),
        }
    }

    /// How the ICRC changes when the identification is `id` instead of 0.
    pub fn delta(&self, id: u16) -> u32 {
        (0..ID_BITS)
            .filter(|b| id & (1 << b) != 0)
            .fold(0, |d, b| d ^ self.columns[b])
    }

    /// The identification whose [`IdMap::delta`] is `delta`, if one is (at most one is).
    pub fn solve(&self, delta: u32) -> Option<u16> {
        let (mut left, mut id) = (delta, 0u16);
        for &(row, bits) in &self.rows {
            if row != 0 && left & pivot(row) != 0 {
                left ^= row;
                id ^= bits;
            }
        }
        (left == 0).then_some(id)
    }

    /// How many identification bits the map tells apart: 16 for every length (see the
    /// module's documentation), which tests check.
    pub fn rank(&self) -> usize {
        self.rows.iter().filter(|(row, _)| *row != 0).count()
    }
}

/// One step of the reflected CRC register over a zero input bit.
fn zero_bit(r: u32) -> u32 {
    (r >> 1) ^ if r & 1 != 0 { POLY } else { 0 }
}

fn pivot(row: u32) -> u32 {
    1 << (31 - row.leading_zeros())
}

/// Gaussian elimination of `columns`, rows in decreasing order of pivot; a dependent
/// column leaves a zero row at the end.
fn echelon(columns: &[u32; ID_BITS]) -> [(u32, u16); ID_BITS] {
    let mut rows = [(0u32, 0u16); ID_BITS];
    let mut n = 0;
    for (b, &col) in columns.iter().enumerate() {
        let (mut v, mut bits) = (col, 1u16 << b);
        for &(row, row_bits) in &rows[..n] {
            if v & pivot(row) != 0 {
                v ^= row;
                bits ^= row_bits;
            }
        }
        if v == 0 {
            continue;
        }
        // No row has v's pivot: insert it where the pivots stay decreasing.
        let at = rows[..n].iter().take_while(|(row, _)| *row > v).count();
        rows.copy_within(at..n, at + 1);
        rows[at] = (v, bits);
        n += 1;
    }
    rows
}

/// Checks the ICRCs of packets received on a UDP socket (port 4791), which hides the IP
/// header, by finding the identification each one checks under; remembers the maps of
/// the packet lengths seen lately.
#[derive(Debug, Default)]
pub struct SocketCheck {
    maps: HashMap<(usize, IcrcForm), IdMap>,
    prefixes: PrefixCache,
}

impl SocketCheck {
    /// The IPv4 identification under which the ICRC of `payload` (BTH through ICRC), a
    /// datagram from `src` to `dst:4791`, checks; `None` when none does (a corrupted
    /// packet) or `payload` is too short to hold one. IPv6 has no identification: `Some(0)`
    /// when the ICRC checks as it is.
    pub fn identification(&mut self, src: SocketAddr, dst: IpAddr, payload: &[u8]) -> Option<u16> {
        let body = payload.len().checked_sub(ICRC_LEN).filter(|&b| b > 0)?;
        let (transport, icrc) = payload.split_at(body);
        let form = IcrcForm::for_opcode(Opcode(transport[0]));
        let found = super::from_wire(icrc.try_into().ok()?);
        let zero = self
            .prefixes
            .compute_for(src.ip(), dst, src.port(), ROCE_V2_PORT, transport, form)
            .ok()?;
        match found ^ zero {
            0 => Some(0),
            delta if src.is_ipv4() => self.map(body, form).solve(delta),
            _ => None,
        }
    }

    /// The map for packets of `transport_len` bytes (BTH through pad): what a sender
    /// fixes its GSO segments' ICRCs with.
    pub fn map(&mut self, transport_len: usize, form: IcrcForm) -> &IdMap {
        let key = (transport_len, form);
        if self.maps.len() >= MAX_MAPS && !self.maps.contains_key(&key) {
            self.maps.clear();
        }
        self.maps
            .entry(key)
            .or_insert_with(|| IdMap::new(transport_len, form))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_are_the_deltas_of_single_bits() {
        for len in [12usize, 13, 40, 1036, 4124] {
            for form in [IcrcForm::Spec, IcrcForm::RxeFlush] {
                let m = IdMap::new(len, form);
                for b in 0..ID_BITS {
                    let id = 1u16 << b;
                    assert_eq!(
                        m.delta(id),
                        ipv4_id_delta(id, len, form),
                        "bit {b} len {len}"
                    );
                }
                assert_eq!(m.delta(0x1234), ipv4_id_delta(0x1234, len, form));
            }
        }
    }

    #[test]
    fn every_identification_solves_to_itself() {
        let m = IdMap::new(1036, IcrcForm::Spec);
        assert_eq!(m.rank(), ID_BITS);
        for id in 0..=u16::MAX {
            assert_eq!(m.solve(m.delta(id)), Some(id));
        }
    }

    #[test]
    fn the_map_cache_stays_bounded() {
        let mut c = SocketCheck::default();
        for len in 100..(100 + 2 * MAX_MAPS) {
            c.map(len, IcrcForm::Spec);
        }
        assert!(c.maps.len() <= MAX_MAPS);
    }
}
