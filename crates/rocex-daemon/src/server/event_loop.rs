//! The daemon's loop: [`rocex_io::Driver`]'s turn with the rings around it, and the sleep
//! between busy stretches.
//!
//! Each pass accepts clients and serves control requests (not every pass, see
//! [`CONTROL_EVERY`]), then takes the driver's turn with [`Rings`] as its hooks: the
//! descriptors the clients posted go into the engine, what the engine has leaves, received
//! packets and timers are handled, what they called for leaves, and completions go to the
//! CQ rings. While a pass finds work it passes again at once (busy polling: a posted
//! request costs the client no system call); an empty pass polls again only inside the
//! adaptive window of `spin.rs`, yielding the core each time, and otherwise arms every
//! ring's doorbell (`need_wakeup`) and sleeps in poll(2) on the backend, the listener, the
//! client sockets and the doorbell eventfds, until the next engine timer.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rocex_io::{Hooks, RxMeta};
use rocex_proto::{Engine, Instant, Transmit};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::{Direct, Server};
use crate::client::{Client, Gone};
use crate::cm::Cm;
use crate::net::Watch;
use crate::pump::{self, PumpStats};

/// One pass in this many reads the clients' control sockets while the daemon spins, and
/// one in [`ACCEPT_EVERY`] accepts new clients; the first pass after a sleep does both.
const CONTROL_EVERY: u32 = 16;
const ACCEPT_EVERY: u32 = 256;

/// The daemon's work around the engine's I/O in one turn: the clients' rings and the CM.
struct Rings<'s> {
    clients: &'s mut BTreeMap<u64, Client>,
    stats: &'s mut PumpStats,
    cm: &'s mut Cm,
    watch: &'s mut Watch,
    direct: Option<&'s mut Direct>,
}

impl Hooks for Rings<'_> {
    /// Moves what the clients posted into the engine.
    fn post(&mut self, engine: &mut Engine, now: Instant) -> bool {
        let mut busy = false;
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                busy |= qp.drain(engine, now, &mut c.cqs, self.stats);
            }
        }
        busy
    }

    /// Runs the CM and moves completions into the CQ rings.
    fn collect(&mut self, engine: &mut Engine, now: Instant) -> bool {
        let mut busy = self.cm.turn(engine, now);
        for c in self.clients.values_mut() {
            for (&cq, p) in c.cqs.iter_mut() {
                busy |= p.fill(engine, cq);
            }
        }
        busy
    }

    /// Records the packet; after a request that ended a message, stores the QP's
    /// responder MSN in its SQ ring at once, before the client can have seen what the
    /// message wrote and posted again (docs/verbs.md, "Lingering on the daemon path").
    fn received(&mut self, engine: &Engine, meta: &RxMeta, payload: &[u8]) {
        self.watch.received(meta, payload);
        let Ok(bth) = rocex_wire::bth::Header::new_checked(payload) else {
            return;
        };
        let qpn = bth.dest_qp();
        if let Some(d) = &mut self.direct {
            d.received(qpn);
        }
        let ended = bth
            .opcode()
            .info()
            .is_some_and(|i| i.position.ends() && !i.operation.is_response());
        if ended && let Some(qp) = self.clients.values().find_map(|c| c.qps.get(&qpn)) {
            qp.publish_msn(engine);
        }
    }

    fn sent(&mut self, t: &Transmit, payload: &[u8]) {
        self.watch.sent(t, payload);
    }

    fn flushed(&mut self, engine: &mut Engine, handed: Instant, returned: Instant) {
        self.watch.flushed(engine, handed, returned);
    }
}

impl Server {
    /// Runs until `stop` is set, then shuts down cleanly.
    pub(crate) fn run(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            if self.turn() {
                self.spin.busy();
                continue;
            }
            if self.spin.again() {
                continue;
            }
            let asleep = std::time::Instant::now();
            self.sleep()?;
            self.spin.slept(asleep.elapsed());
            self.turns = 0;
        }
        self.shutdown();
        Ok(())
    }

    /// One pass over everything; true when anything happened. The control sockets are
    /// read every [`CONTROL_EVERY`]th pass only: each read is a system call that almost
    /// always finds nothing (an `accept` costs more than a whole pass), and requests there
    /// are not latency-bound.
    fn turn(&mut self) -> bool {
        let mut busy = false;
        if self.turns % ACCEPT_EVERY == 0 {
            busy |= self.accept();
        }
        if self.turns % CONTROL_EVERY == 0 {
            busy |= self.serve_clients();
        }
        self.turns = self.turns.wrapping_add(1);
        let mut rings = Rings {
            clients: &mut self.clients,
            stats: &mut self.stats.pump,
            cm: &mut self.cm,
            watch: &mut self.watch,
            direct: self.direct.as_mut(),
        };
        let r = self.driver.turn_with(&mut rings);
        if let Some(d) = &mut self.direct {
            d.repair();
        }
        match r {
            Ok(b) => busy | b,
            // ICMP errors (a peer that is gone) surface here; the transport's timers deal
            // with the loss.
            Err(e) => {
                tracing::debug!("packet I/O: {e}");
                true
            }
        }
    }

    /// Arms every doorbell and sleeps in poll(2) until a datagram, a client, a doorbell or
    /// the next timer.
    fn sleep(&mut self) -> io::Result<()> {
        let engine = &self.driver.engine;
        let mut ready = false;
        let mut stalled = false;
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                ready |= qp.arm();
                stalled |= qp.stalled();
            }
            for (&cq, p) in &c.cqs {
                stalled |= !p.pending.is_empty() || engine.cq_len(cq) > 0;
            }
        }
        if !ready {
            let mut timeout = self.driver.timeout(Duration::from_millis(100));
            if stalled {
                timeout = timeout.min(Duration::from_millis(1));
            }
            self.watch.flush_tap();
            let net_fd = self.driver.fd();
            let mut fds = vec![
                PollFd::new(&net_fd, PollFlags::IN),
                PollFd::new(&self.listener, PollFlags::IN),
            ];
            for c in self.clients.values() {
                fds.push(PollFd::new(c.sock(), PollFlags::IN));
                for qp in c.qps.values() {
                    fds.push(PollFd::new(&qp.doorbell, PollFlags::IN));
                }
            }
            let ts = Timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            match poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for c in self.clients.values_mut() {
            for qp in c.qps.values_mut() {
                qp.disarm();
            }
        }
        Ok(())
    }

    /// Every QP to error, the flush completions delivered to the CQ rings, the capture
    /// flushed; clients see their connection close when the server is dropped.
    fn shutdown(&mut self) {
        tracing::info!(clients = self.clients.len(), "shutting down");
        for c in self.clients.values() {
            for &qpn in c.qps.keys() {
                pump::to_error(&mut self.driver.engine, qpn);
            }
        }
        for _ in 0..16 {
            self.turn();
        }
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            self.disconnect(id, &Gone::Closed);
        }
        self.watch.flush_tap();
        let skipped = self.watch.tap_skipped();
        if skipped > 0 {
            tracing::warn!(skipped, "datagrams not written to the capture");
        }
        tracing::info!("stopped; {}", self.summary());
    }
}
