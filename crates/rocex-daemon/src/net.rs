//! The daemon's packet I/O: the engine on a [`Backend`] (`--backend`) through
//! [`rocex_io::Driver`], the one turn every engine runs (fault injection, `--inject`, is
//! the driver's too), and what the daemon sees of it: the capture tap (`--pcap`), which
//! records the engine's side (every payload received and every payload the engine sent,
//! before injection, `docs/daemon.md`), and the sampled descriptor-to-wire times.

use std::io;

use rocex_io::{Backend, BackendOptions, Driver, RxMeta, SteerGroup};
use rocex_proto::{Config, Engine, Instant, Transmit};
use rocex_shm::control::DirectGrant;

use crate::config::{DirectSlots, Settings};
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

/// Low QPN bits that name a direct slot: 31 clients beside the daemon (slot 0), 19
/// random bits left in each QPN.
pub(crate) const SLOT_BITS: u8 = 5;

/// What a direct client is granted (`docs/abi.md` §6.6), but for its slot: the settings of
/// the daemon's engine `cfg` and of its port `opts`, which the client's engine and port
/// take so that their packets are the daemon's.
pub(crate) fn grant(cfg: &Config, opts: BackendOptions) -> DirectGrant {
    DirectGrant {
        slot: 0,
        slot_bits: SLOT_BITS,
        addr: cfg.local,
        mtu: cfg.port_mtu as u8,
        max_qp: cfg.max_qp as u32,
        max_cqe: cfg.max_cqe as u32,
        selective_repeat: cfg.selective_repeat,
        window: cfg.window,
        rxe_recovery: cfg.rxe_recovery,
        ecn: cfg.congestion.ecn,
        no_gso: opts.no_gso,
        no_gro: opts.no_gro,
        peers_are_rocex: opts.peers_are_rocex,
        tos: opts.tos(0),
    }
}

/// Opens the backend the settings name; with direct slots, on slot 0 of a steering group,
/// which comes with it. A group the host refuses (an address taken or missing aside)
/// falls back to the plain backend where the slots were only offered.
pub(crate) fn open(settings: &Settings) -> io::Result<(Box<dyn Backend>, Option<SteerGroup>)> {
    let plain = || rocex_io::open(settings.backend, settings.addr, options(settings));
    let steer = || SteerGroup::open(settings.addr, SLOT_BITS, options(settings));
    let group = match settings.direct {
        DirectSlots::Off => return Ok((plain()?, None)),
        DirectSlots::Required => steer()?,
        DirectSlots::Offered => match steer() {
            Ok(g) => g,
            // The address's own faults: the plain socket would meet them too.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
                ) =>
            {
                return Err(e);
            }
            Err(e) => {
                tracing::warn!("no direct slots: the steering group: {e}");
                return Ok((plain()?, None));
            }
        },
    };
    match group.no_coalescing() {
        None => tracing::info!("direct slots take coalesced runs (UDP GRO)"),
        Some(why) => tracing::info!("direct slots take datagrams one by one: {why}"),
    }
    Ok((Box::new(group.port()?), Some(group)))
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
