//! The IPv4 identification, which the ICRC covers and a UDP socket neither chooses nor
//! sees, on the way out and on the way in.
//!
//! Sending: an unconnected socket sending with DF gives a datagram identification 0, the
//! header the engine computes every ICRC for; but the kernel numbers the segments of one
//! GSO send 0, 1, 2, ... (`inet_gso_segment`). Segment `i` must therefore carry the ICRC
//! for ID `i`: the ID-0 ICRC XOR a delta that depends only on `i` and the packet's length
//! (`rocex_wire::icrc::IdMap`).
//!
//! Receiving: the socket hides the IP header, so the ICRC is checked by solving for the
//! identification it checks under (`rocex_wire::icrc::SocketCheck`): one CRC computation
//! and an elimination over 16 bits. Any identification passes by default (kernel rxe
//! numbers its datagrams with a counter of its own); only rocex's 0..63 when every peer is
//! rocex ([`crate::BackendOptions::peers_are_rocex`]). docs/security.md says what each
//! leaves undetected.

use std::net::{IpAddr, SocketAddr};

use rocex_proto::IcrcStatus;
use rocex_wire::icrc::{self, IcrcForm, SocketCheck};
use rocex_wire::{Opcode, packet::ICRC_LEN};

use super::batch::MAX_SEGMENTS;
use crate::BackendCounters;

/// Finds received packets' identifications and fixes sent GSO segments' ICRCs; keeps the
/// maps of the packet lengths seen lately.
#[derive(Debug, Default)]
pub(crate) struct IdDeltas {
    check: SocketCheck,
}

impl IdDeltas {
    /// Gives segment `id` of a GSO send its ICRC: the ID-0 one in `packet` XOR the delta.
    pub(super) fn fix_segment(&mut self, id: usize, packet: &mut [u8]) {
        let Some(body) = packet.len().checked_sub(ICRC_LEN) else {
            return;
        };
        let Ok(id16) = u16::try_from(id) else {
            return;
        };
        if id == 0 || id >= MAX_SEGMENTS || body == 0 {
            return;
        }
        let delta = self.check.map(body, form_of(packet)).delta(id16);
        for (b, d) in packet[body..].iter_mut().zip(icrc::to_wire(delta)) {
            *b ^= d;
        }
    }

    /// Checks a packet received from `src` at `dst`: `Valid` when its ICRC checks under
    /// some IPv4 identification (IPv6: as it is), or with `strict` under one rocex's
    /// senders give (0, or 1..63 for a GSO segment); `Invalid` otherwise, which the engine
    /// drops and counts (`drop_icrc`). Counts the packets that check only under another
    /// identification: a peer that is not rocex.
    pub(crate) fn status(
        &mut self,
        src: SocketAddr,
        dst: IpAddr,
        payload: &[u8],
        strict: bool,
        counters: &mut BackendCounters,
    ) -> IcrcStatus {
        match self.check.identification(src, dst, payload) {
            Some(id) if usize::from(id) < MAX_SEGMENTS => IcrcStatus::Valid,
            Some(_) => {
                counters.icrc_foreign_id += 1;
                if strict {
                    IcrcStatus::Invalid
                } else {
                    IcrcStatus::Valid
                }
            }
            None => IcrcStatus::Invalid,
        }
    }
}

fn form_of(packet: &[u8]) -> IcrcForm {
    IcrcForm::for_opcode(Opcode(packet.first().copied().unwrap_or(0)))
}

/// A `len`-byte packet of `opcode` filled by `fill` (of each byte's position), ending in
/// the ICRC rocex's engine gives it from `src` to `dst` (for ID 0).
#[cfg(test)]
pub(crate) fn sealed_packet(
    opcode: Opcode,
    len: usize,
    fill: impl Fn(usize) -> u8,
    src: SocketAddr,
    dst: IpAddr,
) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(fill).collect();
    p[0] = opcode.0;
    let body = len - ICRC_LEN;
    let c = icrc::compute_for(
        src.ip(),
        dst,
        src.port(),
        rocex_wire::ROCE_V2_PORT,
        &p[..body],
        IcrcForm::Spec,
    )
    .unwrap();
    p[body..].copy_from_slice(&icrc::to_wire(c));
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_wire::ROCE_V2_PORT;

    const SRC: SocketAddr = SocketAddr::new(
        IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 1)),
        ROCE_V2_PORT,
    );
    const DST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 2));

    /// A packet with the ICRC rocex's engine gives it (for ID 0).
    fn packet(len: usize) -> Vec<u8> {
        let fill = |i| (i * 13 + 5) as u8;
        sealed_packet(Opcode::RC_RDMA_WRITE_ONLY, len, fill, SRC, DST)
    }

    fn status(ids: &mut IdDeltas, p: &[u8], strict: bool) -> (IcrcStatus, u64) {
        let mut c = BackendCounters::default();
        let s = ids.status(SRC, DST, p, strict, &mut c);
        (s, c.icrc_foreign_id)
    }

    #[test]
    fn fixed_segments_check_valid_and_corrupted_ones_do_not() {
        let mut ids = IdDeltas::default();
        for id in [0, 1, 7, 63] {
            let mut p = packet(4112);
            ids.fix_segment(id, &mut p);
            let want = icrc::ipv4_id_delta(id as u16, 4108, IcrcForm::Spec);
            let fixed = icrc::from_wire(p[4108..].try_into().unwrap());
            assert_eq!(
                fixed ^ icrc::from_wire(packet(4112)[4108..].try_into().unwrap()),
                want
            );
            for strict in [false, true] {
                assert_eq!(
                    status(&mut ids, &p, strict),
                    (IcrcStatus::Valid, 0),
                    "id {id}"
                );
            }
            p[100] ^= 4;
            for strict in [false, true] {
                assert_eq!(
                    status(&mut ids, &p, strict),
                    (IcrcStatus::Invalid, 0),
                    "id {id}"
                );
            }
        }
        // The same fix applied to a corrupted packet keeps it invalid.
        let mut p = packet(1000);
        p[20] ^= 1;
        ids.fix_segment(3, &mut p);
        assert_eq!(status(&mut ids, &p, false).0, IcrcStatus::Invalid);
        // Too short to hold an ICRC: invalid, no panic.
        assert_eq!(
            status(&mut ids, &[0x0a, 1, 2], false).0,
            IcrcStatus::Invalid
        );
    }

    #[test]
    fn another_senders_identification_passes_unless_every_peer_is_rocex() {
        let mut ids = IdDeltas::default();
        let mut p = packet(1040);
        let delta = icrc::ipv4_id_delta(0x4d2c, 1036, IcrcForm::Spec);
        for (b, d) in p[1036..].iter_mut().zip(icrc::to_wire(delta)) {
            *b ^= d;
        }
        assert_eq!(status(&mut ids, &p, false), (IcrcStatus::Valid, 1));
        assert_eq!(status(&mut ids, &p, true), (IcrcStatus::Invalid, 1));
        p[500] ^= 0x10;
        assert_eq!(status(&mut ids, &p, false), (IcrcStatus::Invalid, 0));
    }
}
