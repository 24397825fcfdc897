//! Which queued packets go out together.
//!
//! UDP GSO (`UDP_SEGMENT`) sends one buffer that the kernel cuts into datagrams of one
//! size, the last possibly shorter, all to one destination: consecutive packets to the
//! same address with the same length and the same TOS (one message has one IP header)
//! therefore form one run, closed by a shorter packet, by [`MAX_SEGMENTS`] or by
//! [`MAX_GSO_BYTES`]. Everything else is a run of one.
//!
//! A run's packets also reach one socket of a receiver that steers by QPN (a
//! `SO_REUSEPORT` group's program, `crate::steer`): that kernel picks the socket for the
//! whole message by its first segment's QPN before it cuts it, and the socket's filter
//! then drops every segment for another slot. So a run's destination QPNs share their low
//! [`MAX_SLOT_BITS`] bits, the most a group names its slots by (QP1, and a datagram too
//! short for a BTH, count as slot 0, where the program sends them). The engine interleaves
//! its QPs' packets, so the queue is taken grouped by destination and that key (a stable
//! sort: each QP's packets keep their order; IBA orders nothing across QPs), and a run's
//! packets need not lie side by side in the send buffer (one iovec each,
//! `sys::sendmmsg`).

use std::net::IpAddr;

use crate::steer::MAX_SLOT_BITS;

/// Most segments in one GSO send (the kernel's `UDP_MAX_SEGMENTS`).
pub(crate) const MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO send: the largest UDP payload over IPv4 (65535 - 20 - 8).
pub(crate) const MAX_GSO_BYTES: usize = 65_507;

/// A packet in the send buffer: `len` bytes from `at`, for the steering slot `slot` (of
/// its destination QPN, [`slot_key`]) at `dest`, with IP TOS `tos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Queued {
    pub(super) dest: IpAddr,
    pub(super) slot: u32,
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) tos: u8,
}

/// The socket of a steering receiver a packet for `qpn` (none: a datagram too short for a
/// BTH) can reach: its low [`MAX_SLOT_BITS`] bits, slot 0 for QP1 (`steer::program`).
pub(super) fn slot_key(qpn: Option<u32>) -> u32 {
    match qpn {
        Some(q) if q != GSI_QPN => q & ((1 << MAX_SLOT_BITS) - 1),
        _ => 0,
    }
}

/// QP1, the GSI, which a steering group hands to slot 0 whatever its low bits.
const GSI_QPN: u32 = 1;

/// Packets `order[first..first + count]` of the queue, sent as one message: all
/// `segment` bytes long but the last, which may be shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) first: usize,
    pub(super) count: usize,
    pub(super) segment: usize,
}

/// Groups `queue` into runs over `order`, the queue's indices grouped by destination and
/// steering slot (in queue order without `gso`, when every packet is its own run).
pub(super) fn plan(queue: &[Queued], gso: bool, order: &mut Vec<usize>, runs: &mut Vec<Run>) {
    order.clear();
    order.extend(0..queue.len());
    if gso {
        order.sort_by_key(|&i| (queue[i].dest, queue[i].slot));
    }
    runs.clear();
    let mut open: Option<(Run, usize, bool)> = None; // run, bytes, closed by a short one
    for (at, q) in order.iter().map(|&i| &queue[i]).enumerate() {
        if let Some((run, bytes, closed)) = &mut open {
            let head = &queue[order[run.first]];
            let fits = gso
                && !*closed
                && q.dest == head.dest
                && q.slot == head.slot
                && q.tos == head.tos
                && q.len <= run.segment
                && run.count < MAX_SEGMENTS
                && *bytes + q.len <= MAX_GSO_BYTES;
            if fits {
                run.count += 1;
                *bytes += q.len;
                *closed = q.len < run.segment;
                continue;
            }
            runs.push(*run);
        }
        let run = Run {
            first: at,
            count: 1,
            segment: q.len,
        };
        open = Some((run, q.len, false));
    }
    if let Some((run, _, _)) = open {
        runs.push(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(198, 18, 201, 2));

    fn queue(packets: &[(IpAddr, usize)]) -> Vec<Queued> {
        let mut at = 0;
        packets
            .iter()
            .map(|&(dest, len)| {
                let q = Queued {
                    dest,
                    slot: 0x11,
                    at,
                    len,
                    tos: 0,
                };
                at += len;
                q
            })
            .collect()
    }

    /// Each run as (its packets' queue indices, segment size).
    fn runs_of(q: &[Queued], gso: bool) -> Vec<(Vec<usize>, usize)> {
        let (mut order, mut r) = (Vec::new(), Vec::new());
        plan(q, gso, &mut order, &mut r);
        r.iter()
            .map(|r| (order[r.first..r.first + r.count].to_vec(), r.segment))
            .collect()
    }

    fn runs(packets: &[(IpAddr, usize)], gso: bool) -> Vec<(Vec<usize>, usize)> {
        runs_of(&queue(packets), gso)
    }

    /// A run of the packets `first..first + count` of the queue.
    fn span(first: usize, count: usize, segment: usize) -> (Vec<usize>, usize) {
        ((first..first + count).collect(), segment)
    }

    #[test]
    fn another_tos_starts_a_run() {
        let mut q = queue(&[(B, 100); 5]);
        q[2].tos = 0x6a;
        q[3].tos = 0x6a;
        assert_eq!(
            runs_of(&q, true),
            [span(0, 2, 100), span(2, 2, 100), span(4, 1, 100)]
        );
    }

    #[test]
    fn each_slot_has_runs_of_its_own_in_its_order() {
        // Two slots' packets interleaved, as the engine sends them for two QPs, then an ACK
        // for each and one for slot 0.
        let mut q = queue(&[(B, 100); 6]);
        for (i, p) in q.iter_mut().enumerate() {
            p.slot = if i % 2 == 0 { 0x22 } else { 0x11 };
        }
        q.extend(queue(&[(B, 48), (B, 48), (B, 3)]));
        q[7].slot = 0x22;
        q[8].slot = 0;
        assert_eq!(
            runs_of(&q, true),
            [
                (vec![8], 3),
                (vec![1, 3, 5, 6], 100),
                (vec![0, 2, 4, 7], 100)
            ]
        );
        // Without GSO nothing moves.
        let order: Vec<_> = runs_of(&q, false).into_iter().flat_map(|r| r.0).collect();
        assert_eq!(order, (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn the_slot_is_a_steering_groups_at_most() {
        // 5 low bits; QP1 and a datagram with no BTH go to slot 0, as does QPN 0x40.
        assert_eq!(slot_key(Some(0x12_3401)), 1);
        assert_eq!(slot_key(Some(0x41)), 1);
        assert_eq!(slot_key(Some(1)), 0);
        assert_eq!(slot_key(None), 0);
        assert_eq!(slot_key(Some(0x40)), 0);
        assert_eq!(slot_key(Some(0xff_ffff)), 31);
    }

    #[test]
    fn a_message_goes_out_as_one_run() {
        // FIRST, MIDDLEs, a shorter LAST: one run.
        let mut p = vec![(B, 4128); 15];
        p.push((B, 1000));
        assert_eq!(runs(&p, true), [span(0, 16, 4128)]);
        // Without GSO, one run a packet.
        assert_eq!(runs(&p, false).len(), 16);
    }

    #[test]
    fn a_short_packet_closes_its_run() {
        let p = [(B, 100), (B, 100), (B, 60), (B, 100), (B, 100)];
        assert_eq!(runs(&p, true), [span(0, 3, 100), span(3, 2, 100)]);
    }

    #[test]
    fn a_longer_packet_or_another_destination_starts_a_run() {
        // A's packets go first (grouped by destination), and B's that A's interrupted join.
        let p = [(B, 60), (B, 100), (A, 100), (A, 100), (B, 100)];
        assert_eq!(
            runs(&p, true),
            [span(2, 2, 100), span(0, 1, 60), (vec![1, 4], 100)]
        );
    }

    #[test]
    fn runs_stop_at_the_segment_and_byte_limits() {
        let p = vec![(B, 100); 130];
        assert_eq!(
            runs(&p, true),
            [span(0, 64, 100), span(64, 64, 100), span(128, 2, 100)]
        );
        // 15 x 4128 = 61920; a 16th would exceed 65507.
        let p = vec![(B, 4128); 16];
        assert_eq!(runs(&p, true), [span(0, 15, 4128), span(15, 1, 4128)]);
    }

    #[test]
    fn an_empty_queue_plans_nothing() {
        assert!(runs(&[], true).is_empty());
    }
}
