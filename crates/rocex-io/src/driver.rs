//! Runs an engine on any [`Backend`] with the wall clock: the one turn every program
//! that runs an engine takes (the in-process tools step it, `rocexd` puts its rings
//! around it through [`Hooks`]).

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use rocex_proto::{Engine, Instant, Transmit};

use crate::poll::wait_readable;
use crate::{Backend, BackendCounters, FaultCounters, Faults, Injected, RxMeta};

/// Receive batches handled per turn before the engine gets to send.
const RX_BATCHES_PER_TURN: usize = 4;

/// What a caller does around the engine's I/O in [`Driver::turn_with`]: its own work
/// before and after, and a look at every packet that passes (a capture). Each method does
/// nothing by default; `()` is the caller with nothing around the engine.
pub trait Hooks {
    /// Before the engine sends: hands it new work (posts). Returns whether there was any.
    fn post(&mut self, _engine: &mut Engine, _now: Instant) -> bool {
        false
    }
    /// After the turn's receive, before what it called for is sent: takes what the
    /// engine produced (completions, events). Returns whether there was any.
    fn collect(&mut self, _engine: &mut Engine, _now: Instant) -> bool {
        false
    }
    /// A datagram received, as the engine was handed it, once the engine has handled it:
    /// what it wrote to memory is there.
    fn received(&mut self, _engine: &Engine, _meta: &RxMeta, _payload: &[u8]) {}
    /// A packet the engine built, as it goes to the backend (before fault injection).
    fn sent(&mut self, _t: &Transmit, _payload: &[u8]) {}
    /// A flush carried packets: `handed` read before the send call, `returned` after it.
    fn flushed(&mut self, _engine: &mut Engine, _handed: Instant, _returned: Instant) {}
}

impl Hooks for () {}

/// An engine, its backend and its clock.
#[derive(Debug)]
pub struct Driver {
    /// The engine; verbs calls go straight to it.
    pub engine: Engine,
    port: Injected<Box<dyn Backend>>,
    epoch: std::time::Instant,
    buf: Vec<u8>,
    busy_poll: bool,
    /// Busy polling on a backend whose answers go alone.
    answer_alone: bool,
}

impl Driver {
    /// Runs `engine` on `port` (a [`crate::UdpPort`], or any other backend).
    pub fn new(engine: Engine, port: impl Backend + 'static) -> Self {
        Self::with_backend(engine, Box::new(port))
    }

    /// Runs `engine` on a backend chosen at run time ([`crate::open`]).
    pub fn with_backend(engine: Engine, backend: Box<dyn Backend>) -> Self {
        Self {
            engine,
            port: Injected::passthrough(backend),
            epoch: std::time::Instant::now(),
            buf: vec![0; crate::MAX_PACKET],
            busy_poll: false,
            answer_alone: false,
        }
    }

    /// Busy-polls instead of sleeping in poll(2) between turns: latency without a wake-up
    /// (tens of microseconds here), at the cost of a core. A busy-polling caller steps
    /// ([`Driver::step`]), so its answers go before the ACKs that wait with them
    /// ([`Engine::requests_before_acks`]).
    pub fn busy_poll(&mut self, on: bool) {
        self.busy_poll = on;
        self.answer_alone = on && self.port.answer_alone();
        self.engine.requests_before_acks(on);
    }

    /// Applies `faults` to every packet sent from now on.
    pub fn inject(&mut self, faults: Faults) {
        self.port.set_faults(faults);
    }

    /// What fault injection has done, if it is on (here or in the backend given).
    pub fn fault_counters(&self) -> Option<FaultCounters> {
        self.port.fault_counters()
    }

    /// What the backend has counted, the kernel's drops at its socket included (a system
    /// call: for reports; a turn asks [`rx_packets`](Self::rx_packets)).
    pub fn backend_counters(&self) -> BackendCounters {
        BackendCounters {
            rx_kernel_dropped: self.port.kernel_dropped(),
            ..self.port.counters()
        }
    }

    /// Datagrams the backend has received, without a system call.
    pub fn rx_packets(&self) -> u64 {
        self.port.counters().rx_packets
    }

    /// The backend.
    pub fn backend(&self) -> &dyn Backend {
        self.port.inner().as_ref()
    }

    /// The engine's notion of now: time since the driver started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// The readable descriptor of the backend, for a caller that sleeps in its own poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.port.fd()
    }

    /// How long a caller may sleep, at most `max`: until the engine's next timer or the
    /// next delayed packet of fault injection.
    pub fn timeout(&self, max: Duration) -> Duration {
        let now = self.now();
        let mut t = self.engine.poll_timeout().map_or(max, |t| t.since(now));
        if let Some(due) = self.port.next_due() {
            t = t.min(due.since(now));
        }
        max.min(t)
    }

    /// Does everything that is ready: sends what the engine has, receives waiting
    /// datagrams, runs due timers, sends what they called for. Returns whether anything
    /// happened.
    pub fn turn(&mut self) -> io::Result<bool> {
        self.turn_with(&mut ())
    }

    /// [`Driver::turn`] with the caller's work around it: `hooks.post` first, so that what
    /// it posted leaves before the turn receives, and `hooks.collect` once the turn has
    /// received, before what that calls for leaves: a send call can take longer than the
    /// rest of the turn (on a veth the peer's receive runs inside it), and what the
    /// packets completed or wrote is the application's news. One clock reading serves
    /// the turn: the engine's timers are milliseconds, a turn microseconds. An I/O error
    /// does not end the turn (a lost packet is the transport's to recover): every step
    /// runs and the first error is returned.
    pub fn turn_with(&mut self, hooks: &mut impl Hooks) -> io::Result<bool> {
        let now = self.now();
        let mut busy = hooks.post(&mut self.engine, now);
        let sent = self.transmit(now, hooks);
        let received = self.receive(now, hooks);
        busy |= hooks.collect(&mut self.engine, now);
        let answered = self.transmit(now, hooks);
        let mut first_error = None;
        for r in [sent, received, answered] {
            match r {
                Ok(b) => busy |= b,
                Err(e) => {
                    busy = true;
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(busy), Err)
    }

    /// One step of a busy-polling application: sends what is waiting, then receives and
    /// runs due timers. What the received packets call for (ACKs) leaves at the next step,
    /// after the application has looked at its completions and memory: an answer it posts
    /// meanwhile goes out first, in the same batch. Returns whether anything happened.
    pub fn step(&mut self) -> io::Result<bool> {
        let now = self.now();
        let sent = self.transmit(now, &mut ())?;
        Ok(self.receive(now, &mut ())? | sent)
    }

    /// Sends what the engine has and does nothing else: for a caller that has just posted
    /// in its own thread (rocex-verbs' direct contexts), whose receives and timers wait
    /// for its next poll or its progress thread. Returns whether anything was sent.
    pub fn send_now(&mut self) -> io::Result<bool> {
        let now = self.now();
        self.transmit(now, &mut ())
    }

    /// Receives waiting datagrams and runs the timers due at `now`; the timers run even
    /// when a receive failed (an ICMP error from a peer that is gone surfaces here).
    fn receive(&mut self, now: Instant, hooks: &mut impl Hooks) -> io::Result<bool> {
        let mut busy = false;
        let mut failed = None;
        // A few batches at most: the engine's ACKs must not wait behind a flood. A busy
        // poller takes one: it is back within a microsecond, and what it received may be
        // what its application waits for (one more empty receive is a system call).
        let batches = if self.busy_poll {
            1
        } else {
            RX_BATCHES_PER_TURN
        };
        for _ in 0..batches {
            let engine = &mut self.engine;
            let got = self.port.recv(&mut |meta, payload| {
                engine.handle_packet_ecn(now, meta.src, meta.dst, payload, meta.icrc, meta.ecn());
                hooks.received(engine, &meta, payload);
            });
            match got {
                Ok(0) => break,
                Ok(_) => busy = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if self.engine.poll_timeout().is_some_and(|t| t <= now) {
            busy = true;
            self.engine.handle_timeout(now);
        }
        failed.map_or(Ok(busy), Err)
    }

    /// Sends everything the engine has to send, in one flush; a busy poller's first
    /// packet alone first where the backend says it pays ([`Backend::answer_alone`]). A
    /// packet the backend refuses is lost (the transport retransmits it); the others go,
    /// and the first error is returned.
    fn transmit(&mut self, now: Instant, hooks: &mut impl Hooks) -> io::Result<bool> {
        // Fault injection runs on the engine's time.
        self.port.tick(now);
        let mut busy = false;
        let mut failed = None;
        loop {
            // Built in the backend's queue where it lends room: written once.
            let sent = match self.port.room() {
                Some(room) => {
                    let Some(t) = self.engine.poll_transmit(now, room) else {
                        break;
                    };
                    hooks.sent(&t, &room[..t.len]);
                    self.port.commit(t.dest, t.src_port, t.tclass, t.len)
                }
                None => {
                    let Some(t) = self.engine.poll_transmit(now, &mut self.buf) else {
                        break;
                    };
                    let payload = &self.buf[..t.len];
                    hooks.sent(&t, payload);
                    self.port.send(t.dest, t.src_port, t.tclass, payload)
                }
            };
            let flushed = if !busy && self.answer_alone {
                self.port.flush()
            } else {
                Ok(())
            };
            if let Err(e) = sent.and(flushed) {
                failed.get_or_insert(e);
            }
            busy = true;
        }
        // Always: fault injection releases its delayed packets here.
        let handed = busy.then(|| self.now());
        let flushed = self.port.flush();
        if let Some(handed) = handed {
            let returned = self.now();
            hooks.flushed(&mut self.engine, handed, returned);
        }
        if let Err(e) = flushed {
            failed.get_or_insert(e);
        }
        failed.map_or(Ok(busy), Err)
    }

    /// Turns; if nothing happened, waits for a datagram, the next timer, or `max`,
    /// whichever comes first, and turns again. Callers check their CQs after each call.
    /// A busy-polling driver only steps ([`Driver::step`]).
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        if self.busy_poll {
            return self.step().map(drop);
        }
        if self.turn()? {
            return Ok(());
        }
        let timeout = self.timeout(max);
        if !timeout.is_zero() {
            wait_readable(self.port.fd(), timeout)?;
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
