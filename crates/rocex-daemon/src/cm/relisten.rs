//! REQs for a port whose listener was just given up, held a moment for the next one.
//!
//! A program that accepts a connection on one listening id, destroys it and listens on the
//! same port again (perftest's `-R`: its control connection, then its test connections)
//! leaves a moment in which nothing listens. A REQ in it gets REJ reason 8, from the
//! kernel's CM as from rocexd, and perftest 4.5's client crashes on its retry. A fast
//! client meets that moment: a direct context's second REQ came 21 ms after the first RTU,
//! before a guest's perftest listened again. Such a REQ is held for up to [`GRACE`] and
//! handed to the port's next listener, or rejected then.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use rocex_cm::{ReqRepr, cma};
use rocex_proto::Instant;

/// How long after a `CmUnlisten` a REQ for the port waits for a listener: inside the
/// peer's REQ retry timeout (about 4.3 s, `conn::CM_RESPONSE_TIMEOUT`), so the peer never
/// sees the wait, and long enough for a program on a loaded 2-core machine to listen again.
pub(super) const GRACE: Duration = Duration::from_secs(3);

/// A REQ waiting for its port's next listener.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) until: Instant,
    pub(super) src: IpAddr,
    pub(super) tid: u64,
    pub(super) req: Box<ReqRepr>,
    pub(super) port: u16,
    pub(super) hdr: cma::Repr,
}

/// TCP-space ports given up lately, and the REQs held for them.
#[derive(Debug, Default)]
pub(super) struct Relisten {
    given_up: BTreeMap<u16, Instant>,
    held: Vec<Held>,
}

impl Relisten {
    /// `port`'s listener was given up at `now`.
    pub(super) fn gave_up(&mut self, port: u16, now: Instant) {
        self.given_up.insert(port, now);
    }

    /// Holds `h` when its port was given up less than [`GRACE`] ago; true when it is held
    /// (a repeat of a REQ held already is dropped: the first is answered).
    pub(super) fn hold(&mut self, now: Instant, h: Held) -> bool {
        self.given_up.retain(|_, at| now < *at + GRACE);
        if !self.given_up.contains_key(&h.port) {
            return false;
        }
        let repeat = |o: &Held| o.src == h.src && o.req.local_comm_id == h.req.local_comm_id;
        if !self.held.iter().any(repeat) {
            self.held.push(h);
        }
        true
    }

    /// The REQs held for `port`, which has a listener again.
    pub(super) fn take(&mut self, port: u16) -> Vec<Held> {
        let (mine, rest) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.port == port);
        self.held = rest;
        mine
    }

    /// The REQs whose wait is over at `now`, for their REJ.
    pub(super) fn expired(&mut self, now: Instant) -> Vec<Held> {
        if self.held.iter().all(|h| now < h.until) {
            return Vec::new();
        }
        let (due, rest) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.until <= now);
        self.held = rest;
        due
    }
}
