//! The direct data path's slots (rocexd's default where they fit, `docs/abi.md` §6.6): a
//! client that asks gets a QPN slot and its socket of the daemon's steering group, and
//! runs the engine in its own process; the slot is the connection's until it closes.

use std::cell::Cell;
use std::collections::BTreeMap;

use rocex_io::SteerGroup;
use rocex_proto::QpStatus;
use rocex_proto::verbs::{QpState, QpType};
use rocex_shm::Board;
use rocex_shm::control::{DirectGrant, QpStat, Response, qp_state_from_wire, qp_type_from_wire};

use super::Reply;

/// The steering group and who holds which slot.
#[derive(Debug)]
pub(crate) struct Direct {
    group: SteerGroup,
    /// The grant every client gets, but for its slot: the daemon's own settings.
    template: DirectGrant,
    /// QPs a slot's board holds: the per-client QP limit (`max_qps`), which bounds what a
    /// `Stat` copies of it.
    board_qps: usize,
    /// Slots by client.
    slots: BTreeMap<u64, u32>,
    /// Each slot holder's QP board, which its engine fills for `Stat`.
    boards: BTreeMap<u64, Board>,
    /// Board entries not reported: a QPN outside the holder's slot, an unknown type or
    /// state, or a board that never held still while read.
    pub(super) board_refused: Cell<u64>,
    /// `OpenDirect`s refused: every slot taken, or a second one on a connection.
    pub(super) refused: u64,
    /// Packets of a granted slot that reached the daemon: the group had lost its program.
    pub(super) misrouted: u64,
    /// Times the program was attached again after that.
    pub(super) reattached: u64,
    /// A misrouted packet was seen this turn.
    stale: bool,
}

impl Direct {
    /// Slots of `group`, granted with `template`, each with a QP board of `board_qps`.
    pub(crate) fn new(group: SteerGroup, template: DirectGrant, board_qps: usize) -> Self {
        Self {
            group,
            template,
            board_qps,
            slots: BTreeMap::new(),
            boards: BTreeMap::new(),
            board_refused: Cell::new(0),
            refused: 0,
            misrouted: 0,
            reattached: 0,
            stale: false,
        }
    }

    /// Slots granted now.
    pub(super) fn in_use(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Client `id`'s slot and the group it is of, when it holds one.
    pub(super) fn slot(&self, id: u64) -> Option<(u32, &SteerGroup)> {
        Some((*self.slots.get(&id)?, &self.group))
    }

    /// Datagrams found in a slot's socket when it was granted or given back.
    pub(super) fn drained(&self) -> u64 {
        self.group.drained()
    }

    /// `OpenDirect` from client `id`: a slot and its socket, or why not.
    pub(super) fn open(&mut self, id: u64) -> Reply {
        if let Some(slot) = self.slots.get(&id) {
            self.refused += 1;
            return Reply::err(
                libc::EEXIST,
                format!("this connection holds direct slot {slot} already"),
            );
        }
        let board = Board::create(self.board_qps, QpStatus::names().count())
            .and_then(|b| Ok((b.fd().try_clone_to_owned()?, b)));
        let (board_fd, board) = match board {
            Ok(b) => b,
            Err(e) => {
                self.refused += 1;
                return Reply::err(libc::EIO, format!("direct slot's QP board: {e}"));
            }
        };
        match self.group.grant() {
            Ok(Some(g)) => {
                self.slots.insert(id, g.slot);
                self.boards.insert(id, board);
                tracing::info!(client = id, slot = g.slot, "direct slot granted");
                Reply {
                    resp: Response::Direct(DirectGrant {
                        slot: g.slot,
                        ..self.template
                    }),
                    fds: vec![g.socket.into(), board_fd],
                }
            }
            Ok(None) => {
                self.refused += 1;
                let n = (1u64 << self.group.bits()) - 1;
                let why = if self.in_use() == n {
                    format!("direct slots: all {n} are granted")
                } else {
                    format!(
                        "direct slots: {} of {n} granted, the others' sockets still held by \
                         processes that kept them",
                        self.in_use()
                    )
                };
                Reply::err(libc::ENOMEM, why)
            }
            Err(e) => {
                self.refused += 1;
                Reply::err(libc::EIO, format!("direct slot: {e}"))
            }
        }
    }

    /// Looks at a packet the daemon received for `qpn`: one for a granted slot's QP can
    /// only come through a group without its program, which any member may remove
    /// (`docs/security.md`).
    pub(super) fn received(&mut self, qpn: u32) {
        let slot = self.group.slot_of(qpn);
        if qpn != rocex_proto::GSI_QPN && slot != 0 && self.group.is_granted(slot) {
            self.misrouted += 1;
            self.stale = true;
        }
    }

    /// Attaches the group's program again after a turn that received a misrouted packet.
    pub(super) fn repair(&mut self) {
        if !std::mem::take(&mut self.stale) {
            return;
        }
        match self.group.attach() {
            Ok(()) => {
                self.reattached += 1;
                tracing::warn!(
                    misrouted = self.misrouted,
                    "the steering group had lost its program (a direct client removed it): attached again"
                );
            }
            Err(e) => tracing::warn!("cannot attach the steering program again: {e}"),
        }
    }

    /// The QPs the slot holders' boards show. Only QPNs of the holder's slot, with a known
    /// type and state, count: a client cannot show a QP as another's.
    pub(super) fn board_qps(&self) -> Vec<BoardQp> {
        let mut out = Vec::new();
        for (&id, board) in &self.boards {
            let Some(&slot) = self.slots.get(&id) else {
                continue;
            };
            let Some(entries) = board.read() else {
                self.board_refused.set(self.board_refused.get() + 1);
                continue;
            };
            for e in entries {
                let mine = e.qpn != rocex_proto::GSI_QPN && self.group.slot_of(e.qpn) == slot;
                let known = qp_type_from_wire(e.qp_type).zip(qp_state_from_wire(e.state));
                match known.filter(|_| mine) {
                    Some((qp_type, state)) => out.push(BoardQp {
                        holder: id,
                        qpn: e.qpn,
                        qp_type,
                        state,
                        values: e.values,
                    }),
                    None => self.board_refused.set(self.board_refused.get() + 1),
                }
            }
        }
        out
    }

    /// Client `id` is gone: its slot's QPNs come back to the daemon.
    pub(super) fn close(&mut self, id: u64) {
        self.boards.remove(&id);
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        match self.group.free(slot) {
            Ok(drained) => tracing::info!(client = id, slot, drained, "direct slot freed"),
            Err(e) => tracing::warn!(client = id, slot, "direct slot {slot}: {e}"),
        }
    }
}

/// A QP a slot holder's board shows, as [`Direct::board_qps`] checked it.
pub(super) struct BoardQp {
    /// The holder's client id.
    pub(super) holder: u64,
    pub(super) qpn: u32,
    qp_type: QpType,
    state: QpState,
    /// The board's values, named by [`QpStatus::names`].
    values: Vec<u64>,
}

impl BoardQp {
    /// The QP as `Stat` shows it, `pid` its holder's process (0 when unknown).
    pub(super) fn stat(&self, pid: u64) -> QpStat {
        QpStat {
            qpn: self.qpn,
            qp_type: self.qp_type,
            state: self.state,
            counters: QpStatus::names()
                .zip(self.values.iter().copied())
                .map(|(n, v)| (n.to_owned(), v))
                .chain([("client_pid".to_owned(), pid)])
                .collect(),
        }
    }
}
