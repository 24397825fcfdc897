//! The QP board rocexd reads for `rocex stat` (`docs/abi.md` §6.6): this engine's QPs, their
//! status and counters, copied at most every [`EVERY`] while the engine works, once more
//! when it has gone quiet (the progress thread's timer, one wake-up), and at once after a
//! control verb. A QP is rocexd's to report as any other; only its counters live here.

use std::time::Duration;

use rocex_proto::Instant;
use rocex_shm::BoardEntry;
use rocex_shm::control::qp_type_to_wire;

use super::Core;

/// The most a board lags the engine while it works.
pub(super) const EVERY: Duration = Duration::from_millis(100);

impl Core {
    /// The engine worked at `now`: the board is copied when its copy is due, else made due
    /// [`EVERY`] from now.
    pub(super) fn board_tick(&mut self, now: Instant) {
        if self.board.is_none() {
            return;
        }
        match self.board_due {
            None => self.board_due = Some(now + EVERY),
            Some(t) if t <= now => self.publish(),
            Some(_) => {}
        }
    }

    /// Copies every QP to the board now.
    pub(super) fn publish(&mut self) {
        let Some(board) = &self.board else { return };
        let e = &self.driver.engine;
        board.publish(e.qpns().filter_map(|qpn| {
            let s = e.qp_status(qpn).ok()?;
            Some(BoardEntry {
                qpn,
                qp_type: qp_type_to_wire(s.qp_type),
                state: s.state as u8,
                values: s.named().map(|(_, v)| v).collect(),
            })
        }));
        self.board_due = None;
    }

    /// The engine's next deadline or the board's, whichever comes first: what the progress
    /// thread's timer waits for.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (self.driver.engine.poll_timeout(), self.board_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
