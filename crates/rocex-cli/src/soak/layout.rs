//! Where everything sits in each side's memory region. Both sides use the same layout; a
//! lane uses the requester areas on its sending side and the responder areas on its
//! receiving side. Every outstanding request has bytes of its own, so that a retransmission
//! (which gathers its data again) and a check (which reads after the completion) never see
//! a later message's bytes.

use super::plan::{MAX_LEN, PATTERN_SPAN};

/// Bytes per receive, WRITE target and READ result slot.
const SLOT: u64 = MAX_LEN as u64;
/// The pattern's bytes.
const PATTERN_LEN: u64 = PATTERN_SPAN as u64 + MAX_LEN as u64;
const PAGE: u64 = 4096;

/// Offsets in a side's region, for `lanes` lanes of `window` requests in flight and as
/// many receives posted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    lanes: u64,
    window: u64,
}

impl Layout {
    /// The layout of `lanes` lanes with `window` slots each.
    pub(crate) const fn new(lanes: u32, window: u32) -> Self {
        Self {
            lanes: lanes as u64,
            window: window as u64,
        }
    }

    fn index(self, lane: u32, n: u64) -> u64 {
        u64::from(lane) * self.window + n % self.window
    }

    /// The pattern (READ source, payload source).
    pub(crate) const fn pattern(self) -> u64 {
        0
    }

    /// The shared FETCH_ADD counter.
    pub(crate) const fn counter(self) -> u64 {
        PATTERN_LEN
    }

    /// Lane `lane`'s CMP_SWAP word.
    pub(crate) fn cas_word(self, lane: u32) -> u64 {
        self.counter() + 8 + 8 * u64::from(lane)
    }

    fn headers(self) -> u64 {
        (self.cas_word(0) + 8 * self.lanes).next_multiple_of(PAGE)
    }

    /// The header of request `k` of `lane` (16 bytes).
    pub(crate) fn header(self, lane: u32, k: u64) -> u64 {
        self.headers() + 16 * self.index(lane, k)
    }

    fn results(self) -> u64 {
        self.headers() + 16 * self.lanes * self.window
    }

    /// Where atomic request `k` of `lane` returns the original value.
    pub(crate) fn atomic_result(self, lane: u32, k: u64) -> u64 {
        self.results() + 8 * self.index(lane, k)
    }

    fn slots(self) -> u64 {
        (self.results() + 8 * self.lanes * self.window).next_multiple_of(PAGE)
    }

    fn area(self) -> u64 {
        SLOT * self.lanes * self.window
    }

    /// The buffer of receive `w` of `lane`.
    pub(crate) fn recv_slot(self, lane: u32, w: u64) -> u64 {
        self.slots() + SLOT * self.index(lane, w)
    }

    /// The target of the WRITE_WITH_IMM with receive sequence `seq` of `lane`.
    pub(crate) fn write_slot(self, lane: u32, seq: u64) -> u64 {
        self.slots() + self.area() + SLOT * self.index(lane, seq)
    }

    /// Where READ request `k` of `lane` lands.
    pub(crate) fn read_slot(self, lane: u32, k: u64) -> u64 {
        self.slots() + 2 * self.area() + SLOT * self.index(lane, k)
    }

    /// Bytes the region needs.
    pub(crate) fn len(self) -> u64 {
        self.slots() + 3 * self.area()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_do_not_overlap() {
        let l = Layout::new(16, 32);
        assert!(l.cas_word(15) + 8 <= l.header(0, 0));
        assert!(l.header(15, 31) + 16 <= l.atomic_result(0, 0));
        assert!(l.atomic_result(15, 31) + 8 <= l.recv_slot(0, 0));
        assert_eq!(l.recv_slot(15, 31) + SLOT, l.write_slot(0, 0));
        assert_eq!(l.write_slot(15, 31) + SLOT, l.read_slot(0, 0));
        assert_eq!(l.read_slot(15, 31) + SLOT, l.len());
        assert_eq!(l.recv_slot(1, 32), l.recv_slot(1, 0));
    }
}
