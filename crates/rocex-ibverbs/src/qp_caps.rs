//! The capacities a QP's send queue is granted, sized as rxe sizes them.

/// The SGE count and inline capacity a send queue gets, as rxe sizes its send WQEs
/// (`rxe_init_sq`): a WQE holds the larger of `max_send_sge` SGEs (16 bytes each) and
/// `max_inline_data` bytes, and both capacities are what that WQE holds. A QP asked for
/// one SGE and no inline data can so send 16 bytes inline (rdma_xclient does), and one
/// asked for 100 inline bytes gets 6 SGEs and 100 bytes. rocex gives every send queue at
/// least one SGE, and no more SGEs than the device has (`device_max_sge`): rocexd takes
/// more inline bytes (1024) than rxe (400), which 32 SGEs do not cover.
pub fn send_wqe_caps(max_send_sge: u32, max_inline_data: u32, device_max_sge: u32) -> (u32, u32) {
    let wqe = max_send_sge.saturating_mul(16).max(max_inline_data);
    let sge = (wqe / 16).max(1);
    let sge = if sge > max_send_sge {
        sge.min(device_max_sge)
    } else {
        sge
    };
    (sge, wqe.max(16))
}

#[cfg(test)]
mod tests {
    use super::send_wqe_caps;

    #[test]
    fn rounds_as_rxe_init_sq() {
        // rdma_xclient: one SGE, no inline data asked: 16 bytes inline.
        assert_eq!(send_wqe_caps(1, 0, 32), (1, 16));
        assert_eq!(send_wqe_caps(0, 0, 32), (1, 16));
        assert_eq!(send_wqe_caps(4, 0, 32), (4, 64));
        assert_eq!(send_wqe_caps(4, 60, 32), (4, 64));
        assert_eq!(send_wqe_caps(1, 100, 32), (6, 100));
        assert_eq!(send_wqe_caps(2, 400, 32), (25, 400));
        // Beyond what 32 SGEs hold: the inline size stands, the SGEs stop at the device's.
        assert_eq!(send_wqe_caps(1, 1024, 32), (32, 1024));
        // Too many SGEs asked stays too many (the daemon refuses it).
        assert_eq!(send_wqe_caps(40, 0, 32), (40, 640));
    }
}
