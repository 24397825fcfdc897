//! What a selective-repeat responder holds past its expected PSN: a slot per PSN, each
//! missing, placed, or the end of a message waiting to complete in order.

use std::collections::VecDeque;

use rocex_wire::{AtomicEthRepr, BthRepr, FethRepr, NakCode, PacketRepr, Psn, RethRepr, SackRepr};

use crate::verbs::WcStatus;

/// One PSN at or past the expected one.
#[derive(Debug, Clone, Default)]
pub(crate) enum Slot {
    /// Not received.
    #[default]
    Missing,
    /// Placed.
    Got,
    /// Placed, and the last packet of a message: it completes when the expected PSN
    /// passes it.
    End(MsgEnd),
    /// The first PSN of a READ answered past a hole of READs (its other PSNs are `Got`):
    /// the MSN counts it when the expected PSN passes it.
    Answered,
    /// A READ, atomic, ATOMIC_WRITE or FLUSH that came past a hole: executed, in order,
    /// when the expected PSN reaches it.
    Deferred(Box<Deferred>),
    /// Refused out of order: the NAK goes out, and the QP to ERROR, when the expected PSN
    /// reaches it (a NAK's PSN acknowledges every PSN before it).
    Refused { nak: NakCode, status: WcStatus },
}

/// A request kept to execute in order: its headers and (ATOMIC_WRITE) its 8 bytes.
#[derive(Debug, Clone)]
pub(crate) struct Deferred {
    bth: BthRepr,
    feth: Option<FethRepr>,
    reth: Option<RethRepr>,
    atomic_eth: Option<AtomicEthRepr>,
    payload: [u8; 8],
    len: usize,
}

impl Deferred {
    /// Keeps `pkt`, or `None` when its payload is longer than any such request's.
    pub(crate) fn keep(pkt: &PacketRepr<'_>) -> Option<Box<Self>> {
        let mut payload = [0; 8];
        payload
            .get_mut(..pkt.payload.len())?
            .copy_from_slice(pkt.payload);
        Some(Box::new(Self {
            bth: pkt.bth,
            feth: pkt.feth,
            reth: pkt.reth,
            atomic_eth: pkt.atomic_eth,
            payload,
            len: pkt.payload.len(),
        }))
    }

    /// The request as it came.
    pub(crate) fn packet(&self) -> PacketRepr<'_> {
        let mut p = PacketRepr::new(self.bth);
        p.feth = self.feth;
        p.reth = self.reth;
        p.atomic_eth = self.atomic_eth;
        p.payload = &self.payload[..self.len];
        p
    }
}

/// What completing a message takes.
#[derive(Debug, Clone)]
pub(crate) struct MsgEnd {
    pub(crate) kind: EndKind,
    /// The message's bytes.
    pub(crate) len: u64,
    pub(crate) imm: Option<u32>,
    /// An rkey to invalidate (SEND with invalidate).
    pub(crate) inv: Option<u32>,
    pub(crate) solicited: bool,
}

/// Which completion a message ends in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndKind {
    /// A receive completion.
    Send,
    /// None (the MSN moves on).
    Write,
    /// A receive completion with the immediate data.
    WriteImm,
}

/// Slots from the expected PSN on: at most `SPAN` of them, whatever a peer sends.
#[derive(Debug, Default)]
pub(crate) struct RespWindow {
    slots: VecDeque<Slot>,
    /// Receive-consuming messages completed: the message number of the receive WQE at
    /// the head of the receive queue.
    pub(crate) recv_base: u32,
}

impl RespWindow {
    /// The slot `d` PSNs past the expected one.
    pub(crate) fn get(&self, d: u32) -> &Slot {
        const MISSING: Slot = Slot::Missing;
        self.slots.get(d as usize).unwrap_or(&MISSING)
    }

    /// Fills slot `d` (below `SPAN`, checked by the caller).
    pub(crate) fn set(&mut self, d: u32, slot: Slot) {
        let d = d as usize;
        if self.slots.len() <= d {
            self.slots.resize(d + 1, Slot::Missing);
        }
        self.slots[d] = slot;
    }

    /// Takes the slot of the expected PSN, if it is no longer missing.
    pub(crate) fn pop_ready(&mut self) -> Option<Slot> {
        match self.slots.front() {
            None | Some(Slot::Missing) => None,
            Some(_) => self.slots.pop_front(),
        }
    }

    /// The expected PSN moved `n` on by itself (a READ or atomic executed in order).
    pub(crate) fn skip(&mut self, n: u32) {
        let n = (n as usize).min(self.slots.len());
        self.slots.drain(..n);
    }

    /// Whether anything past the expected PSN is held: acknowledgements then carry a SACK.
    pub(crate) fn holds_beyond(&self) -> bool {
        self.slots.iter().any(|s| !matches!(s, Slot::Missing))
    }

    /// The bitmap for a cumulative acknowledgement of `cumulative`, the expected PSN being
    /// `expected` (at or past `cumulative + 1`: PSNs between are held).
    pub(crate) fn sack(&self, cumulative: Psn, expected: Psn) -> SackRepr {
        let mut m = SackRepr::default();
        let below = expected.diff(cumulative).max(1) as u32 - 1;
        for i in 0..below.min(super::SPAN) {
            m.set(i);
        }
        for (j, s) in self.slots.iter().enumerate() {
            if !matches!(s, Slot::Missing | Slot::Refused { .. }) {
                m.set(below + j as u32);
            }
        }
        m
    }

    /// Forgets everything (the QP went to ERROR).
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }
}
