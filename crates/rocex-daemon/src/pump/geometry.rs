//! The geometry of a QP's SQ and RQ rings and the caps a client may ask for.

use std::io;

use rocex_proto::verbs::QpCap;
use rocex_shm::desc::sge_capacity;
use rocex_shm::{RingKind, RingSpec};

/// Largest SGE count a QP may ask for.
pub(crate) const MAX_SGE: u32 = 32;
/// Largest inline size a QP may ask for.
pub(crate) const MAX_INLINE: u32 = 1024;
/// Deepest queue.
pub(crate) const MAX_WR: u32 = 16384;

pub(super) fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_owned())
}

/// The SQ/RQ geometry for the caps asked: slots a power of two at least the depth, slots
/// big enough for the SGEs and inline data. Returns the caps granted.
pub(crate) fn qp_geometry(cap: &QpCap) -> io::Result<(RingSpec, RingSpec, QpCap)> {
    if cap.max_send_wr == 0
        || cap.max_send_wr > MAX_WR
        || cap.max_recv_wr == 0
        || cap.max_recv_wr > MAX_WR
    {
        return Err(bad("queue depth must be 1..=16384"));
    }
    if cap.max_send_sge > MAX_SGE || cap.max_recv_sge > MAX_SGE {
        return Err(bad("at most 32 SGEs per work request"));
    }
    if cap.max_inline_data > MAX_INLINE {
        return Err(bad("at most 1024 inline bytes"));
    }
    let sq_payload = (cap.max_send_sge.max(1) * 16).max(cap.max_inline_data.next_multiple_of(4));
    let sq_slot = (128 + sq_payload).next_power_of_two().max(256);
    let rq_slot = (16 + cap.max_recv_sge.max(1) * 16).next_power_of_two();
    let sq = RingSpec::new(RingKind::Sq, cap.max_send_wr.next_power_of_two(), sq_slot)
        .map_err(|e| bad(&e.to_string()))?;
    let rq = RingSpec::new(RingKind::Rq, cap.max_recv_wr.next_power_of_two(), rq_slot)
        .map_err(|e| bad(&e.to_string()))?;
    let granted = QpCap {
        max_send_wr: sq.slots(),
        max_recv_wr: rq.slots(),
        max_send_sge: cap.max_send_sge.max(1).min(sge_capacity(sq_slot, 128)),
        max_recv_sge: cap.max_recv_sge.max(1).min(sge_capacity(rq_slot, 16)),
        max_inline_data: cap.max_inline_data,
    };
    Ok((sq, rq, granted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_grants_at_least_what_was_asked() {
        let cap = QpCap {
            max_send_wr: 100,
            max_recv_wr: 3,
            max_send_sge: 4,
            max_recv_sge: 2,
            max_inline_data: 200,
        };
        let (sq, rq, g) = qp_geometry(&cap).unwrap();
        assert_eq!((sq.slots(), rq.slots()), (128, 4));
        assert_eq!(sq.slot_size(), 512);
        assert_eq!(rq.slot_size(), 64);
        assert!(g.max_send_sge >= 4 && g.max_recv_sge >= 2 && g.max_inline_data == 200);
        assert!(
            qp_geometry(&QpCap {
                max_send_wr: 0,
                ..cap
            })
            .is_err()
        );
        assert!(
            qp_geometry(&QpCap {
                max_inline_data: 5000,
                ..cap
            })
            .is_err()
        );
        assert!(
            qp_geometry(&QpCap {
                max_recv_sge: 99,
                ..cap
            })
            .is_err()
        );
    }
}
