//! Runs an engine on a UDP port with the wall clock.

use std::io;
use std::time::Duration;

use rocex_proto::{Engine, IcrcStatus, Instant};

use crate::{FaultCounters, Faults, Injector, UdpPort};

/// An engine, its port and its clock.
#[derive(Debug)]
pub struct Driver {
    /// The engine; verbs calls go straight to it.
    pub engine: Engine,
    port: UdpPort,
    epoch: std::time::Instant,
    buf: Vec<u8>,
    faults: Option<Injector>,
    out: Vec<(std::net::IpAddr, Vec<u8>)>,
    peers_are_rocex: bool,
    busy_poll: bool,
}

impl Driver {
    /// Runs `engine` on `port`.
    pub fn new(engine: Engine, port: UdpPort) -> Self {
        Self {
            engine,
            port,
            epoch: std::time::Instant::now(),
            buf: vec![0; 65536],
            faults: None,
            out: Vec::new(),
            peers_are_rocex: false,
            busy_poll: false,
        }
    }

    /// Busy-polls instead of sleeping in poll(2) between turns: latency without a wake-up
    /// (tens of microseconds here), at the cost of a core.
    pub fn busy_poll(&mut self, on: bool) {
        self.busy_poll = on;
    }

    /// Declares that every peer is rocex, whose packets carry IPv4 identification 0, so
    /// that every received ICRC can be checked and a bad one dropped. Off by default: a
    /// UDP socket cannot check packets from other senders (kernel rxe increments the ID).
    pub fn peers_are_rocex(&mut self, on: bool) {
        self.peers_are_rocex = on;
    }

    /// Applies `faults` to every packet sent from now on.
    pub fn inject(&mut self, faults: Faults) {
        self.faults = Some(Injector::new(faults));
    }

    /// What fault injection has done, if it is on.
    pub fn fault_counters(&self) -> Option<FaultCounters> {
        self.faults.as_ref().map(|f| f.counters)
    }

    /// The engine's notion of now: time since the driver started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Does everything that is ready: receives waiting datagrams, runs due timers, sends
    /// what the engine has to send. Returns whether anything happened.
    pub fn turn(&mut self) -> io::Result<bool> {
        let local = self.port.local();
        let mut busy = false;
        while let Some((n, src)) = self.port.try_recv(&mut self.buf)? {
            busy = true;
            let now = self.now();
            let status = match Engine::check_icrc_from_rocex(src, local, &self.buf[..n]) {
                IcrcStatus::Invalid if !self.peers_are_rocex => IcrcStatus::Unchecked,
                s => s,
            };
            self.engine
                .handle_packet(now, src, local, &self.buf[..n], status);
        }
        let now = self.now();
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            busy = true;
            self.engine.handle_timeout(now);
        }
        while let Some(t) = self.engine.poll_transmit(now, &mut self.buf) {
            busy = true;
            match &mut self.faults {
                None => self.port.send(t.dest, &self.buf[..t.len])?,
                Some(f) => f.apply(
                    std::time::Instant::now(),
                    t.dest,
                    &self.buf[..t.len],
                    &mut self.out,
                ),
            }
        }
        if let Some(f) = &mut self.faults {
            let wall = std::time::Instant::now();
            if !busy {
                f.flush_held(wall, &mut self.out);
            }
            f.release(wall, &mut self.out);
            for (dest, p) in self.out.drain(..) {
                self.port.send(dest, &p)?;
            }
        }
        Ok(busy)
    }

    /// Turns; if nothing happened, waits for a datagram, the next timer, or `max`,
    /// whichever comes first, and turns again. Callers check their CQs after each call.
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        if self.turn()? || self.busy_poll {
            return Ok(());
        }
        let now = self.now();
        let mut until_timer = self.engine.poll_timeout().map_or(max, |t| t.since(now));
        if let Some(due) = self.faults.as_ref().and_then(Injector::next_due) {
            until_timer = until_timer.min(due.saturating_duration_since(std::time::Instant::now()));
        }
        let timeout = max.min(until_timer);
        if !timeout.is_zero() {
            self.port.wait_readable(timeout)?;
        }
        self.turn().map(|_| ())
    }

    /// Turns until `done` returns a value or `limit` passes.
    pub fn run_until<T>(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut Engine) -> Option<T>,
    ) -> io::Result<Option<T>> {
        let end = std::time::Instant::now() + limit;
        loop {
            if let Some(v) = done(&mut self.engine) {
                return Ok(Some(v));
            }
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.wait(left.min(Duration::from_millis(10)))?;
        }
    }

    /// Keeps answering the peer (ACKs, retransmitted requests) for `d`: what a process
    /// should do before it exits, so that the peer's last packets are acknowledged.
    pub fn linger(&mut self, d: Duration) -> io::Result<()> {
        self.run_until(d, |_| None::<()>).map(|_| ())
    }
}
