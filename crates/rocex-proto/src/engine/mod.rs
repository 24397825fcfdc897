//! The device: tables of PDs, MRs, CQs and QPs, and the sans-IO interface around them.
//!
//! The engine's methods live by what they do: `objects` (PDs, MRs, windows, CQs, QPs),
//! `post` (posting work requests and the checks `ibv_post_*` make), `packet` (receiving
//! and transmitting), `schedule` (which QP sends next, timers, and the context a QP runs
//! in), `sampler` (post-to-wire latency samples), `replay` (objects under chosen numbers
//! and keys, for reproducing captures) and `congestion` (a QP's traffic class and rate).

mod congestion;
mod error;
mod objects;
mod packet;
mod post;
mod replay;
mod sampler;
mod schedule;

pub use error::VerbsError;
pub(crate) use packet::Outgoing;
use sampler::SendSampler;
pub(crate) use schedule::Ctx;

use std::collections::{BTreeSet, VecDeque};
use std::net::IpAddr;

// QPNs and CQ handles are numbers the engine chose at random, which no peer can make
// collide: a fast hash will do (SipHash was a tenth of the per-packet cost).
use foldhash::{HashMap, HashMapExt};
use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rocex_mem::{MemTable, PdId};
use rocex_wire::{Psn, icrc};

use crate::counters::{Counters, QpCounters};
use crate::cq::Cq;
use crate::qp::{Congestion, Qp};
use crate::time::Instant;
use crate::verbs::{Mtu, QpCap, QpState, QpType};

/// The General Services Interface's QP number: the UD QP of the CM's MADs.
pub const GSI_QPN: u32 = 1;

/// The lowest QP number of an ordinary QP: those below are rxe's special QPs.
const FIRST_QPN: u32 = 0x10;

/// Engine configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Seed of the CSPRNG behind QPNs, keys and initial PSNs.
    pub rng_seed: [u8; 32],
    /// The device's IP address (its RoCE v2 GID).
    pub local: IpAddr,
    /// The port's active MTU: the size of UD packets and the largest path MTU.
    pub port_mtu: Mtu,
    /// Most QPs the device holds.
    pub max_qp: usize,
    /// Deepest CQ.
    pub max_cqe: usize,
    /// The UDP source port of every packet, when the I/O path cannot choose it per QP (a
    /// UDP socket bound to 4791); `None` gives each connection rxe's port.
    pub udp_source_port: Option<u16>,
    /// ECN marking, CNPs and DCQCN (all quiet by default: no ECN on the wire).
    pub congestion: Congestion,
    /// Retransmit only when rxe would: after the QP's whole ACK timeout, a READ response
    /// gap left to it (off: sooner, with the same packets; `docs/wire.md`, "Recovery");
    /// and keep rxe's window, whatever [`Config::window`] says.
    pub rxe_recovery: bool,
    /// Every RC QP's peer is a rocex engine with selective repeat on (rocexd's
    /// `--selective-repeat`): RC QPs recover from loss by selective repeat, on rocex's own
    /// opcodes, instead of go-back-N (`docs/wire.md`, "Selective repeat"). Off, and for a
    /// QP [`Engine::set_selective_repeat`] turns off, the wire is rxe's.
    pub selective_repeat: bool,
    /// The PSNs an RC QP keeps in flight at most: 128, rxe's window
    /// ([`MAX_UNACKED_PSNS`](crate::MAX_UNACKED_PSNS)), by default. Under go-back-N a wider
    /// one (up to [`MAX_WINDOW`](crate::MAX_WINDOW)) is a ceiling the window grows to on a
    /// clean path and falls from after a loss (`docs/wire.md`, "Recovery"); under
    /// selective repeat the window is this, up to 256.
    pub window: u32,
    /// The low bits every QP number this engine makes carries, when several engines share
    /// one device address: a kernel steering program routes each packet to the process
    /// whose slot its destination QPN names (`docs/architecture.md`, "The direct data
    /// path"). [`QpnSlot::ALONE`] by default. `None`: any number.
    pub qpn_slot: Option<QpnSlot>,
}

/// The low `bits` bits of a QP number, equal to `slot` for every QP an engine makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpnSlot {
    /// How many low bits name the slot (1 to 8).
    pub bits: u8,
    /// The slot: below `1 << bits`.
    pub slot: u32,
}

impl QpnSlot {
    /// An engine alone on its address: every QP number ends in five zero bits, as rocexd's
    /// own QPs do beside direct clients (19 random bits are left). A sender joins packets
    /// into one UDP GSO send only for QPNs that agree in their low five bits, which one
    /// socket of any steering receiver takes (rocex-io's UDP backend), so this lets a peer
    /// join its packets for all of this engine's QPs.
    pub const ALONE: Self = Self { bits: 5, slot: 0 };

    /// The mask of the slot's bits.
    pub fn mask(self) -> u32 {
        (1 << self.bits) - 1
    }

    /// The slot a QP number names.
    pub fn of(self, qpn: u32) -> u32 {
        qpn & self.mask()
    }

    /// `qpn` with its slot bits replaced by this slot.
    pub fn place(self, qpn: u32) -> u32 {
        (qpn & !self.mask()) | self.slot
    }
}

impl Config {
    /// A configuration for `local` with a seed, MTU 1024 (a 1500-byte Ethernet MTU) and
    /// rxe's limits.
    pub fn new(local: IpAddr, rng_seed: [u8; 32]) -> Self {
        Self {
            rng_seed,
            local,
            port_mtu: Mtu::M1024,
            max_qp: 0x10000,
            max_cqe: 1 << 15,
            udp_source_port: None,
            congestion: Congestion::default(),
            rxe_recovery: false,
            selective_repeat: false,
            window: crate::MAX_UNACKED_PSNS,
            qpn_slot: Some(QpnSlot::ALONE),
        }
    }
}

/// What the caller found when it checked a received packet's ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcStatus {
    /// Valid.
    Valid,
    /// Wrong: the packet is dropped and counted.
    Invalid,
}

/// A packet [`Engine::poll_transmit`] wrote: a UDP payload from the device's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination address; the UDP destination port is 4791.
    pub dest: IpAddr,
    /// UDP source port.
    pub src_port: u16,
    /// Bytes written (BTH through ICRC).
    pub len: usize,
    /// The IP header's TOS or traffic class byte: the QP's DSCP and ECN
    /// (`rocex_wire::ecn`); 0 unless the application or `Config::congestion` asked.
    pub tclass: u8,
}

/// Something the application should hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A completion arrived on an armed CQ.
    CqNotify(u32),
    /// A CQ overflowed and lost a completion (an asynchronous error).
    CqOverrun(u32),
}

/// How a QP is created.
#[derive(Debug, Clone, Copy)]
pub struct QpInit {
    /// Transport.
    pub qp_type: QpType,
    /// Protection domain.
    pub pd: PdId,
    /// CQ for send completions.
    pub send_cq: u32,
    /// CQ for receive completions.
    pub recv_cq: u32,
    /// Queue sizes.
    pub cap: QpCap,
}

impl QpInit {
    /// An RC QP on `pd` with `cap` whose sends and receives complete on one CQ, as most
    /// programs make them.
    pub fn rc(pd: PdId, cq: u32, cap: QpCap) -> Self {
        Self {
            qp_type: QpType::Rc,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap,
        }
    }
}

/// A QP's transport progress ([`Engine::qp_status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpStatus {
    /// Transport.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// PSN of the next request packet.
    pub sq_psn: u32,
    /// Oldest PSN not yet acknowledged.
    pub unacked_psn: u32,
    /// PSN the responder expects next.
    pub rq_psn: u32,
    /// Messages the responder completed (24 bits on the wire).
    pub msn: u32,
    /// Send work requests not yet completed.
    pub sq_wqes: usize,
    /// Receive work requests not yet consumed.
    pub rq_wqes: usize,
    /// A SEND or WRITE message is partly received: its first packet in, its last not yet.
    pub receiving: bool,
    /// Transport retries left for the current request (7: unlimited).
    pub retry_left: u8,
    /// RNR retries left for the current request (7: unlimited).
    pub rnr_retry_left: u8,
    /// Its retransmissions, RNR and sequence NAKs and duplicate requests.
    pub counters: QpCounters,
}

impl QpStatus {
    /// [`named`](Self::named)'s names before the counters': the PSNs, queue depths and
    /// retries left, levels where the counters are counts.
    pub const LEVEL_NAMES: [&'static str; 8] = [
        "sq_psn",
        "unacked_psn",
        "rq_psn",
        "msn",
        "sq_wqes",
        "rq_wqes",
        "retry_left",
        "rnr_retry_left",
    ];

    /// The PSNs, queue depths and retries left, then the counters, by the names `rocex
    /// stat` reports them under (rxe's for the counters).
    pub fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let own = [
            u64::from(self.sq_psn),
            u64::from(self.unacked_psn),
            u64::from(self.rq_psn),
            u64::from(self.msn),
            self.sq_wqes as u64,
            self.rq_wqes as u64,
            u64::from(self.retry_left),
            u64::from(self.rnr_retry_left),
        ];
        Self::LEVEL_NAMES
            .into_iter()
            .zip(own)
            .chain(self.counters.iter())
    }

    /// The names [`named`](Self::named) yields, in its order: what a reader of values
    /// copied in that order (a direct client's QP board) names them by.
    pub fn names() -> impl Iterator<Item = &'static str> {
        let counters = QpCounters::default();
        let names: Vec<_> = counters.iter().map(|(n, _)| n).collect();
        Self::LEVEL_NAMES.into_iter().chain(names)
    }
}

/// One RDMA device.
#[derive(Debug)]
pub struct Engine {
    config: Config,
    rng: ChaCha20Rng,
    mem: MemTable,
    cqs: HashMap<u32, Cq>,
    next_cq: u32,
    qps: HashMap<u32, Qp>,
    /// QPs that may have a packet to send, in turn; a QP is in it once at most
    /// (`Scheduling::queued`), so queueing stays O(1) with thousands of active QPs.
    ready: VecDeque<u32>,
    /// When QPs are next looked at, ordered by time, one entry per QP at most (also its
    /// `Scheduling::timer_entry`). A QP with a deadline has an entry at or before it. An entry
    /// stays when its deadline is restarted (every response restarts the retransmit timer)
    /// or gone (the last ACK came), and, when it comes, looks again (`handle_timeout`):
    /// a packet then costs no reordering of the set, and a ping-pong that arms and clears
    /// the timer once a round keeps one entry.
    timers: BTreeSet<(Instant, u32)>,
    /// How many QPs have a deadline: with none, the entries left are not reported.
    armed: usize,
    counters: Counters,
    events: VecDeque<Event>,
    sends: SendSampler,
    requests_first: bool,
    icrc_prefixes: icrc::PrefixCache,
}

impl Engine {
    /// A device with no objects.
    pub fn new(config: Config) -> Self {
        let mut rng = ChaCha20Rng::from_seed(config.rng_seed);
        let mut mem_seed = [0u8; 32];
        rng.fill_bytes(&mut mem_seed);
        Self {
            config,
            rng,
            mem: MemTable::new(mem_seed),
            cqs: HashMap::new(),
            next_cq: 1,
            qps: HashMap::new(),
            ready: VecDeque::new(),
            timers: BTreeSet::new(),
            armed: 0,
            counters: Counters::default(),
            events: VecDeque::new(),
            sends: SendSampler::default(),
            requests_first: false,
            icrc_prefixes: icrc::PrefixCache::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The memory table (PDs, MRs, MWs).
    pub fn mem(&self) -> &MemTable {
        &self.mem
    }

    /// A PSN to start a QP with, from the CSPRNG (so that an off-path attacker cannot
    /// guess it, as ReDMArk shows one can for predictable PSNs).
    pub fn random_psn(&mut self) -> u32 {
        self.rng.next_u32() & Psn::MASK
    }
}
