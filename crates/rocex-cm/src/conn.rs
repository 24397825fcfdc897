/*! One RC connection's CM exchange (the connection state machine of IBTA Vol. 1
chapter 12), sans-IO: messages and time in ([`Conn::handle`], [`Conn::handle_timeout`]),
messages out ([`Conn::poll_transmit`]) and events ([`Conn::poll_event`]) that carry the QP
attributes the connection settled on ([`QpParams`]).

* Active: [`Conn::connect`] sends a REQ and resends it every response timeout until a REP,
  a REJ or the last retry; an MRA stretches the wait by the time it asks for. A REP gives
  [`Event::Reply`]: the caller moves its QP to RTR and RTS, then calls
  [`Conn::establish`], which sends the RTU. A repeated REP is answered with the RTU again.
* Passive: the caller checks a REQ ([`QpParams::for_passive`] gives its QP attributes),
  readies its QP, and calls [`Conn::accept`], which sends a REP and resends it until the
  RTU (or until traffic arrives on the QP, the communication-established event:
  [`Conn::comm_established`]); a repeated REQ gets the REP again. [`reject`] refuses a REQ.
* Either side: [`Conn::disconnect`] sends a DREQ, resent until the DREP; a DREQ is answered
  with a DREP, also when it repeats. Both end in TimeWait, then Closed.

Retries wait the peer's CM response timeout plus two packet lifetimes, as the kernel's CM
does, for at most Max CM Retries resends (15 for rdma_cm).
*/

use core::net::IpAddr;
use core::time::Duration;
use std::collections::VecDeque;

use rocex_proto::Instant;
use rocex_proto::verbs::{AddressVector, AttrMask, Mtu, QpAttr};

use crate::disconnect::{DreqRepr, IdsRepr};
use crate::rej::{self, MsgKind, Repr as RejRepr};
use crate::{Mad, Message, RepRepr, ReqRepr, cma, path};

/// rdma_cm's CM response timeout exponent (`CMA_CM_RESPONSE_TIMEOUT`: 4.096 µs × 2^20, about
/// 4.3 s).
pub const CM_RESPONSE_TIMEOUT: u8 = 20;
/// rdma_cm's resend limit (`CMA_MAX_CM_RETRIES`).
pub const MAX_CM_RETRIES: u8 = 15;
/// The packet lifetime exponent rdma_cm assumes on RoCE (about 268 ms); the QP's local ACK
/// timeout is one more, as in the captured REQs (17).
pub const ROCE_PACKET_LIFETIME: u8 = 16;

/// 4.096 µs × 2^`exp`, the unit of every CM timeout (IBTA chapter 12).
pub fn timeout(exp: u8) -> Duration {
    Duration::from_nanos(4096u64 << exp.min(31))
}

/// This side of the connection: its address and CA GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    /// The local IP address (RoCE v2 GID).
    pub addr: IpAddr,
    /// The local CA GUID.
    pub ca_guid: u64,
}

impl Local {
    /// The side at `addr`: its CA GUID is the GID's interface ID with the locally
    /// administered bit set, as a RoCE device derives one.
    pub fn at(addr: IpAddr) -> Self {
        let g = path::gid_of(addr);
        let mut guid = [0u8; 8];
        guid.copy_from_slice(&g[8..16]);
        Self {
            addr,
            ca_guid: u64::from_be_bytes(guid) | 0x0200_0000_0000_0000,
        }
    }
}

/// What the active side asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectParams {
    /// The local QP.
    pub qpn: u32,
    /// The first PSN the local QP expects to receive: the peer sends from it (see
    /// [`QpParams`]).
    pub starting_psn: u32,
    /// The service ID (rdma_cm: [`cma::service_id`]).
    pub service_id: u64,
    /// READ/atomic requests the local QP accepts.
    pub responder_resources: u8,
    /// READ/atomic requests the local QP issues at once.
    pub initiator_depth: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits; 7 is infinite).
    pub rnr_retry_count: u8,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// The path's traffic class (rdma_cm's `RDMA_OPTION_ID_TOS`), which both QPs' packets
    /// carry: the kernel's rdma_cm puts the TOS in the path record and the REQ, and the
    /// passive side takes the REQ's path.
    pub traffic_class: u8,
    /// The REQ's private data (rdma_cm: its header, then the application's bytes).
    pub private_data: [u8; crate::req::PRIVATE_DATA_LEN],
}

/// What the passive side answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptParams {
    /// The local QP.
    pub qpn: u32,
    /// The first PSN the local QP expects to receive: the peer sends from it.
    pub starting_psn: u32,
    /// READ/atomic requests the local QP accepts (capped by the REQ's initiator depth).
    pub responder_resources: u8,
    /// READ/atomic requests the local QP issues (capped by the REQ's responder resources).
    pub initiator_depth: u8,
    /// RNR retries the peer may make against us (3 bits).
    pub rnr_retry_count: u8,
    /// The largest path MTU the local port takes.
    pub max_mtu: Mtu,
    /// The REP's private data (rdma_cm puts no header in a REP).
    pub private_data: [u8; crate::rep::PRIVATE_DATA_LEN],
}

/// The connected QP's attributes, as both sides' messages settled them.
///
/// Each message's Starting PSN is the PSN its sender's QP expects to receive first: the
/// active side sends from the REP's, the passive side from the REQ's. That is how Linux's
/// CM programs both QPs (in the captured rxe connections the client's first SEND carries
/// the REP's PSN and the server's first READ the REQ's), so rocex does the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpParams {
    /// The peer's address.
    pub remote: IpAddr,
    /// The peer's QPN.
    pub remote_qpn: u32,
    /// The local first send PSN.
    pub sq_psn: u32,
    /// The peer's first send PSN: the local expected PSN.
    pub rq_psn: u32,
    /// Path MTU.
    pub path_mtu: Mtu,
    /// READ/atomic requests the local QP issues.
    pub max_rd_atomic: u8,
    /// READ/atomic requests the local QP accepts.
    pub max_dest_rd_atomic: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// The path's traffic class: the IP TOS of the QP's packets.
    pub traffic_class: u8,
}

impl QpParams {
    /// The passive side's QP attributes for a REQ from `remote`, answered with `p`; `None`
    /// when the REQ's path MTU is not an MTU (IBTA table 106 allows 1 to 5).
    pub fn for_passive(remote: IpAddr, req: &ReqRepr, p: &AcceptParams) -> Option<Self> {
        let mtu = Mtu::from_ibv(req.path_mtu)?.min(p.max_mtu);
        Some(Self {
            remote,
            remote_qpn: req.local_qpn,
            sq_psn: req.starting_psn,
            rq_psn: p.starting_psn,
            path_mtu: mtu,
            max_rd_atomic: p.initiator_depth.min(req.responder_resources),
            max_dest_rd_atomic: p.responder_resources.min(req.initiator_depth),
            retry_cnt: req.retry_count,
            rnr_retry: req.rnr_retry_count,
            timeout: req.primary_path.local_ack_timeout,
            traffic_class: req.primary_path.traffic_class,
        })
    }

    /// Every attribute the connection decides; [`QpAttr::rc_steps`] picks each state's.
    fn attr(&self) -> QpAttr {
        QpAttr {
            ah_attr: Some(AddressVector { dest: self.remote }),
            traffic_class: self.traffic_class,
            path_mtu: self.path_mtu,
            dest_qp_num: self.remote_qpn,
            rq_psn: self.rq_psn,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            min_rnr_timer: 12,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            sq_psn: self.sq_psn,
            max_rd_atomic: self.max_rd_atomic,
            ..QpAttr::default()
        }
    }

    /// INIT to RTR: the attributes and their mask.
    pub fn rtr(&self) -> (QpAttr, AttrMask) {
        let [_, rtr, _] = self.attr().rc_steps();
        rtr
    }

    /// RTR to RTS: the attributes and their mask.
    pub fn rts(&self) -> (QpAttr, AttrMask) {
        let [_, _, rts] = self.attr().rc_steps();
        rts
    }
}

/// Which side started the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Sent the REQ.
    Active,
    /// Answered it.
    Passive,
}

/// Where the exchange stands (the states of IBTA chapter 12's connection diagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// REQ sent, waiting for the REP.
    ReqSent,
    /// The peer sent an MRA for the REQ: waiting longer.
    MraRcvd,
    /// REP received; the RTU leaves at [`Conn::establish`].
    RepRcvd,
    /// REP sent, waiting for the RTU.
    RepSent,
    /// Connected.
    Established,
    /// DREQ sent, waiting for the DREP.
    DreqSent,
    /// Disconnected; repeated DREQs are still answered.
    TimeWait,
    /// Over (disconnected, rejected or timed out).
    Closed,
}

/// What the caller should act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The REP arrived: move the QP to RTR and RTS, then call [`Conn::establish`].
    Reply(QpParams),
    /// The connection is up (the passive side's RTU, or traffic standing in for it).
    Established,
    /// The peer refused (the REJ's reason code).
    Rejected(u16),
    /// The peer never answered (all retries spent).
    TimedOut,
    /// The connection is down (DREQ or DREP exchanged, or the DREQ's retries spent).
    Disconnected,
}

/// A message waiting to be resent.
#[derive(Debug, Clone, Copy)]
struct Resend {
    mad: Mad,
    at: Instant,
    left: u8,
}

/// One connection's CM state.
#[derive(Debug)]
pub struct Conn {
    role: Role,
    state: State,
    peer: IpAddr,
    tid: u64,
    local_comm_id: u32,
    remote_comm_id: u32,
    /// The peer's QPN (for the DREQ), once known.
    remote_qpn: u32,
    /// How long the peer may take to answer, plus two packet lifetimes.
    interval: Duration,
    max_retries: u8,
    resend: Option<Resend>,
    /// When TimeWait ends.
    close_at: Option<Instant>,
    /// The last answer sent (REP, RTU or DREP), for repeats of what it answers.
    answer: Option<Mad>,
    params: Option<QpParams>,
    /// The REQ sent (active side), whose terms the REP completes.
    sent_req: Option<ReqRepr>,
    /// The private data of the peer's REP or REJ, once one arrived.
    peer_data: Vec<u8>,
    out: VecDeque<Mad>,
    events: VecDeque<Event>,
}

impl Conn {
    /// Starts an active connection to `peer`: the REQ is queued at once. `tid` and
    /// `comm_id` should be unpredictable (the caller's random source).
    pub fn connect(
        now: Instant,
        local: Local,
        peer: IpAddr,
        p: &ConnectParams,
        tid: u64,
        comm_id: u32,
    ) -> Self {
        let req = ReqRepr {
            local_comm_id: comm_id,
            vendor_id: 0,
            service_id: p.service_id,
            local_ca_guid: local.ca_guid,
            local_qkey: 0,
            local_qpn: p.qpn,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
            transport_service_type: 0,
            end_to_end_flow_control: false,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
            retry_count: p.retry_count,
            partition_key: 0xffff,
            path_mtu: p.path_mtu as u8,
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry_count,
            max_cm_retries: MAX_CM_RETRIES,
            srq: false,
            extended_transport_type: 0,
            primary_path: path::Repr {
                local_lid: 0xffff,
                remote_lid: 0xffff,
                local_gid: path::gid_of(local.addr),
                remote_gid: path::gid_of(peer),
                hop_limit: 64,
                traffic_class: p.traffic_class,
                local_ack_timeout: ROCE_PACKET_LIFETIME + 1,
                ..path::Repr::default()
            },
            alternate_path: path::Repr::default(),
            sap_supported: false,
            private_data: p.private_data,
        };
        let mut c = Self::new(Role::Active, State::ReqSent, peer, tid, comm_id);
        c.interval = retry_interval(CM_RESPONSE_TIMEOUT);
        c.max_retries = MAX_CM_RETRIES;
        c.send_reliably(now, Message::Req(req));
        c
    }

    /// Accepts a REQ from `peer` whose MAD had transaction ID `tid`: the REP is queued at
    /// once. The caller readies its QP with [`QpParams::for_passive`] (also
    /// [`Conn::params`]) before the REP leaves. `None` when the REQ's path MTU is invalid.
    pub fn accept(
        now: Instant,
        local: Local,
        peer: IpAddr,
        tid: u64,
        req: &ReqRepr,
        p: &AcceptParams,
        comm_id: u32,
    ) -> Option<Self> {
        let params = QpParams::for_passive(peer, req, p)?;
        let rep = RepRepr {
            local_comm_id: comm_id,
            remote_comm_id: req.local_comm_id,
            local_qkey: 0,
            local_qpn: p.qpn,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            vendor_id: 0,
            responder_resources: params.max_dest_rd_atomic,
            initiator_depth: params.max_rd_atomic,
            target_ack_delay: 15,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: p.rnr_retry_count,
            srq: false,
            local_ca_guid: local.ca_guid,
            private_data: p.private_data,
        };
        let mut c = Self::new(Role::Passive, State::RepSent, peer, tid, comm_id);
        c.remote_comm_id = req.local_comm_id;
        c.remote_qpn = req.local_qpn;
        c.interval = retry_interval(req.local_cm_response_timeout);
        c.max_retries = req.max_cm_retries;
        c.params = Some(params);
        let rep = Mad {
            tid,
            msg: Message::Rep(rep),
        };
        c.answer = Some(rep);
        c.send_reliably(now, rep.msg);
        Some(c)
    }

    fn new(role: Role, state: State, peer: IpAddr, tid: u64, comm_id: u32) -> Self {
        Self {
            role,
            state,
            peer,
            tid,
            local_comm_id: comm_id,
            remote_comm_id: 0,
            remote_qpn: 0,
            interval: retry_interval(CM_RESPONSE_TIMEOUT),
            max_retries: MAX_CM_RETRIES,
            resend: None,
            close_at: None,
            answer: None,
            params: None,
            sent_req: None,
            peer_data: Vec::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Which side this is.
    pub const fn role(&self) -> Role {
        self.role
    }
    /// Where the exchange stands.
    pub const fn state(&self) -> State {
        self.state
    }
    /// The peer's address.
    pub const fn peer(&self) -> IpAddr {
        self.peer
    }
    /// The local communication ID.
    pub const fn local_comm_id(&self) -> u32 {
        self.local_comm_id
    }
    /// The QP attributes, once the REQ (passive) or REP (active) has settled them.
    pub const fn params(&self) -> Option<QpParams> {
        self.params
    }
    /// The private data of the peer's REP (its whole 196-byte field, which the kernel's
    /// rdma_cm hands to the `ESTABLISHED` event) or REJ (148 bytes, the `REJECTED`
    /// event's); empty before either arrived.
    pub fn peer_private_data(&self) -> &[u8] {
        &self.peer_data
    }

    /// Whether a received message belongs to this connection: a REQ by the peer's
    /// communication ID, anything else by ours.
    pub fn owns(&self, from: IpAddr, mad: &Mad) -> bool {
        from == self.peer
            && match mad.msg {
                Message::Req(r) => {
                    self.role == Role::Passive && r.local_comm_id == self.remote_comm_id
                }
                ref m => m.remote_comm_id() == self.local_comm_id,
            }
    }

    /// Handles a message the caller found this connection [`owns`](Conn::owns).
    pub fn handle(&mut self, now: Instant, mad: &Mad) {
        match (self.state, mad.msg) {
            // A repeated REQ: our REP was lost or is slow.
            (State::RepSent, Message::Req(_)) => self.repeat_answer(),
            (State::ReqSent | State::MraRcvd, Message::Mra(m))
                if m.message_mraed == MsgKind::Req =>
            {
                // The peer needs longer: wait what it asks for, then resume resending.
                self.state = State::MraRcvd;
                if let Some(r) = &mut self.resend {
                    r.at = now + timeout(m.service_timeout) + self.interval;
                }
            }
            (State::ReqSent | State::MraRcvd, Message::Rep(rep)) => {
                self.resend = None;
                self.remote_comm_id = rep.local_comm_id;
                self.remote_qpn = rep.local_qpn;
                let Some(params) = self.active_params(&rep) else {
                    self.reject_and_close(MsgKind::Rep, rej::REASON_CONSUMER);
                    return;
                };
                self.params = Some(params);
                self.state = State::RepRcvd;
                self.peer_data = rep.private_data.to_vec();
                self.events.push_back(Event::Reply(params));
            }
            // A repeated REP: our RTU was lost.
            (State::Established | State::RepRcvd, Message::Rep(_)) => self.repeat_answer(),
            (State::RepSent, Message::Rtu(_)) => self.established(),
            (
                State::ReqSent
                | State::MraRcvd
                | State::RepSent
                | State::RepRcvd
                | State::Established,
                Message::Rej(r),
            ) => {
                self.resend = None;
                self.state = State::Closed;
                self.peer_data = r.private_data.to_vec();
                self.events.push_back(Event::Rejected(r.reason));
            }
            (State::Established | State::RepSent | State::DreqSent, Message::Dreq(_)) => {
                let drep = Mad {
                    tid: mad.tid,
                    msg: Message::Drep(IdsRepr::new(self.local_comm_id, self.remote_comm_id)),
                };
                self.answer = Some(drep);
                self.out.push_back(drep);
                self.time_wait(now);
            }
            (State::TimeWait, Message::Dreq(_)) => self.repeat_answer(),
            (State::DreqSent, Message::Drep(_)) => self.time_wait(now),
            _ => {}
        }
    }

    /// The REP's QP attributes for the active side; `None` when the REQ is gone.
    fn active_params(&self, rep: &RepRepr) -> Option<QpParams> {
        let req = self.sent_req?;
        Some(QpParams {
            remote: self.peer,
            remote_qpn: rep.local_qpn,
            sq_psn: rep.starting_psn,
            rq_psn: req.starting_psn,
            path_mtu: Mtu::from_ibv(req.path_mtu)?,
            max_rd_atomic: req.initiator_depth.min(rep.responder_resources),
            max_dest_rd_atomic: req.responder_resources.min(rep.initiator_depth),
            retry_cnt: req.retry_count,
            rnr_retry: rep.rnr_retry_count,
            timeout: req.primary_path.local_ack_timeout,
            traffic_class: req.primary_path.traffic_class,
        })
    }

    /// Sends the RTU after [`Event::Reply`], once the QP is in RTS.
    pub fn establish(&mut self) {
        if self.state != State::RepRcvd {
            return;
        }
        let rtu = Mad {
            tid: self.tid,
            msg: Message::Rtu(IdsRepr::new(self.local_comm_id, self.remote_comm_id)),
        };
        self.answer = Some(rtu);
        self.out.push_back(rtu);
        self.state = State::Established;
        self.events.push_back(Event::Established);
    }

    /// Traffic arrived on the QP while the RTU is outstanding: the connection is up (IBTA
    /// chapter 12: the communication-established event).
    pub fn comm_established(&mut self) {
        if self.state == State::RepSent {
            self.established();
        }
    }

    fn established(&mut self) {
        self.resend = None;
        self.state = State::Established;
        self.events.push_back(Event::Established);
    }

    /// Starts the disconnect: a DREQ, resent until the DREP.
    pub fn disconnect(&mut self, now: Instant) {
        if !matches!(self.state, State::Established | State::RepSent) {
            return;
        }
        self.state = State::DreqSent;
        self.send_reliably(
            now,
            Message::Dreq(DreqRepr::new(
                self.local_comm_id,
                self.remote_comm_id,
                self.remote_qpn,
            )),
        );
    }

    /// The next message to send to [`Conn::peer`]'s QP1.
    pub fn poll_transmit(&mut self) -> Option<Mad> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Conn::handle_timeout`] has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.resend.map(|r| r.at).or(self.close_at)
    }

    /// Resends what is unanswered, or gives up after the last retry; ends TimeWait.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.close_at.is_some_and(|t| t <= now) {
            self.close_at = None;
            self.state = State::Closed;
        }
        let Some(mut r) = self.resend else { return };
        if now < r.at {
            return;
        }
        if r.left > 0 {
            r.left -= 1;
            r.at = now + self.interval;
            self.out.push_back(r.mad);
            self.resend = Some(r);
            return;
        }
        self.resend = None;
        match self.state {
            State::ReqSent | State::MraRcvd => {
                self.reject_and_close(MsgKind::Req, rej::REASON_TIMEOUT);
                self.events.push_back(Event::TimedOut);
            }
            State::RepSent => {
                self.reject_and_close(MsgKind::Rep, rej::REASON_TIMEOUT);
                self.events.push_back(Event::TimedOut);
            }
            // No DREP: disconnected all the same (the DREQ timeout of IBTA chapter 12).
            State::DreqSent => self.time_wait(now),
            _ => {}
        }
    }

    fn send_reliably(&mut self, now: Instant, msg: Message) {
        let mad = Mad { tid: self.tid, msg };
        if let Message::Req(req) = msg {
            self.sent_req = Some(req);
        }
        self.out.push_back(mad);
        self.resend = Some(Resend {
            mad,
            at: now + self.interval,
            left: self.max_retries,
        });
    }

    fn repeat_answer(&mut self) {
        if let Some(a) = self.answer {
            self.out.push_back(a);
        }
    }

    fn reject_and_close(&mut self, which: MsgKind, reason: u16) {
        let rej = RejRepr::new(self.local_comm_id, self.remote_comm_id, which, reason);
        self.out.push_back(Mad {
            tid: self.tid,
            msg: Message::Rej(rej),
        });
        self.resend = None;
        self.state = State::Closed;
    }

    fn time_wait(&mut self, now: Instant) {
        let was_up = self.state != State::TimeWait;
        self.state = State::TimeWait;
        // Stay to answer repeated DREQs for one response timeout, then close.
        self.resend = None;
        self.close_at = Some(now + self.interval);
        if was_up {
            self.events.push_back(Event::Disconnected);
        }
    }
}

/// A REJ refusing `req` (received in a MAD with transaction ID `tid`) for `reason`: sent
/// without a connection, as the kernel's CM does for an unknown service.
pub fn reject(tid: u64, req: &ReqRepr, reason: u16) -> Mad {
    reject_with(tid, req, reason, &[])
}

/// [`reject`] with the consumer's private data (at most the REJ's 148 bytes; the rest of
/// the field is zero, more is cut off).
pub fn reject_with(tid: u64, req: &ReqRepr, reason: u16, private_data: &[u8]) -> Mad {
    let mut rej = RejRepr::new(0, req.local_comm_id, MsgKind::Req, reason);
    let n = private_data.len().min(rej.private_data.len());
    rej.private_data[..n].copy_from_slice(&private_data[..n]);
    Mad {
        tid,
        msg: Message::Rej(rej),
    }
}

/// rdma_cm's addressing of a REQ: its port space and port, and its private-data header.
pub fn rdma_cm_target(req: &ReqRepr) -> Option<(u16, u16, cma::Repr)> {
    let (ps, port) = cma::port_of(req.service_id)?;
    let hdr = cma::Repr::parse(&cma::Hdr::new_unchecked(&req.private_data[..])).ok()?;
    Some((ps, port, hdr))
}

/// How long to wait for an answer to a message: the peer's response time and a round trip.
fn retry_interval(response_timeout: u8) -> Duration {
    timeout(response_timeout) + timeout(ROCE_PACKET_LIFETIME) * 2
}
