//! How many PSNs a go-back-N requester keeps unacknowledged.
//!
//! rxe stops at [`MAX_UNACKED_PSNS`] (`rxe_req.c`, `wait_psn`), and so does rocex by
//! default. That is 512 KiB at a 4 KiB MTU, so a round trip of a few milliseconds (both
//! ends on a loaded small host, emulated guests, a long path) caps a QP near 1 Gb/s.
//! `Config::window` raises the ceiling: a QP starts at rxe's window and doubles it each
//! time a whole window is acknowledged without a go-back, up to the ceiling; a go-back (a
//! loss, or an answer so late the timer gave up on it) sets it back to rxe's. Under
//! go-back-N one loss costs up to a window of resent packets, so a path that loses keeps
//! rxe's window and only a clean one grows, as TCP's slow start grows only on a clean path
//! (RFC 5681). With `Config::rxe_recovery` the window stays rxe's.
//!
//! A wider window is more queue wherever the path is slowest: at a responder that cannot
//! keep up, another QP's packets wait behind it (`docs/wire.md`, "Recovery").
//!
//! The responder needs nothing from this: rxe's and rocex's take any PSN in order, and
//! [`MAX_WINDOW`] is far below the 2^23 PSNs that tell a new packet from a duplicate
//! (IBTA §9.7.5.1.2).

use rocex_wire::Psn;

use super::MAX_UNACKED_PSNS;

/// The widest window `Config::window` may ask for: 32 MiB at a 4 KiB MTU, past any socket
/// buffer rocex asks the kernel for.
pub const MAX_WINDOW: u32 = 8192;

/// The go-back-N window of one QP.
#[derive(Debug)]
pub(crate) struct Window {
    /// The widest it grows (`Config::window`).
    ceiling: u32,
    /// PSNs in flight at most, from the oldest unacknowledged one.
    size: u32,
    /// The oldest unacknowledged PSN at which `size` doubles: a whole window acknowledged
    /// since the last change. Unset until the first acknowledgement.
    grow_at: Option<Psn>,
}

impl Default for Window {
    fn default() -> Self {
        Self::new(MAX_UNACKED_PSNS)
    }
}

impl Window {
    /// A window that grows up to `ceiling` PSNs (1..=[`MAX_WINDOW`]).
    pub(crate) fn new(ceiling: u32) -> Self {
        let ceiling = ceiling.clamp(1, MAX_WINDOW);
        Self {
            ceiling,
            size: ceiling.min(MAX_UNACKED_PSNS),
            grow_at: None,
        }
    }

    /// Back to the start (the QP went back to RESET), keeping the ceiling.
    pub(crate) fn clear(&mut self) {
        *self = Self::new(self.ceiling);
    }

    /// Whether a requester at `next` with `oldest` unacknowledged may send another PSN.
    pub(crate) fn open(&self, next: Psn, oldest: Psn) -> bool {
        next.diff(oldest) < self.size as i32
    }

    /// PSNs before `oldest` are acknowledged.
    pub(crate) fn acked(&mut self, oldest: Psn) {
        match self.grow_at {
            None => self.grow_at = Some(oldest.add(self.size)),
            Some(at) if oldest.diff(at) >= 0 && self.size < self.ceiling => {
                self.size = (self.size * 2).min(self.ceiling);
                self.grow_at = Some(oldest.add(self.size));
            }
            Some(_) => {}
        }
    }

    /// The requester went back to `oldest` to resend: rxe's window again.
    pub(crate) fn went_back(&mut self, oldest: Psn) {
        self.size = self.ceiling.min(MAX_UNACKED_PSNS);
        self.grow_at = Some(oldest.add(self.size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acknowledges `n` PSNs one at a time from `from`; returns the next PSN.
    fn ack_run(w: &mut Window, from: Psn, n: u32) -> Psn {
        for i in 1..=n {
            w.acked(from.add(i));
        }
        from.add(n)
    }

    /// The sizes after each of `rounds` whole windows acknowledged from `start`, and
    /// where the acknowledgements reached.
    fn grow(w: &mut Window, start: Psn, rounds: usize) -> (Vec<u32>, Psn) {
        w.acked(start);
        let mut at = start;
        let mut sizes = vec![w.size];
        for _ in 0..rounds {
            let size = w.size;
            at = ack_run(w, at, size);
            sizes.push(w.size);
        }
        (sizes, at)
    }

    #[test]
    fn doubles_per_clean_window_up_to_the_ceiling_and_falls_back_on_a_go_back() {
        // Near the top of the PSN space, so that growth crosses the wrap.
        let start = Psn::new(Psn::MASK - 300);
        let mut w = Window::new(512);
        let (sizes, mut at) = grow(&mut w, start, 5);
        assert_eq!(sizes, [128, 256, 512, 512, 512, 512]);
        assert!(w.open(at.add(511), at) && !w.open(at.add(512), at));

        w.went_back(at);
        assert_eq!(w.size, 128);
        at = ack_run(&mut w, at, 127);
        assert_eq!(w.size, 128, "one PSN short of a clean window");
        ack_run(&mut w, at, 1);
        assert_eq!(w.size, 256);
    }

    #[test]
    fn rxes_window_by_default_and_ceilings_below_it_and_beyond_the_limit() {
        let start = Psn::new(7);
        for (ceiling, want) in [
            (MAX_UNACKED_PSNS, [128, 128, 128]),
            (16, [16, 16, 16]),
            (0, [1, 1, 1]),
            (u32::MAX, [128, 256, 512]),
        ] {
            let mut w = Window::new(ceiling);
            assert_eq!(grow(&mut w, start, 2).0, want, "ceiling {ceiling}");
        }
        let mut w = Window::new(u32::MAX);
        assert_eq!(*grow(&mut w, start, 8).0.last().unwrap(), MAX_WINDOW);
        assert_eq!(Window::default().ceiling, MAX_UNACKED_PSNS);
    }
}
