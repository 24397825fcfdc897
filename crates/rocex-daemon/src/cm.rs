//! rdma_cm for the daemon's clients: QP1 (the GSI) in the engine carries CM MADs, and
//! `rocex_cm::conn` state machines connect the clients' RC QPs (`docs/abi.md` §6.5).
//!
//! A client listens on an rdma_cm port (TCP or UDP port space), or connects one of its QPs
//! to an address and port; the daemon sends and answers REQ, REP, RTU, REJ, DREQ and DREP,
//! moves the client's QP to RTR and RTS with the attributes both sides settled (to ERROR on
//! a disconnect), and queues each outcome as a [`CmEvent`] the client takes with `CmPoll`.
//! A UD QP resolves a UD service instead (SIDR_REQ and SIDR_REP, [`sidr`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

use rocex_cm::conn::{self, AcceptParams, Conn, ConnectParams, Event, Local, QpParams, State};
use rocex_cm::query::Query;
use rocex_cm::{MAD_LEN, Mad, Message, ReqRepr, SidrReqRepr, cma, rej};
use rocex_io::SteerGroup;
use rocex_proto::VerbsError;
use rocex_proto::verbs::{
    AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, SendData, SendOp, SendWr, Sge, UdDest,
    WcStatus,
};
use rocex_proto::{Access, Engine, GRH_LEN, GSI_QPN, Instant, QpInit, Region, VecRegion};
use rocex_shm::control::{
    CM_PRIVATE_DATA_LEN, CmConn, CmEvent, CmEventKind, Request, Response, kind,
};

use crate::pump::{self, QpPump};

mod relisten;
mod sidr;

use relisten::{GRACE, Held, Relisten};

/// The Q_Key of QP1 (IBTA chapter 13's well-known GSI Q_Key).
const GSI_QKEY: u32 = 0x8001_0000;
/// Receives kept posted on QP1.
const GSI_SLOTS: u32 = 64;
const SLOT: u32 = (GRH_LEN + MAD_LEN) as u32;
const GSI_BASE: u64 = 0x7000_0000;
/// The wr_id of MAD sends, whose completions are dropped.
const GSI_SEND: u64 = u64::MAX;
/// Bytes of rdma_cm's header at the start of a REQ's private data.
const CMA_HDR_LEN: usize = 36;
/// Events a client may leave untaken before the oldest are dropped.
const MAX_EVENTS: usize = 1024;
/// READs and atomics in flight each way (the device's `max_qp_rd_atom`).
const RD_ATOMIC: u8 = 16;
/// Transport retries after a timeout: 6, the most that still ends.
const RETRY_COUNT: u8 = 6;
/// RNR retries: forever.
const RNR_RETRY: u8 = 7;

/// A connection: the client it serves, its QP and where the handshake stands.
#[derive(Debug)]
struct Entry {
    client: u64,
    peer: IpAddr,
    slot: Slot,
}

#[derive(Debug)]
enum Slot {
    /// A REQ waiting for the listening client's `CmAccept` or `CmReject`, with the PSN the
    /// accept will send (chosen now, so that the request's event can carry the QP's RTR
    /// attributes, as `rdma_init_qp_attr` on the passive side gives them before accepting).
    Pending {
        tid: u64,
        req: Box<ReqRepr>,
        psn: u32,
    },
    /// A handshake or connection in progress, with the client's QP, which is a direct
    /// client's own (in its engine: the client moves it) or rocexd's.
    Live {
        conn: Box<Conn>,
        qpn: u32,
        direct: bool,
    },
    /// A SIDR_REQ waiting for the listening client's `CmAccept` or `CmReject`.
    SidrPending { tid: u64, req: Box<SidrReqRepr> },
    /// A SIDR_REQ sent for the client's UD QP, waiting for the SIDR_REP.
    SidrQuery(Box<Query>),
    /// A SIDR_REP sent, kept to answer the SIDR_REQ's repeats until `until`.
    SidrAnswered {
        request_id: u32,
        rep: Box<Mad>,
        until: Instant,
    },
}

/// The QPs a client's CM requests may name.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ClientQps<'a> {
    /// Its QPs in rocexd's engine, which the CM moves.
    Daemon(&'a HashMap<u32, QpPump>),
    /// A direct client's: every QPN of its `slot` in `group`. They live in the client's
    /// engine, so the client says what rocexd would read of them (UD or not, the Q_Key)
    /// and moves them itself, as rdma-core's librdmacm moves the QPs of its process with
    /// the attributes the kernel's rdma_cm reports (`CmEventKind::ConnectResponse`).
    Direct { slot: u32, group: &'a SteerGroup },
}

impl ClientQps<'_> {
    fn holds(&self, qpn: u32) -> bool {
        match *self {
            Self::Daemon(qps) => qps.contains_key(&qpn),
            Self::Direct { slot, group } => qpn != GSI_QPN && group.slot_of(qpn) == slot,
        }
    }

    fn direct(&self) -> bool {
        matches!(self, Self::Direct { .. })
    }
}

/// Counters of the CM (logged at shutdown).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CmStats {
    /// MADs that did not parse or arrived in error.
    pub(crate) bad_mads: u64,
    /// REQs for a port nobody listens on, rejected.
    pub(crate) unserved: u64,
    /// Events dropped because the client did not take them.
    pub(crate) dropped_events: u64,
    /// REQs held for a port's next listener (`relisten`).
    pub(crate) held: u64,
}

/// QP1 and every client's CM connections.
#[derive(Debug)]
pub(crate) struct Cm {
    local: IpAddr,
    cq: u32,
    lkey: u32,
    mem: Arc<VecRegion>,
    /// Listening `(port space, port)` to its client.
    listeners: BTreeMap<(u16, u16), u64>,
    /// REQs for ports given up a moment ago, waiting for the next listener.
    relisten: Relisten,
    /// `CmListen` requests granted.
    listens: u64,
    conns: BTreeMap<u32, Entry>,
    next_id: u32,
    events: HashMap<u64, VecDeque<CmEvent>>,
    pub(crate) stats: CmStats,
}

impl Cm {
    /// QP1 in RTS with its receives posted.
    pub(crate) fn new(
        engine: &mut Engine,
        local: IpAddr,
        now: Instant,
    ) -> Result<Self, VerbsError> {
        let pd = engine.alloc_pd();
        let len = u64::from(GSI_SLOTS * SLOT);
        let mem = Arc::new(VecRegion::new(len as usize));
        let keys = engine.reg_mr(pd, GSI_BASE, len, Access::LOCAL_WRITE, mem.clone())?;
        let cq = engine.create_cq(2 * GSI_SLOTS as usize + 256)?;
        let init = QpInit {
            qp_type: QpType::Ud,
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap {
                max_send_wr: 256,
                max_recv_wr: GSI_SLOTS,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: MAD_LEN as u32,
            },
        };
        engine.create_qp_with_qpn(init, GSI_QPN)?;
        let mut a = QpAttr {
            qp_state: QpState::Init,
            qkey: GSI_QKEY,
            ..QpAttr::default()
        };
        let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::QKEY;
        engine.modify_qp(GSI_QPN, &a, m)?;
        a.qp_state = QpState::Rtr;
        engine.modify_qp(GSI_QPN, &a, AttrMask::STATE)?;
        a.qp_state = QpState::Rts;
        engine.modify_qp(GSI_QPN, &a, AttrMask::STATE | AttrMask::SQ_PSN)?;
        let cm = Self {
            local,
            cq,
            lkey: keys.lkey,
            mem,
            listeners: BTreeMap::new(),
            relisten: Relisten::default(),
            listens: 0,
            conns: BTreeMap::new(),
            next_id: 1,
            events: HashMap::new(),
            stats: CmStats::default(),
        };
        for slot in 0..GSI_SLOTS {
            cm.post_recv(engine, now, slot)?;
        }
        Ok(cm)
    }

    fn post_recv(&self, engine: &mut Engine, now: Instant, slot: u32) -> Result<(), VerbsError> {
        let wr = RecvWr::new(
            u64::from(slot),
            [Sge {
                addr: GSI_BASE + u64::from(slot * SLOT),
                length: SLOT,
                lkey: self.lkey,
            }],
        );
        engine.post_recv(now, GSI_QPN, wr)
    }

    fn send(engine: &mut Engine, now: Instant, peer: IpAddr, mad: &Mad) {
        let mut b = vec![0u8; MAD_LEN];
        if mad.emit(&mut b).is_err() {
            return;
        }
        let mut wr = SendWr::new(GSI_SEND, SendOp::Send, []);
        wr.data = SendData::Inline(b);
        wr.ud = Some(UdDest {
            dest: peer,
            remote_qpn: GSI_QPN,
            remote_qkey: GSI_QKEY,
        });
        if let Err(e) = engine.post_send(now, GSI_QPN, wr) {
            tracing::warn!(%peer, "cannot send a CM MAD: {e}");
        }
    }

    fn new_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            if !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    fn event(&mut self, client: u64, kind: CmEventKind, id: u32, peer: IpAddr) -> &mut CmEvent {
        let q = self.events.entry(client).or_default();
        if q.len() >= MAX_EVENTS {
            q.pop_front();
            self.stats.dropped_events += 1;
        }
        q.push_back(CmEvent {
            kind,
            id,
            peer,
            port: 0,
            reason: 0,
            private_data: Vec::new(),
            ps: cma::PS_TCP,
            peer_port: 0,
            qkey: 0,
            conn: CmConn::default(),
        });
        q.back_mut().expect("just pushed")
    }

    /// Answers a CM request of `client`, whose QPs are `qps`.
    pub(crate) fn request(
        &mut self,
        client: u64,
        qps: ClientQps<'_>,
        engine: &mut Engine,
        now: Instant,
        req: Request,
    ) -> Response {
        let no_conn = || Response::error(libc::ENOENT, "no such CM connection");
        match req {
            Request::CmListen { ps, .. } if ps != cma::PS_TCP && ps != cma::PS_UDP => {
                Response::error(
                    libc::EPROTONOSUPPORT,
                    format!("port space {ps:#06x} is neither TCP (0x0106) nor UDP (0x0111)"),
                )
            }
            Request::CmListen { ps, port } => match self.listeners.get(&(ps, port)) {
                Some(&c) if c != client => {
                    Response::error(libc::EADDRINUSE, format!("rdma_cm port {port} is taken"))
                }
                _ => {
                    self.listeners.insert((ps, port), client);
                    self.listens += 1;
                    if ps == cma::PS_TCP {
                        for h in self.relisten.take(port) {
                            self.requested(engine, h, client);
                        }
                    }
                    Response::Done(kind::CM_LISTEN)
                }
            },
            Request::CmUnlisten { ps, port } => {
                if self.listeners.get(&(ps, port)) != Some(&client) {
                    return Response::error(libc::ENOENT, format!("not listening on {port}"));
                }
                self.listeners.remove(&(ps, port));
                if ps == cma::PS_TCP {
                    self.relisten.gave_up(port, now);
                }
                Response::Done(kind::CM_UNLISTEN)
            }
            Request::CmConnect {
                qpn,
                ud,
                addr,
                port,
                src_port,
                tos,
                private_data,
            } => {
                if !qps.holds(qpn) {
                    return Response::error(libc::ENOENT, "no such QP");
                }
                if addr.is_ipv4() != self.local.is_ipv4() {
                    return Response::error(libc::EAFNOSUPPORT, "address family differs");
                }
                let ud = match qps.direct() {
                    true => ud,
                    false => engine.qp_status(qpn).is_ok_and(|s| s.qp_type == QpType::Ud),
                };
                if ud {
                    let ports = (src_port, port);
                    return self.sidr_connect(client, engine, now, addr, ports, &private_data);
                }
                let mut pd = [0u8; rocex_cm::req::PRIVATE_DATA_LEN];
                let src_port = or_ephemeral(engine, src_port);
                let hdr = cma::Repr {
                    src_port,
                    src: self.local,
                    dst: addr,
                };
                if let Err(e) = hdr.emit(&mut cma::Hdr::new_unchecked(&mut pd[..])) {
                    return Response::error(libc::EINVAL, e.to_string());
                }
                let Some(user) = pd.get_mut(CMA_HDR_LEN..CMA_HDR_LEN + private_data.len()) else {
                    return Response::error(libc::EINVAL, "private data over 56 bytes");
                };
                user.copy_from_slice(&private_data);
                let p = ConnectParams {
                    qpn,
                    starting_psn: engine.random_psn(),
                    service_id: cma::service_id(cma::PS_TCP, port),
                    responder_resources: RD_ATOMIC,
                    initiator_depth: RD_ATOMIC,
                    retry_count: RETRY_COUNT,
                    rnr_retry_count: RNR_RETRY,
                    path_mtu: engine.config().port_mtu,
                    traffic_class: tos,
                    private_data: pd,
                };
                let id = self.new_id();
                let tid = u64::from(engine.random_psn()) << 24 | u64::from(engine.random_psn());
                let comm_id = engine.random_psn() << 8 ^ id;
                let c = Conn::connect(now, Local::at(self.local), addr, &p, tid, comm_id);
                self.conns.insert(
                    id,
                    Entry {
                        client,
                        peer: addr,
                        slot: Slot::Live {
                            conn: Box::new(c),
                            qpn,
                            direct: qps.direct(),
                        },
                    },
                );
                self.flush(engine, now, id);
                Response::CmConnect { id }
            }
            Request::CmAccept {
                id,
                qpn,
                qkey,
                private_data,
            } => {
                if !qps.holds(qpn) {
                    return Response::error(libc::ENOENT, "no such QP");
                }
                let Some(e) = self.conns.get(&id).filter(|e| e.client == client) else {
                    return no_conn();
                };
                if matches!(e.slot, Slot::SidrPending { .. }) {
                    let qkey = qps.direct().then_some(qkey);
                    return self.sidr_accept(engine, now, id, (qpn, qkey), &private_data);
                }
                let Slot::Pending { tid, ref req, psn } = e.slot else {
                    return Response::error(libc::EINVAL, "the connection is not a request");
                };
                let (peer, req) = (e.peer, **req);
                let mut rep_data = [0u8; rocex_cm::rep::PRIVATE_DATA_LEN];
                let Some(user) = rep_data.get_mut(..private_data.len()) else {
                    return Response::error(libc::EINVAL, "private data over 196 bytes");
                };
                user.copy_from_slice(&private_data);
                let mut p = accept_params(engine, psn);
                p.qpn = qpn;
                p.private_data = rep_data;
                let comm_id = engine.random_psn() << 8 ^ id;
                let accepted =
                    Conn::accept(now, Local::at(self.local), peer, tid, &req, &p, comm_id)
                        .and_then(|c| c.params().map(|params| (c, params)));
                let Some((c, params)) = accepted else {
                    self.refuse(engine, now, id, rej::REASON_CONSUMER, &[]);
                    return Response::error(libc::EINVAL, "the request's path MTU is invalid");
                };
                // A direct client readied its QP with the request's attributes before it
                // accepted.
                if let (false, Err(e)) = (qps.direct(), ready(engine, qpn, &params)) {
                    self.refuse(engine, now, id, rej::REASON_CONSUMER, &[]);
                    return Response::error(libc::EINVAL, format!("QP {qpn:#x}: {e}"));
                }
                if let Some(e) = self.conns.get_mut(&id) {
                    e.slot = Slot::Live {
                        conn: Box::new(c),
                        qpn,
                        direct: qps.direct(),
                    };
                }
                self.flush(engine, now, id);
                Response::Done(kind::CM_ACCEPT)
            }
            Request::CmReject { id, private_data } => {
                match self.conns.get(&id) {
                    Some(e) if e.client == client && matches!(e.slot, Slot::Pending { .. }) => {}
                    Some(e) if e.client == client && matches!(e.slot, Slot::SidrPending { .. }) => {
                        return self.sidr_reject(engine, now, id, &private_data);
                    }
                    _ => return no_conn(),
                }
                if private_data.len() > rej::PRIVATE_DATA_LEN {
                    return Response::error(libc::EINVAL, "private data over 148 bytes");
                }
                self.refuse(engine, now, id, rej::REASON_CONSUMER, &private_data);
                Response::Done(kind::CM_REJECT)
            }
            Request::CmDisconnect { id } => {
                let Some(e) = self.conns.get_mut(&id).filter(|e| e.client == client) else {
                    return no_conn();
                };
                if matches!(e.slot, Slot::SidrQuery(_)) {
                    // A SIDR exchange the client gave up (its id destroyed): its answer,
                    // if one still comes, has no one to go to.
                    self.conns.remove(&id);
                    return Response::Done(kind::CM_DISCONNECT);
                }
                let Slot::Live { conn, qpn, direct } = &mut e.slot else {
                    return Response::error(libc::EINVAL, "the connection is not up");
                };
                if !*direct {
                    pump::to_error(engine, *qpn);
                }
                conn.disconnect(now);
                self.flush(engine, now, id);
                Response::Done(kind::CM_DISCONNECT)
            }
            Request::CmEstablish { id } => {
                let Some(e) = self.conns.get_mut(&id).filter(|e| e.client == client) else {
                    return no_conn();
                };
                match &mut e.slot {
                    Slot::Live {
                        conn, direct: true, ..
                    } if conn.state() == State::RepRcvd => conn.establish(),
                    _ => {
                        return Response::error(
                            libc::EINVAL,
                            "the connection awaits no RTU (no ConnectResponse to answer)",
                        );
                    }
                }
                self.flush(engine, now, id);
                Response::Done(kind::CM_ESTABLISH)
            }
            Request::CmPoll => {
                Response::CmPoll(self.events.get_mut(&client).and_then(VecDeque::pop_front))
            }
            _ => Response::error(libc::EINVAL, "not a CM request"),
        }
    }

    /// Rejects the pending request `id` with `private_data` and forgets it.
    fn refuse(&mut self, engine: &mut Engine, now: Instant, id: u32, reason: u16, data: &[u8]) {
        if let Some(Entry {
            peer,
            slot: Slot::Pending { tid, req, .. },
            ..
        }) = self.conns.remove(&id)
        {
            Self::send(
                engine,
                now,
                peer,
                &conn::reject_with(tid, &req, reason, data),
            );
        }
    }

    /// Feeds the MADs QP1 received to their connections, runs the timers, acts on the
    /// connections' events and sends what they have to send; true when anything arrived.
    pub(crate) fn turn(&mut self, engine: &mut Engine, now: Instant) -> bool {
        let mut busy = false;
        while let Some(wc) = engine.poll_cq(self.cq) {
            if wc.wr_id == GSI_SEND {
                continue;
            }
            busy = true;
            let slot = wc.wr_id as u32;
            let mut bytes = [0u8; SLOT as usize];
            self.mem.read(u64::from(slot * SLOT), &mut bytes);
            if let Err(e) = self.post_recv(engine, now, slot) {
                tracing::warn!("cannot repost a QP1 receive: {e}");
            }
            if wc.status != WcStatus::Success || (wc.byte_len as usize) < SLOT as usize {
                self.stats.bad_mads += 1;
                continue;
            }
            let grh = bytes[..GRH_LEN].try_into().expect("a slot holds a GRH");
            let src = rocex_proto::grh_source(grh);
            match Mad::parse(&bytes[GRH_LEN..]) {
                Ok(m) => self.receive(engine, now, src, &m),
                Err(e) => {
                    self.stats.bad_mads += 1;
                    tracing::debug!(%src, "dropped a MAD: {e}");
                }
            }
        }
        for h in self.relisten.expired(now) {
            self.unserved(engine, now, h.src, h.tid, &h.req);
        }
        // Empty (no allocation) unless a retransmission or timeout is due.
        let due: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, e)| match &e.slot {
                Slot::Live { conn, .. } => conn.poll_timeout().is_some_and(|t| t <= now),
                Slot::SidrQuery(q) => q.poll_timeout().is_some_and(|t| t <= now),
                Slot::SidrAnswered { until, .. } => *until <= now,
                Slot::Pending { .. } | Slot::SidrPending { .. } => false,
            })
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            match self.conns.get_mut(&id).map(|e| &mut e.slot) {
                Some(Slot::Live { conn, .. }) => conn.handle_timeout(now),
                Some(Slot::SidrQuery(q)) => q.handle_timeout(now),
                Some(Slot::SidrAnswered { .. }) => {
                    self.conns.remove(&id);
                }
                _ => {}
            }
            self.flush(engine, now, id);
            busy = true;
        }
        busy
    }

    fn receive(&mut self, engine: &mut Engine, now: Instant, src: IpAddr, mad: &Mad) {
        if matches!(mad.msg, Message::SidrReq(_) | Message::SidrRep(_)) {
            return self.sidr_receive(engine, now, src, mad);
        }
        let owner = self
            .conns
            .iter_mut()
            .find_map(|(&id, e)| match &mut e.slot {
                Slot::Live { conn, .. } if conn.owns(src, mad) => {
                    conn.handle(now, mad);
                    Some(id)
                }
                Slot::Pending { req, .. } => match mad.msg {
                    Message::Req(r) if e.peer == src && r.local_comm_id == req.local_comm_id => {
                        Some(id)
                    }
                    _ => None,
                },
                Slot::SidrPending { .. } | Slot::SidrQuery(_) | Slot::SidrAnswered { .. } => None,
                Slot::Live { .. } => None,
            });
        if let Some(id) = owner {
            self.flush(engine, now, id);
            return;
        }
        let Message::Req(req) = mad.msg else { return };
        let target = conn::rdma_cm_target(&req)
            .filter(|&(ps, _, hdr)| ps == cma::PS_TCP && hdr.src == src)
            .filter(|_| req.transport_service_type == 0);
        let Some((_, port, hdr)) = target else {
            return self.unserved(engine, now, src, mad.tid, &req);
        };
        let held = Held {
            until: now + GRACE,
            src,
            tid: mad.tid,
            req: Box::new(req),
            port,
            hdr,
        };
        match self.listeners.get(&(cma::PS_TCP, port)) {
            Some(&client) => self.requested(engine, held, client),
            None if self.relisten.hold(now, held) => self.stats.held += 1,
            None => self.unserved(engine, now, src, mad.tid, &req),
        }
    }

    /// A REQ for a port nobody listens on: REJ, reason 8 (invalid service ID).
    fn unserved(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        src: IpAddr,
        tid: u64,
        req: &ReqRepr,
    ) {
        self.stats.unserved += 1;
        let rej = conn::reject(tid, req, rej::REASON_INVALID_SERVICE_ID);
        Self::send(engine, now, src, &rej);
    }

    /// A REQ for `client`'s listener: a pending request and its `ConnectRequest` event.
    fn requested(&mut self, engine: &mut Engine, h: Held, client: u64) {
        let Held {
            src,
            tid,
            req,
            port,
            hdr,
            ..
        } = h;
        let req = *req;
        let id = self.new_id();
        let psn = engine.random_psn();
        let settled = QpParams::for_passive(src, &req, &accept_params(engine, psn));
        self.conns.insert(
            id,
            Entry {
                client,
                peer: src,
                slot: Slot::Pending {
                    tid,
                    req: Box::new(req),
                    psn,
                },
            },
        );
        let ev = self.event(client, CmEventKind::ConnectRequest, id, src);
        ev.port = port;
        ev.peer_port = hdr.src_port;
        ev.conn = settled.map(|p| conn_info(&p)).unwrap_or_default();
        ev.private_data = req.private_data[CMA_HDR_LEN..][..CM_PRIVATE_DATA_LEN].to_vec();
    }

    /// Acts on connection `id`'s events, sends its MADs, forgets it once closed.
    fn flush(&mut self, engine: &mut Engine, now: Instant, id: u32) {
        let Some(e) = self.conns.get_mut(&id) else {
            return;
        };
        let (client, peer) = (e.client, e.peer);
        let Slot::Live { conn, qpn, direct } = &mut e.slot else {
            return self.flush_sidr(engine, now, id);
        };
        let (qpn, direct) = (*qpn, *direct);
        let mut out: Vec<(CmEventKind, u16, Vec<u8>)> = Vec::new();
        let mut response = None;
        let mut failed = false;
        while !failed {
            while let Some(m) = conn.poll_transmit() {
                Self::send(engine, now, peer, &m);
            }
            let Some(ev) = conn.poll_event() else { break };
            match ev {
                // The client moves its own QP, then answers with `CmEstablish`.
                Event::Reply(params) if direct => {
                    response = Some(conn_info(&params));
                    out.push((CmEventKind::ConnectResponse, 0, Vec::new()));
                }
                Event::Reply(params) => match ready(engine, qpn, &params) {
                    Ok(()) => conn.establish(),
                    Err(err) => {
                        tracing::debug!(qpn, "cannot ready the QP: {err}");
                        // The peer's REP retries end in its own timeout.
                        out.push((CmEventKind::Rejected, rej::REASON_CONSUMER, Vec::new()));
                        failed = true;
                    }
                },
                // The REP's private data on the connecting side (the passive side's RTU
                // brings none), the REJ's on a refusal, as the kernel's rdma_cm gives them.
                Event::Established => {
                    let data = conn.peer_private_data().to_vec();
                    out.push((CmEventKind::Established, 0, data));
                }
                Event::Rejected(r) => {
                    out.push((CmEventKind::Rejected, r, conn.peer_private_data().to_vec()));
                }
                Event::TimedOut => out.push((CmEventKind::Unreachable, 0, Vec::new())),
                Event::Disconnected => {
                    if !direct {
                        pump::to_error(engine, qpn);
                    }
                    out.push((CmEventKind::Disconnected, 0, Vec::new()));
                }
            }
        }
        if failed || conn.state() == State::Closed {
            self.conns.remove(&id);
        }
        let settled = self.conns.get(&id).and_then(|e| match &e.slot {
            Slot::Live { conn, .. } => conn.params(),
            _ => None,
        });
        for (kind, reason, data) in out {
            let ev = self.event(client, kind, id, peer);
            ev.reason = reason;
            ev.private_data = data;
            match kind {
                CmEventKind::Established => {
                    ev.conn = settled.map(|p| conn_info(&p)).unwrap_or_default();
                }
                CmEventKind::ConnectResponse => ev.conn = response.unwrap_or_default(),
                _ => {}
            }
        }
    }

    /// `rdma_listen`s taken, in both port spaces (`rocex stat`'s `daemon.cm_listens`): a
    /// program listens once this has counted its request.
    pub(crate) fn listens(&self) -> u64 {
        self.listens
    }

    /// Forgets a client that went away: its listeners and requests, its connections
    /// (their QPs are destroyed with the client; the peers get a DREQ).
    pub(crate) fn forget(&mut self, engine: &mut Engine, now: Instant, client: u64) {
        self.listeners.retain(|_, c| *c != client);
        self.events.remove(&client);
        let ids: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, e)| e.client == client)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            match self.conns.get_mut(&id).map(|e| &mut e.slot) {
                Some(Slot::Pending { .. }) => {
                    self.refuse(engine, now, id, rej::REASON_CONSUMER, &[]);
                }
                Some(Slot::SidrPending { .. }) => {
                    self.sidr_reject(engine, now, id, &[]);
                }
                Some(Slot::SidrQuery(_) | Slot::SidrAnswered { .. }) => {
                    self.conns.remove(&id);
                }
                Some(Slot::Live { conn, .. }) => {
                    conn.disconnect(now);
                    while let Some(m) = conn.poll_transmit() {
                        Self::send(engine, now, conn.peer(), &m);
                    }
                    self.conns.remove(&id);
                }
                None => {}
            }
        }
    }
}

/// The connecting side's rdma_cm port, or one the daemon picks when the client gave none.
fn or_ephemeral(engine: &mut Engine, port: u16) -> u16 {
    if port != 0 {
        return port;
    }
    0xc000 | (engine.random_psn() as u16 & 0x3fff)
}

/// What the passive side answers a REQ with: the device's limits and `psn`, no QP or
/// private data yet.
fn accept_params(engine: &Engine, psn: u32) -> AcceptParams {
    AcceptParams {
        qpn: 0,
        starting_psn: psn,
        responder_resources: RD_ATOMIC,
        initiator_depth: RD_ATOMIC,
        rnr_retry_count: RNR_RETRY,
        max_mtu: engine.config().port_mtu,
        private_data: [0; rocex_cm::rep::PRIVATE_DATA_LEN],
    }
}

/// The attributes of `p` as a client's event carries them.
fn conn_info(p: &QpParams) -> CmConn {
    CmConn {
        remote_qpn: p.remote_qpn,
        sq_psn: p.sq_psn,
        rq_psn: p.rq_psn,
        path_mtu: p.path_mtu as u8,
        max_rd_atomic: p.max_rd_atomic,
        max_dest_rd_atomic: p.max_dest_rd_atomic,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        timeout: p.timeout,
        traffic_class: p.traffic_class,
    }
}

/// INIT → RTR → RTS with the connection's attributes, from where the QP stands.
fn ready(engine: &mut Engine, qpn: u32, p: &QpParams) -> Result<(), VerbsError> {
    engine.ready_rc(qpn, p.rtr(), p.rts())
}
