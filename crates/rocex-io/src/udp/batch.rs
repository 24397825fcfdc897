//! Which queued packets go out together.
//!
//! UDP GSO (`UDP_SEGMENT`) sends one buffer that the kernel cuts into datagrams of one
//! size, the last possibly shorter, all to one destination: consecutive packets to the
//! same address with the same length and the same TOS (one message has one IP header)
//! therefore form one run, closed by a shorter packet, by [`MAX_SEGMENTS`] or by
//! [`MAX_GSO_BYTES`]. Everything else is a run of one.
//!
//! A run's packets are also for one destination QP. A receiving kernel that steers by QPN
//! (a `SO_REUSEPORT` group's program, `crate::steer`) picks the socket for the whole
//! message by its first segment's before it cuts it, and that socket's filter then drops
//! every segment for another slot's QP.

use std::net::IpAddr;

/// Most segments in one GSO send (the kernel's `UDP_MAX_SEGMENTS`).
pub(crate) const MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO send: the largest UDP payload over IPv4 (65535 - 20 - 8).
pub(crate) const MAX_GSO_BYTES: usize = 65_507;

/// A packet in the send buffer: `len` bytes from `at`, for QP `qpn` (none in a datagram
/// too short for a BTH) at `dest`, with IP TOS `tos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Queued {
    pub(super) dest: IpAddr,
    pub(super) qpn: Option<u32>,
    pub(super) at: usize,
    pub(super) len: usize,
    pub(super) tos: u8,
}

/// Queued packets `first..first + count`, sent as one message: all `segment` bytes long
/// but the last, which may be shorter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) first: usize,
    pub(super) count: usize,
    pub(super) segment: usize,
}

/// Groups `queue` (laid out back to back in the send buffer) into runs; without `gso`
/// every packet is its own run.
pub(super) fn plan(queue: &[Queued], gso: bool, runs: &mut Vec<Run>) {
    runs.clear();
    let mut open: Option<(Run, usize, bool)> = None; // run, bytes, closed by a short one
    for (i, q) in queue.iter().enumerate() {
        if let Some((run, bytes, closed)) = &mut open {
            let head = &queue[run.first];
            let fits = gso
                && !*closed
                && q.dest == head.dest
                && q.qpn == head.qpn
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
            first: i,
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
                    qpn: Some(0x11),
                    at,
                    len,
                    tos: 0,
                };
                at += len;
                q
            })
            .collect()
    }

    fn runs_of(q: &[Queued], gso: bool) -> Vec<(usize, usize, usize)> {
        let mut r = Vec::new();
        plan(q, gso, &mut r);
        r.iter().map(|r| (r.first, r.count, r.segment)).collect()
    }

    fn runs(packets: &[(IpAddr, usize)], gso: bool) -> Vec<(usize, usize, usize)> {
        runs_of(&queue(packets), gso)
    }

    #[test]
    fn another_tos_starts_a_run() {
        let mut q = queue(&[(B, 100); 5]);
        q[2].tos = 0x6a;
        q[3].tos = 0x6a;
        assert_eq!(runs_of(&q, true), [(0, 2, 100), (2, 2, 100), (4, 1, 100)]);
    }

    #[test]
    fn another_qp_starts_a_run() {
        // An ACK for each of two QPs, then a message's packets for one of them.
        let mut q = queue(&[(B, 48), (B, 48), (B, 100), (B, 100)]);
        q[1].qpn = Some(0x22);
        q[3].qpn = None;
        assert_eq!(
            runs_of(&q, true),
            [(0, 1, 48), (1, 1, 48), (2, 1, 100), (3, 1, 100)]
        );
    }

    #[test]
    fn a_message_goes_out_as_one_run() {
        // FIRST, MIDDLEs, a shorter LAST: one run.
        let mut p = vec![(B, 4128); 15];
        p.push((B, 1000));
        assert_eq!(runs(&p, true), [(0, 16, 4128)]);
        // Without GSO, one run a packet.
        assert_eq!(runs(&p, false).len(), 16);
    }

    #[test]
    fn a_short_packet_closes_its_run() {
        let p = [(B, 100), (B, 100), (B, 60), (B, 100), (B, 100)];
        assert_eq!(runs(&p, true), [(0, 3, 100), (3, 2, 100)]);
    }

    #[test]
    fn a_longer_packet_or_another_destination_starts_a_run() {
        let p = [(B, 60), (B, 100), (A, 100), (A, 100), (B, 100)];
        assert_eq!(
            runs(&p, true),
            [(0, 1, 60), (1, 1, 100), (2, 2, 100), (4, 1, 100)]
        );
    }

    #[test]
    fn runs_stop_at_the_segment_and_byte_limits() {
        let p = vec![(B, 100); 130];
        assert_eq!(runs(&p, true), [(0, 64, 100), (64, 64, 100), (128, 2, 100)]);
        // 15 x 4128 = 61920; a 16th would exceed 65507.
        let p = vec![(B, 4128); 16];
        assert_eq!(runs(&p, true), [(0, 15, 4128), (15, 1, 4128)]);
    }

    #[test]
    fn an_empty_queue_plans_nothing() {
        assert!(runs(&[], true).is_empty());
    }
}
