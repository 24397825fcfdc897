//! Selective repeat between rocex peers (IRN: Mittal et al., "Revisiting Network Support
//! for RDMA", SIGCOMM 2018), in place of rxe's go-back-N on a QP whose peer is known to
//! speak it (`Config::selective_repeat`, `Engine::set_selective_repeat`).
//!
//! SEND and WRITE packets go out under rocex's SR opcodes (`docs/wire.md`, "Selective
//! repeat"), each carrying its own placement: the receive message number and byte offset
//! (SRETH), and for a WRITE the message's RETH. The responder places them as they come
//! within a window of [`SPAN`] PSNs, keeps which PSNs it holds ([`RespWindow`]), moves the
//! expected PSN over the contiguous ones and completes messages only then, in order
//! (`qp/responder/selective.rs`). Its acknowledgements carry a bitmap of the PSNs held past
//! the cumulative one (SACK). The requester resends only the holes below the highest PSN
//! acknowledged, and on its timer the oldest unacknowledged packet; READ responses are
//! taken in any order and only the missing ranges asked for again ([`Sender`],
//! `qp/completer/selective.rs`). READ and atomic requests still execute in order: one
//! arriving past a hole is kept and executed when the hole fills.

mod sender;
mod window;

pub(crate) use sender::Sender;
pub(crate) use window::{Deferred, EndKind, MsgEnd, RespWindow, Slot};

/// PSNs past the expected one a responder holds, and the SACK bitmap's span.
pub(crate) const SPAN: u32 = rocex_wire::sack::SPAN;

/// Selective repeat on one QP.
#[derive(Debug)]
pub(crate) struct Sr {
    /// Whether the QP uses it (RC, and the peer speaks it).
    pub(crate) on: bool,
    /// Packets in flight at most (PSNs past the oldest unacknowledged one), 1..=[`SPAN`]:
    /// rxe's window by default, which at 1 KiB packets is the bandwidth-delay product of
    /// 10 Gb/s over a 100 us round trip (IRN sizes its cap to the BDP).
    pub(crate) window: u32,
    pub(crate) resp: RespWindow,
    pub(crate) send: Sender,
}

impl Default for Sr {
    fn default() -> Self {
        Self {
            on: false,
            window: crate::MAX_UNACKED_PSNS,
            resp: RespWindow::default(),
            send: Sender::default(),
        }
    }
}

impl Sr {
    /// Selective repeat as configured: on for an RC QP when `on`, with `window` packets in
    /// flight at most.
    pub(crate) fn new(on: bool, window: u32) -> Self {
        Self {
            on,
            window: window.clamp(1, SPAN),
            ..Self::default()
        }
    }

    /// Forgets the transfer state (the QP went back to RESET), keeping the setting.
    pub(crate) fn clear(&mut self) {
        self.resp = RespWindow::default();
        self.send = Sender::default();
    }
}
