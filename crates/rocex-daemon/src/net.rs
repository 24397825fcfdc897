//! The daemon's packet I/O: the engine on a [`Backend`] (`--backend`), with fault
//! injection wrapped around it (`--inject`) and the capture tap (`--pcap`) recording the
//! engine's side of it: every payload received and every payload the engine sent, before
//! injection (`docs/daemon.md`).

use std::io;
use std::os::fd::BorrowedFd;

use rocex_io::{Backend, BackendCounters, BackendOptions, FaultCounters, Injected};
use rocex_proto::{Engine, Instant};

use crate::config::Settings;
use crate::pcap::Tap;

/// Receive batches per turn before the engine gets to send (its ACKs must not wait).
const RX_BATCHES_PER_TURN: usize = 4;

/// The backend options the settings give.
pub(crate) fn options(settings: &Settings) -> BackendOptions {
    BackendOptions {
        no_gso: !settings.gso,
        no_gro: !settings.gso,
        peers_are_rocex: settings.peers_are_rocex,
        dscp: settings.dscp,
        ecn: if settings.ecn {
            rocex_wire::ecn::Ecn::Ect0.bits()
        } else {
            0
        },
        ..BackendOptions::default()
    }
}

/// Opens the backend the settings name, wrapped in fault injection when asked.
pub(crate) fn open(settings: &Settings) -> io::Result<Box<dyn Backend>> {
    let backend = rocex_io::open(settings.backend, settings.addr, options(settings))?;
    Ok(match settings.inject {
        Some(f) => Box::new(Injected::new(backend, f)),
        None => backend,
    })
}

/// The backend and the tap.
pub(crate) struct Net {
    backend: Box<dyn Backend>,
    /// What the backend was opened with: the TOS a packet leaves with.
    opts: BackendOptions,
    tap: Option<Tap>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("backend", &self.backend)
            .field("tap", &self.tap.is_some())
            .finish()
    }
}

impl Net {
    pub(crate) fn new(backend: Box<dyn Backend>, opts: BackendOptions, tap: Option<Tap>) -> Self {
        Self {
            backend,
            opts,
            tap,
            buf: vec![0; rocex_io::MAX_PACKET],
        }
    }

    /// Receives waiting datagrams and runs the timers due at `now`. Returns whether
    /// anything happened. I/O errors are logged, not returned: a lost packet is the
    /// transport's to recover.
    pub(crate) fn receive(&mut self, engine: &mut Engine, now: Instant) -> bool {
        let mut busy = false;
        for _ in 0..RX_BATCHES_PER_TURN {
            let tap = &mut self.tap;
            let got = self.backend.recv(&mut |meta, payload| {
                if let Some(t) = tap {
                    t.record(
                        (meta.src.ip(), meta.src.port()),
                        meta.dst,
                        false,
                        meta.tos,
                        payload,
                    );
                }
                engine.handle_packet_ecn(now, meta.src, meta.dst, payload, meta.icrc, meta.ecn());
            });
            match got {
                Ok(0) => break,
                Ok(_) => busy = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ICMP errors (a peer that is gone) may surface here; the transport's
                // timers deal with the loss.
                Err(e) => {
                    tracing::debug!("receive: {e}");
                    break;
                }
            }
        }
        if engine.poll_timeout().is_some_and(|t| t <= now) {
            busy = true;
            engine.handle_timeout(now);
        }
        busy
    }

    /// Hands the backend every packet the engine has to send, without sending yet
    /// ([`Net::flush`] does). Returns whether there was any.
    pub(crate) fn build(&mut self, engine: &mut Engine, now: Instant) -> bool {
        self.backend.tick(now);
        let mut any = false;
        let local = self.backend.local();
        loop {
            // Built in the backend's queue where it lends room: written once.
            let (lent, buf) = match self.backend.room() {
                Some(room) => (true, room),
                None => (false, &mut self.buf[..]),
            };
            let Some(t) = engine.poll_transmit(now, buf) else {
                break;
            };
            any = true;
            if let Some(tap) = &mut self.tap {
                let tos = self.opts.tos(t.tclass);
                tap.record((local, t.src_port), t.dest, true, tos, &buf[..t.len]);
            }
            let sent = if lent {
                self.backend.commit(t.dest, t.src_port, t.tclass, t.len)
            } else {
                self.backend
                    .send(t.dest, t.src_port, t.tclass, &self.buf[..t.len])
            };
            if let Err(e) = sent {
                tracing::debug!("send to {}: {e}", t.dest);
            }
        }
        any
    }

    /// Sends what [`Net::build`] handed the backend.
    pub(crate) fn flush(&mut self) {
        if let Err(e) = self.backend.flush() {
            tracing::debug!("send: {e}");
        }
    }

    /// Readable when datagrams wait.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.backend.fd()
    }

    /// When a delayed packet (fault injection) is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.backend.next_due()
    }

    /// What the backend has counted.
    pub(crate) fn counters(&self) -> BackendCounters {
        self.backend.counters()
    }

    /// What fault injection has done, when it is on.
    pub(crate) fn fault_counters(&self) -> Option<FaultCounters> {
        self.backend.fault_counters()
    }

    /// Writes buffered frames to the capture file.
    pub(crate) fn flush_tap(&mut self) {
        if let Some(t) = &mut self.tap {
            t.flush();
        }
    }

    /// Datagrams the tap could not record.
    pub(crate) fn tap_skipped(&self) -> u64 {
        self.tap.as_ref().map_or(0, |t| t.skipped)
    }
}
