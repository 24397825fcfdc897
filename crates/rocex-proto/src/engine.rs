//! The device: tables of PDs, MRs, CQs and QPs, and the sans-IO interface around them.

use std::collections::{BTreeSet, VecDeque};

// QPNs and CQ handles are numbers the engine chose at random, which no peer can make
// collide: a fast hash will do (SipHash was a tenth of the per-packet cost).
use foldhash::{HashMap, HashMapExt};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rocex_mem::{Access, Keys, MemError, MemTable, PdId, Region};
use rocex_wire::opcode::Service;
use rocex_wire::{IcrcForm, Opcode, PacketRepr, Psn, ROCE_V2_PORT, icrc, udp_source_port};

use crate::counters::Counters;
use crate::cq::{Cq, NotifyOn};
use crate::qp::state::{self, TransitionError};
use crate::qp::{Qp, SendWqe};
use crate::time::Instant;
use crate::verbs::{
    AttrMask, Mtu, QpAttr, QpCap, QpState, QpType, RecvWr, SendData, SendOp, SendWr, WorkCompletion,
};

/// The General Services Interface's QP number: the UD QP of the CM's MADs.
pub const GSI_QPN: u32 = 1;

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

/// Why a verbs call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerbsError {
    /// No QP has this number.
    NoSuchQp(u32),
    /// No CQ has this number.
    NoSuchCq(u32),
    /// A CQ still has QPs attached.
    CqBusy(u32),
    /// The memory layer refused.
    Mem(MemError),
    /// The QP cannot make this transition.
    Transition(TransitionError),
    /// The QP's state does not allow the call.
    InvalidState(QpState),
    /// The queue is full.
    QueueFull,
    /// More SGEs than the QP was created for.
    TooManySge,
    /// More inline data than the QP was created for.
    InlineTooLong,
    /// The operation is not available on this QP type, or its operands are wrong.
    BadRequest(&'static str),
    /// The message exceeds what the transport can carry.
    MessageTooLong,
    /// A device limit (QPs, CQ depth) is reached.
    Limit(&'static str),
    /// An attribute value is out of range.
    BadAttribute(&'static str),
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoSuchQp(q) => write!(f, "no QP has number {q:#x}"),
            Self::NoSuchCq(c) => write!(f, "no CQ has number {c}"),
            Self::CqBusy(c) => write!(f, "CQ {c} still has QPs attached"),
            Self::Mem(e) => write!(f, "{e}"),
            Self::Transition(e) => write!(f, "{e}"),
            Self::InvalidState(s) => {
                write!(f, "the QP is in state {s:?}, which does not allow this")
            }
            Self::QueueFull => write!(f, "the work queue is full"),
            Self::TooManySge => write!(f, "the work request has more SGEs than the QP allows"),
            Self::InlineTooLong => write!(f, "the inline data is longer than the QP allows"),
            Self::BadRequest(why) => write!(f, "bad work request: {why}"),
            Self::MessageTooLong => write!(f, "the message is longer than the transport carries"),
            Self::Limit(what) => write!(f, "device limit reached: {what}"),
            Self::BadAttribute(what) => write!(f, "bad attribute: {what}"),
        }
    }
}

impl std::error::Error for VerbsError {}

impl From<MemError> for VerbsError {
    fn from(e: MemError) -> Self {
        Self::Mem(e)
    }
}

/// What a QP handed `poll_transmit`.
pub(crate) struct Outgoing {
    pub(crate) len: usize,
    pub(crate) dest: IpAddr,
    pub(crate) local_qpn: u32,
    pub(crate) dest_qpn: u32,
}

/// What the per-QP engines may touch besides their QP.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) mem: &'a mut MemTable,
    pub(crate) cqs: &'a mut HashMap<u32, Cq>,
    pub(crate) counters: &'a mut Counters,
    pub(crate) events: &'a mut VecDeque<Event>,
    pub(crate) port_mtu: u32,
    /// Back-to-back positive ACKs coalesce into the last (with `requests_before_acks`).
    pub(crate) coalesce_acks: bool,
}

impl Ctx<'_> {
    /// Delivers a completion to a CQ.
    pub(crate) fn complete(&mut self, cq: u32, wc: WorkCompletion, solicited: bool) {
        let Some(q) = self.cqs.get_mut(&cq) else {
            return;
        };
        match q.push(wc, solicited) {
            Ok(true) => self.events.push_back(Event::CqNotify(cq)),
            Ok(false) => {}
            Err(_) => self.events.push_back(Event::CqOverrun(cq)),
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
    /// Transport retries left for the current request (7: unlimited).
    pub retry_left: u8,
    /// RNR retries left for the current request (7: unlimited).
    pub rnr_retry_left: u8,
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
    /// (`Place::queued`), so queueing stays O(1) with thousands of active QPs.
    ready: VecDeque<u32>,
    /// When QPs are next looked at, ordered by time, one entry per QP at most (also its
    /// `Place::timer_entry`). A QP with a deadline has an entry at or before it. An entry
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

/// Post times of a sample of send work requests whose first packet has been built, for
/// measuring how long a request waits before it goes out (without a clock per packet).
#[derive(Debug, Default)]
struct SendSampler {
    /// Every how many posts one is sampled; 0: none.
    every: u32,
    posts: u32,
    built: Vec<Instant>,
}

/// Samples kept until taken; later ones are dropped.
const MAX_SEND_SAMPLES: usize = 1024;

impl SendSampler {
    fn on_post(&mut self, now: Instant) -> Option<Instant> {
        if self.every == 0 {
            return None;
        }
        self.posts += 1;
        if self.posts < self.every {
            return None;
        }
        self.posts = 0;
        Some(now)
    }

    fn on_built(&mut self, posted_at: Instant) {
        if self.built.len() < MAX_SEND_SAMPLES {
            self.built.push(posted_at);
        }
    }
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

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> PdId {
        self.mem.alloc_pd()
    }

    /// Frees a protection domain that holds no MR, MW or QP.
    pub fn dealloc_pd(&mut self, pd: PdId) -> Result<(), VerbsError> {
        if self.qps.values().any(|q| q.pd == pd) {
            return Err(VerbsError::Mem(MemError::Busy));
        }
        Ok(self.mem.dealloc_pd(pd)?)
    }

    /// Registers `len` bytes of `region` at application address `iova`.
    pub fn reg_mr(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
    ) -> Result<Keys, VerbsError> {
        Ok(self.mem.reg_mr(pd, iova, len, access, region)?)
    }

    /// Deregisters a memory region.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        Ok(self.mem.dereg_mr(lkey)?)
    }

    /// Allocates a type-2 memory window.
    pub fn alloc_mw(&mut self, pd: PdId) -> Result<u32, VerbsError> {
        Ok(self.mem.alloc_mw(pd)?)
    }

    /// Binds a type-2 window to part of an MR; returns the window's new rkey.
    pub fn bind_mw(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, VerbsError> {
        Ok(self.mem.bind_mw(pd, mw_rkey, mr_lkey, addr, len, access)?)
    }

    /// Creates a completion queue of `cqe` entries.
    pub fn create_cq(&mut self, cqe: usize) -> Result<u32, VerbsError> {
        if cqe == 0 || cqe > self.config.max_cqe {
            return Err(VerbsError::Limit("CQ depth"));
        }
        let id = self.next_cq;
        self.next_cq += 1;
        self.cqs.insert(id, Cq::new(cqe));
        Ok(id)
    }

    /// Destroys a CQ no QP uses.
    pub fn destroy_cq(&mut self, cq: u32) -> Result<(), VerbsError> {
        if !self.cqs.contains_key(&cq) {
            return Err(VerbsError::NoSuchCq(cq));
        }
        if self
            .qps
            .values()
            .any(|q| q.send_cq == cq || q.recv_cq == cq)
        {
            return Err(VerbsError::CqBusy(cq));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    /// Takes the oldest completion of a CQ.
    pub fn poll_cq(&mut self, cq: u32) -> Option<WorkCompletion> {
        self.cqs.get_mut(&cq)?.pop()
    }

    /// Completions waiting on a CQ.
    pub fn cq_len(&self, cq: u32) -> usize {
        self.cqs.get(&cq).map_or(0, Cq::len)
    }

    /// Arms a CQ: the next completion (or solicited one) raises [`Event::CqNotify`].
    pub fn req_notify_cq(&mut self, cq: u32, on: NotifyOn) -> Result<(), VerbsError> {
        self.cqs
            .get_mut(&cq)
            .ok_or(VerbsError::NoSuchCq(cq))?
            .arm(on);
        Ok(())
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Creates a QP in RESET with an unpredictable QP number.
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, VerbsError> {
        self.check_qp_init(&init)?;
        let qpn = loop {
            let n = self.rng.next_u32() & Psn::MASK;
            if n >= 0x10 && !self.qps.contains_key(&n) {
                break n;
            }
        };
        self.qps.insert(
            qpn,
            Qp::new(
                qpn,
                init.qp_type,
                init.pd,
                init.send_cq,
                init.recv_cq,
                init.cap,
            ),
        );
        Ok(qpn)
    }

    /// The checks a new QP's resources pass: the QP limit, its CQs, a PD.
    fn check_qp_init(&self, init: &QpInit) -> Result<(), VerbsError> {
        if self.qps.len() >= self.config.max_qp {
            return Err(VerbsError::Limit("QPs"));
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !self.cqs.contains_key(&cq) {
                return Err(VerbsError::NoSuchCq(cq));
            }
        }
        if self.mem.pd_count() == 0 {
            return Err(VerbsError::Mem(MemError::UnknownPd { pd: init.pd }));
        }
        Ok(())
    }

    /// Modifies a QP: checks the transition and its attributes, then applies them.
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr, mask: AttrMask) -> Result<(), VerbsError> {
        let port_mtu = self.config.port_mtu;
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let to = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            qp.state
        };
        let mut full = mask;
        if !mask.contains(AttrMask::STATE) {
            full = mask | AttrMask::STATE;
        }
        state::check(qp.qp_type, qp.state, to, full).map_err(VerbsError::Transition)?;
        if mask.contains(AttrMask::PATH_MTU) && attr.path_mtu > port_mtu {
            return Err(VerbsError::BadAttribute(
                "path_mtu exceeds the port's active MTU",
            ));
        }
        if mask.contains(AttrMask::PORT) && attr.port_num != 1 {
            return Err(VerbsError::BadAttribute(
                "the device has one port, number 1",
            ));
        }
        if mask.contains(AttrMask::PKEY_INDEX) && attr.pkey_index != 0 {
            return Err(VerbsError::BadAttribute(
                "the device has one P_Key, at index 0",
            ));
        }
        if mask.contains(AttrMask::AV) {
            let av = attr
                .ah_attr
                .ok_or(VerbsError::BadAttribute("ah_attr is missing"))?;
            if av.dest.is_ipv4() != self.config.local.is_ipv4() {
                return Err(VerbsError::BadAttribute(
                    "the destination's IP version differs from the device's",
                ));
            }
        }
        self.with_qp(qpn, Instant::ZERO, |qp, ctx| qp.apply(attr, mask, ctx));
        Ok(())
    }

    /// A QP's attributes and capabilities.
    pub fn query_qp(&self, qpn: u32) -> Result<(QpAttr, QpCap), VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        let mut attr = qp.attr;
        attr.qp_state = qp.state;
        attr.sq_psn = qp.req.psn.value();
        attr.rq_psn = qp.resp.psn.value();
        Ok((attr, qp.cap))
    }

    /// What a QP is doing now, for statistics (`rdma statistic qp` and `rdma res show qp`
    /// show the same).
    pub fn qp_status(&self, qpn: u32) -> Result<QpStatus, VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        Ok(QpStatus {
            qp_type: qp.qp_type,
            state: qp.state,
            sq_psn: qp.req.psn.value(),
            unacked_psn: qp.comp.psn.value(),
            rq_psn: qp.resp.psn.value(),
            msn: qp.resp.msn,
            sq_wqes: qp.sq.len(),
            rq_wqes: qp.rq.len(),
            retry_left: qp.comp.retry_left,
            rnr_retry_left: qp.comp.rnr_left,
        })
    }

    /// Every QP number, in no particular order.
    pub fn qpns(&self) -> impl Iterator<Item = u32> + '_ {
        self.qps.keys().copied()
    }

    /// Destroys a QP; its outstanding work requests are dropped without completions.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let qp = self.qps.remove(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        if let Some(t) = qp.place.timer_entry {
            self.timers.remove(&(t, qpn));
        }
        self.armed -= usize::from(qp.place.armed);
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        self.try_post_send(now, qpn, wr).map_err(|(_, e)| e)
    }

    /// Posts a send work request; a refused one comes back with the reason, so that a
    /// caller that retries it later (the queue full, the QP not yet ready) keeps it
    /// without a copy.
    #[expect(
        clippy::result_large_err,
        reason = "a boxed request would cost the allocation that returning it saves"
    )]
    pub fn try_post_send(
        &mut self,
        now: Instant,
        qpn: u32,
        wr: SendWr,
    ) -> Result<(), (SendWr, VerbsError)> {
        let port_mtu = self.config.port_mtu.bytes();
        let checked = self
            .qps
            .get(&qpn)
            .ok_or(VerbsError::NoSuchQp(qpn))
            .and_then(|qp| validate_send(qp, &wr, port_mtu));
        if let Err(e) = checked {
            return Err((wr, e));
        }
        let len = match wr.op {
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } | SendOp::AtomicWrite { .. } => 8,
            SendOp::Flush { .. } => 0,
            _ => wr.length(),
        };
        let wqe = SendWqe {
            wr,
            len,
            first_psn: Psn::default(),
            npkts: 0,
            started: false,
            posted_at: self.sends.on_post(now),
        };
        self.with_qp(qpn, now, |qp, ctx| {
            qp.sq.push_back(wqe);
            if qp.state == QpState::Err {
                qp.enter_error(ctx);
            }
        });
        Ok(())
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, now: Instant, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.try_post_recv(now, qpn, wr).map_err(|(_, e)| e)
    }

    /// Posts a receive work request; a refused one comes back with the reason, as with
    /// [`Engine::try_post_send`].
    pub fn try_post_recv(
        &mut self,
        now: Instant,
        qpn: u32,
        wr: RecvWr,
    ) -> Result<(), (RecvWr, VerbsError)> {
        let checked = self
            .qps
            .get(&qpn)
            .ok_or(VerbsError::NoSuchQp(qpn))
            .and_then(|qp| validate_recv(qp, &wr));
        if let Err(e) = checked {
            return Err((wr, e));
        }
        self.with_qp(qpn, now, |qp, ctx| {
            qp.rq.push_back(wr);
            if qp.state == QpState::Err {
                qp.enter_error(ctx);
            }
        });
        Ok(())
    }

    /// Checks the ICRC of a packet from a sender that builds IP headers as rocex does
    /// (IPv4 identification 0): lets a UDP-socket path check packets from rocex peers.
    pub fn check_icrc_from_rocex(src: SocketAddr, dst: IpAddr, payload: &[u8]) -> IcrcStatus {
        let Some(body) = payload.len().checked_sub(4) else {
            return IcrcStatus::Invalid;
        };
        let form = IcrcForm::for_opcode(Opcode(payload.first().copied().unwrap_or(0)));
        let found = icrc::from_wire(payload[body..].try_into().expect("four bytes"));
        match icrc::compute_for(
            src.ip(),
            dst,
            src.port(),
            ROCE_V2_PORT,
            &payload[..body],
            form,
        ) {
            Ok(c) if c == found => IcrcStatus::Valid,
            _ => IcrcStatus::Invalid,
        }
    }

    /// Handles a received UDP payload (BTH through ICRC) from `src` to `dst`.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        src: SocketAddr,
        dst: IpAddr,
        payload: &[u8],
        icrc: IcrcStatus,
    ) {
        let Ok((pkt, _)) = PacketRepr::parse(payload) else {
            self.counters.drop_malformed += 1;
            return;
        };
        if icrc == IcrcStatus::Invalid {
            self.counters.drop_icrc += 1;
            return;
        }
        self.counters.rcvd_pkts += 1;
        let info = pkt.info().expect("parsed opcodes are in the table");
        let qpn = pkt.bth.dest_qp;
        let Some(qp) = self.qps.get(&qpn) else {
            self.counters.drop_no_qp += 1;
            return;
        };
        let transport_ok = matches!(
            (info.service, qp.qp_type),
            (Service::Rc, QpType::Rc) | (Service::Uc, QpType::Uc) | (Service::Ud, QpType::Ud)
        );
        if !transport_ok {
            self.counters.drop_wrong_transport += 1;
            return;
        }
        if qp.qp_type != QpType::Ud && qp.attr.ah_attr.is_none_or(|av| av.dest != src.ip()) {
            self.counters.drop_wrong_source += 1;
            return;
        }
        let response = info.operation.is_response();
        self.with_qp(qpn, now, |qp, ctx| {
            if response {
                if matches!(qp.state, QpState::Rts | QpState::Sqd) {
                    qp.handle_response(ctx, &pkt);
                } else {
                    ctx.counters.drop_qp_state += 1;
                }
            } else {
                qp.handle_request(ctx, &pkt, src.ip(), dst);
            }
        });
    }

    /// Writes the next packet to send into `buf` (which must hold a packet of the path
    /// MTU plus 80 bytes), or returns `None` when nothing is ready. Call again until `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // Each QP gets a turn or two; one that keeps failing to produce cannot spin us.
        let mut turns = self.ready.len() * 2;
        while let Some(qpn) = self.ready.pop_front() {
            if turns == 0 {
                self.ready.push_front(qpn);
                return None;
            }
            turns -= 1;
            let local = self.config.local;
            let mut sampled = None;
            let requests_first = self.requests_first;
            let out = self.with_qp(qpn, now, |qp, ctx| {
                qp.place.queued = false;
                // With `requests_first`, a request waiting with a bare ACK goes first:
                // the peer acts on the request, while the ACK only frees its send queue.
                let request_first = requests_first && qp.resp.ack_can_wait(qp.requester_ready());
                if qp.resp.has_output() && !request_first {
                    let len = qp.next_reply(ctx, buf)?;
                    let dest = qp.attr.ah_attr?.dest;
                    return Some(Outgoing {
                        len,
                        dest,
                        local_qpn: qp.qpn,
                        dest_qpn: qp.attr.dest_qp_num,
                    });
                }
                let out = qp.next_request(ctx, buf);
                sampled = qp.req.sampled.take();
                out
            });
            let Some(Some(out)) = out else { continue };
            let body = out.len - 4;
            let src_port = self
                .config
                .udp_source_port
                .unwrap_or_else(|| udp_source_port(out.local_qpn, out.dest_qpn));
            let form = IcrcForm::for_opcode(Opcode(buf[0]));
            let Ok(crc) = self.icrc_prefixes.compute_for(
                local,
                out.dest,
                src_port,
                ROCE_V2_PORT,
                &buf[..body],
                form,
            ) else {
                continue;
            };
            buf[body..out.len].copy_from_slice(&icrc::to_wire(crc));
            self.counters.sent_pkts += 1;
            if let Some(t) = sampled {
                self.sends.on_built(t);
            }
            return Some(Transmit {
                dest: out.dest,
                src_port,
                len: out.len,
            });
        }
        None
    }

    /// Lets a QP's request packet leave before a positive ACK of the same QP that waits
    /// with it (the ACK follows right after; it waits for one packet at most). For a
    /// caller that posts its answer between receiving and sending (a busy-polling
    /// ping-pong), the answer then reaches the peer first. Positive ACKs queued back to
    /// back then also coalesce into the last, which covers them all. Off by default, as
    /// rxe sends every ACK in order.
    pub fn requests_before_acks(&mut self, on: bool) {
        self.requests_first = on;
    }

    /// Samples one send work request in `every` (0: none): [`Engine::take_send_samples`]
    /// then gives the post times of those whose first packet [`Engine::poll_transmit`]
    /// has written.
    pub fn sample_sends(&mut self, every: u32) {
        self.sends.every = every;
        self.sends.posts = 0;
    }

    /// The post times of the sampled send work requests whose first packet has been
    /// written since the last call, oldest first (at most 1024 are kept).
    pub fn take_send_samples(&mut self) -> std::vec::Drain<'_, Instant> {
        self.sends.built.drain(..)
    }

    /// When [`Engine::handle_timeout`] should next be called: at the earliest deadline or
    /// before it (a QP whose timer was restarted is looked at again, at no cost to it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.armed == 0 {
            return None;
        }
        self.timers.first().map(|(t, _)| *t)
    }

    /// Runs the timers due at `now`; a QP whose deadline moved later is scheduled anew.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(t, qpn)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            // The QP's timers check their own times against `now`.
            self.with_qp(qpn, now, |qp, ctx| {
                qp.place.timer_entry = None;
                qp.handle_timer(ctx);
            });
        }
    }

    /// Runs `f` on a QP with the context it needs, then reschedules the QP.
    fn with_qp<R>(
        &mut self,
        qpn: u32,
        now: Instant,
        f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let qp = self.qps.get_mut(&qpn)?;
        let mut ctx = Ctx {
            now,
            mem: &mut self.mem,
            cqs: &mut self.cqs,
            counters: &mut self.counters,
            events: &mut self.events,
            port_mtu: self.config.port_mtu.bytes(),
            coalesce_acks: self.requests_first,
        };
        let r = f(qp, &mut ctx);
        let deadline = qp.deadline();
        let wants = qp.wants_to_send();
        match (deadline, qp.place.timer_entry) {
            // An entry at or before the deadline will do (see `timers`).
            (Some(t), Some(at)) if at <= t => {}
            (Some(t), old) => {
                if let Some(old) = old {
                    self.timers.remove(&(old, qpn));
                }
                qp.place.timer_entry = Some(t);
                self.timers.insert((t, qpn));
            }
            // No deadline: the entry stays for the next one (an idle engine reports none).
            (None, _) => {}
        }
        if deadline.is_some() != qp.place.armed {
            qp.place.armed = deadline.is_some();
            if qp.place.armed {
                self.armed += 1;
            } else {
                self.armed -= 1;
            }
        }
        if wants && !qp.place.queued {
            qp.place.queued = true;
            self.ready.push_back(qpn);
        }
        Some(r)
    }

    /// Creates a QP in RESET with a QP number the caller chooses, for reproducing captures
    /// (`rocex conform replay` answers requests addressed to the captured QPN).
    ///
    /// The number must lie in `0x10..=0xFFFFFF` (below 0x10 are rxe's special QPs) and be
    /// unused ([`VerbsError::BadAttribute`] otherwise). Real QPs use [`Engine::create_qp`],
    /// whose numbers are unpredictable. The one special QP allowed is QPN 1, the GSI, as a
    /// UD QP: it carries the communication manager's MADs (IBTA chapter 13).
    pub fn create_qp_with_qpn(&mut self, init: QpInit, qpn: u32) -> Result<u32, VerbsError> {
        let gsi = qpn == GSI_QPN && init.qp_type == QpType::Ud;
        if !gsi && !(0x10..=Psn::MASK).contains(&qpn) {
            return Err(VerbsError::BadAttribute(
                "a chosen QPN must lie in 0x10..=0xffffff, or be 1 (the GSI) for a UD QP",
            ));
        }
        if self.qps.contains_key(&qpn) {
            return Err(VerbsError::BadAttribute("the chosen QPN is in use"));
        }
        self.check_qp_init(&init)?;
        self.qps.insert(
            qpn,
            Qp::new(
                qpn,
                init.qp_type,
                init.pd,
                init.send_cq,
                init.recv_cq,
                init.cap,
            ),
        );
        Ok(qpn)
    }

    /// Registers a memory region under chosen keys, for reproducing captures (see
    /// [`MemTable::reg_mr_with_keys`]: keys must be non-zero, distinct and unused).
    pub fn reg_mr_with_keys(
        &mut self,
        pd: PdId,
        iova: u64,
        len: u64,
        access: Access,
        region: Arc<dyn Region>,
        keys: Keys,
    ) -> Result<Keys, VerbsError> {
        Ok(self
            .mem
            .reg_mr_with_keys(pd, iova, len, access, region, keys)?)
    }

    /// Allocates an unbound type-2 memory window under a chosen rkey, for reproducing
    /// captures (see [`MemTable::alloc_mw_with_key`]).
    pub fn alloc_mw_with_key(&mut self, pd: PdId, rkey: u32) -> Result<u32, VerbsError> {
        Ok(self.mem.alloc_mw_with_key(pd, rkey)?)
    }

    /// Binds a type-2 window that keeps its rkey, for reproducing captures (see
    /// [`MemTable::bind_mw_keeping_key`]).
    pub fn bind_mw_keeping_key(
        &mut self,
        pd: PdId,
        mw_rkey: u32,
        mr_lkey: u32,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, VerbsError> {
        Ok(self
            .mem
            .bind_mw_keeping_key(pd, mw_rkey, mr_lkey, addr, len, access)?)
    }
}

/// The checks `ibv_post_recv` makes before a request is queued.
fn validate_recv(qp: &Qp, wr: &RecvWr) -> Result<(), VerbsError> {
    if qp.state == QpState::Reset {
        return Err(VerbsError::InvalidState(qp.state));
    }
    if qp.rq.len() >= qp.cap.max_recv_wr as usize {
        return Err(VerbsError::QueueFull);
    }
    if wr.sges.len() > qp.cap.max_recv_sge as usize {
        return Err(VerbsError::TooManySge);
    }
    Ok(())
}

/// The checks `ibv_post_send` makes before a request is queued.
fn validate_send(qp: &Qp, wr: &SendWr, port_mtu: u32) -> Result<(), VerbsError> {
    if matches!(qp.state, QpState::Reset | QpState::Init | QpState::Rtr) {
        return Err(VerbsError::InvalidState(qp.state));
    }
    if qp.sq.len() >= qp.cap.max_send_wr as usize {
        return Err(VerbsError::QueueFull);
    }
    match &wr.data {
        SendData::Sges(s) if s.len() > qp.cap.max_send_sge as usize => {
            return Err(VerbsError::TooManySge);
        }
        SendData::Inline(d) if d.len() > qp.cap.max_inline_data as usize => {
            return Err(VerbsError::InlineTooLong);
        }
        _ => {}
    }
    let allowed = match qp.qp_type {
        QpType::Rc => true,
        QpType::Uc => matches!(
            wr.op,
            SendOp::Send | SendOp::SendWithImm(_) | SendOp::Write(_) | SendOp::WriteWithImm(..)
        ),
        QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)),
    };
    if !allowed {
        return Err(VerbsError::BadRequest(
            "the operation is not available on this QP type",
        ));
    }
    if qp.qp_type == QpType::Ud && wr.ud.is_none() {
        return Err(VerbsError::BadRequest("a UD send needs a destination"));
    }
    let len = wr.length();
    match wr.op {
        SendOp::CompareSwap { remote, .. } | SendOp::FetchAdd { remote, .. } => {
            if len != 8 || matches!(wr.data, SendData::Inline(_)) {
                return Err(VerbsError::BadRequest(
                    "an atomic needs 8 bytes of registered local buffer",
                ));
            }
            if remote.addr % 8 != 0 {
                return Err(VerbsError::BadRequest(
                    "an atomic's remote address must be 8-byte aligned",
                ));
            }
        }
        SendOp::Read(_) if matches!(wr.data, SendData::Inline(_)) => {
            return Err(VerbsError::BadRequest("a READ cannot land in inline data"));
        }
        _ => {}
    }
    if len > 1 << 31 || (qp.qp_type == QpType::Ud && len > u64::from(port_mtu)) {
        return Err(VerbsError::MessageTooLong);
    }
    Ok(())
}
