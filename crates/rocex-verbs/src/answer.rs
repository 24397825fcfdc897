//! Lingering on rocexd's rings: a CQ poll that takes the completion of a SEND or WRITE
//! waits a moment, yielding the core, until rocexd says the peer's next request message
//! has landed.
//!
//! A program that waits for its peer by spinning on its own memory (`ib_write_lat`, RPC
//! over RDMA WRITE) calls no verb while it waits. On a small machine it shares a core
//! with rocexd, which then either sleeps, and each packet's wake-up preempts the spinner
//! (tens of microseconds), or spins and yields, and loses the core to the spinner for
//! the rest of its slice (milliseconds; `crates/rocex-daemon/src/spin.rs`). A poll that
//! yields instead until the SQ ring's `responder_msn` (which rocexd stores as soon as a
//! request message has landed, `docs/abi.md` §1.2) moves past the value it had before
//! the program posted gives rocexd the core whenever it needs it, and returns with the
//! answer already in the program's memory (`docs/verbs.md`, "Lingering on the
//! daemon path").
//!
//! The window is the longest the direct engine uses: an answer that misses it leaves the
//! program spinning on its memory, where it could cost rocexd its slice. Waits in vain
//! back off as there (`patience.rs`), so a program whose peer answers slowly or not at
//! all yields away little of its time.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rocex_shm::SharedRegion;
use rocex_shm::layout::ring_off;
use rocex_verbs_types::{WcOpcode, WcStatus, WorkCompletion};

use crate::patience::{MAX_WINDOW, Patience};

/// The word of a QP's SQ ring header where rocexd stores its responder's MSN.
#[derive(Debug, Clone)]
pub(crate) struct MsnWord {
    map: Arc<SharedRegion>,
    /// The word's offset in `map`.
    off: usize,
}

impl MsnWord {
    /// The word of the SQ ring at `sq_off` of `map` (a ring `ring_in` has checked).
    pub(crate) fn new(map: Arc<SharedRegion>, sq_off: usize) -> Self {
        Self {
            map,
            off: sq_off + ring_off::RESPONDER_MSN,
        }
    }

    /// The MSN rocexd stored last (`Acquire`: what the messages wrote is visible).
    pub(crate) fn load(&self) -> Option<u32> {
        let w = self.map.view().word(self.off).ok()?;
        Some(w.load(Ordering::Acquire))
    }
}

/// The last post of requests: its QP, the QP's word, and the MSN stored before it. A
/// word that has moved on since says that the peer has answered.
#[derive(Debug)]
struct Asked {
    qpn: u32,
    word: MsnWord,
    at: u32,
}

/// What a context's polls know of its last post of requests, and whether waiting for
/// answers has been paying.
#[derive(Debug)]
pub(crate) struct Answers {
    asked: Option<Asked>,
    patience: Patience,
}

impl Default for Answers {
    fn default() -> Self {
        Self {
            asked: None,
            patience: Patience::new(MAX_WINDOW),
        }
    }
}

impl Answers {
    /// Requests were posted on `qpn`, whose word read `at` (`None`: unreadable) before
    /// they were.
    pub(crate) fn asked(&mut self, qpn: u32, word: &MsnWord, at: Option<u32>) {
        self.asked = at.map(|at| Asked {
            qpn,
            word: word.clone(),
            at,
        });
    }

    /// A poll took completions, the last `wc`: the wait for the peer's answer, when `wc`
    /// completed a SEND or WRITE on the QP posted on last, the peer has sent no request
    /// since, and waits in vain have not made this chance skip.
    pub(crate) fn begin(&mut self, wc: &WorkCompletion) -> Option<AnswerWait> {
        let a = self.asked.as_ref()?;
        let request = matches!(wc.opcode, WcOpcode::Send | WcOpcode::RdmaWrite);
        if wc.qp_num != a.qpn || !request || wc.status != WcStatus::Success {
            return None;
        }
        if a.word.load()? != a.at {
            return None;
        }
        let window = self.patience.chance()?;
        Some(AnswerWait {
            word: a.word.clone(),
            at: a.at,
            window,
        })
    }

    /// A wait is over.
    pub(crate) fn ended(&mut self, l: Lingered) {
        self.patience.ended(l.window, l.heard);
    }

    /// Its counters, as `Context::ring_lingers` reports them.
    pub(crate) fn counters(&self) -> [(&'static str, u64); 3] {
        self.patience.counters()
    }
}

/// A wait for the peer's answer, to run without the caller's locks
/// ([`Cq::answer_wait`](crate::Cq::answer_wait)).
#[derive(Debug)]
#[must_use = "a wait does nothing until it runs"]
pub struct AnswerWait {
    word: MsnWord,
    at: u32,
    window: Duration,
}

/// A wait that ran, for [`Cq::lingered`](crate::Cq::lingered).
#[derive(Debug)]
pub struct Lingered {
    window: Duration,
    /// How long after it began the answer came, if it did.
    heard: Option<Duration>,
}

impl AnswerWait {
    /// Yields the core until rocexd has stored another MSN or the window has passed.
    pub fn run(self) -> Lingered {
        let began = Instant::now();
        let heard = loop {
            std::thread::yield_now();
            let waited = began.elapsed();
            match self.word.load() {
                Some(m) if m != self.at => break Some(waited),
                Some(_) if waited < self.window => {}
                _ => break None,
            }
        };
        Lingered {
            window: self.window,
            heard,
        }
    }
}
