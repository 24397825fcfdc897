//! The daemon's packet I/O: the engine on a [`Backend`] (`--backend`) through
//! [`rocex_io::Driver`], the one turn every engine runs (fault injection, `--inject`, is
//! the driver's too), and what the daemon sees of it: the capture tap (`--pcap`), which
//! records the engine's side (every payload received and every payload the engine sent,
//! before injection, `docs/daemon.md`), and the sampled descriptor-to-wire times.

use std::io;

use rocex_io::{Backend, BackendOptions, Driver, RxMeta};
use rocex_proto::{Engine, Instant, Transmit};

use crate::config::Settings;
use crate::pcap::Tap;
use crate::wire_latency::WireLatency;

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

/// Opens the backend the settings name.
pub(crate) fn open(settings: &Settings) -> io::Result<Box<dyn Backend>> {
    rocex_io::open(settings.backend, settings.addr, options(settings))
}

/// The engine on `backend`, with the faults the settings ask for.
pub(crate) fn driver(engine: Engine, backend: Box<dyn Backend>, settings: &Settings) -> Driver {
    let mut d = Driver::with_backend(engine, backend);
    if let Some(f) = settings.inject {
        d.inject(f);
    }
    d
}

/// What the daemon records of the packets the driver moves.
pub(crate) struct Watch {
    /// What the backend was opened with: the TOS a packet leaves with.
    opts: BackendOptions,
    /// The backend's address: the source of what the engine sends.
    local: std::net::IpAddr,
    tap: Option<Tap>,
    /// Sampled send work requests' time from the pass that read their descriptor to the
    /// send call that carried their first packet (the frame handed to the kernel)...
    pub(crate) wire: WireLatency,
    /// ...and to that call's return (on a veth, after the peer's stack took the frame).
    pub(crate) wire_returned: WireLatency,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("tap", &self.tap.is_some())
            .field("wire_samples", &self.wire.samples())
            .finish()
    }
}

impl Watch {
    pub(crate) fn new(opts: BackendOptions, local: std::net::IpAddr, tap: Option<Tap>) -> Self {
        Self {
            opts,
            local,
            tap,
            wire: WireLatency::default(),
            wire_returned: WireLatency::default(),
        }
    }

    /// Records a received datagram in the capture.
    pub(crate) fn received(&mut self, meta: &RxMeta, payload: &[u8]) {
        if let Some(t) = &mut self.tap {
            let src = (meta.src.ip(), meta.src.port());
            t.record(src, meta.dst, false, meta.tos, payload);
        }
    }

    /// Records a packet the engine sent in the capture, with the TOS it leaves with.
    pub(crate) fn sent(&mut self, t: &Transmit, payload: &[u8]) {
        if let Some(tap) = &mut self.tap {
            let tos = self.opts.tos(t.tclass);
            tap.record((self.local, t.src_port), t.dest, true, tos, payload);
        }
    }

    /// Times the sampled work requests whose first packet a flush carried, to the send
    /// call and to its return.
    pub(crate) fn flushed(&mut self, engine: &mut Engine, handed: Instant, returned: Instant) {
        for posted in engine.take_send_samples() {
            self.wire.record(handed.since(posted).as_nanos() as u64);
            self.wire_returned
                .record(returned.since(posted).as_nanos() as u64);
        }
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
