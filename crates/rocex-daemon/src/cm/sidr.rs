//! rdma_cm over UD for the daemon's clients: Service ID Resolution (IBTA Vol. 1 §12.11).
//! A `CmConnect` of a UD QP sends a SIDR_REQ for the UDP port space's service ID with
//! rdma_cm's address header, and the SIDR_REP becomes the client's `Established` (the
//! service's QPN and Q_Key) or `Unreachable` (a refusal's status, or no answer). A SIDR_REQ
//! for a port a client listens on in the UDP port space becomes its `ConnectRequest`;
//! `CmAccept` answers with the QPN and Q_Key of the client's UD QP, `CmReject` with status
//! 2 (rejected), and a port nobody listens on gets status 1 (service ID not supported), as
//! the kernel's `cm_sidr_req_handler` answers. No QP changes state: a UD QP is in RTS
//! before it asks or answers.

use std::net::IpAddr;

use rocex_cm::query::{self, Outcome, Query};
use rocex_cm::{Mad, Message, SidrReqRepr, cma, conn, sidr};
use rocex_proto::verbs::QpType;
use rocex_proto::{Engine, Instant};
use rocex_shm::control::{
    CM_SIDR_PRIVATE_DATA_LEN, CM_SIDR_REP_PRIVATE_DATA_LEN, CmEventKind, Response, kind,
};

use super::{CMA_HDR_LEN, Cm, Entry, Slot};

impl Cm {
    /// `CmConnect` of a UD QP: the SIDR_REQ from rdma_cm port `ports.0` (0: one the
    /// daemon picks) for `addr`:`ports.1`, with `private_data` after rdma_cm's header.
    pub(super) fn sidr_connect(
        &mut self,
        client: u64,
        engine: &mut Engine,
        now: Instant,
        addr: IpAddr,
        (src_port, port): (u16, u16),
        private_data: &[u8],
    ) -> Response {
        let mut pd = [0u8; sidr::REQ_PRIVATE_DATA_LEN];
        let hdr = cma::Repr {
            src_port: super::or_ephemeral(engine, src_port),
            src: self.local,
            dst: addr,
        };
        if let Err(e) = hdr.emit(&mut cma::Hdr::new_unchecked(&mut pd[..])) {
            return Response::error(libc::EINVAL, e.to_string());
        }
        let Some(user) = pd.get_mut(CMA_HDR_LEN..CMA_HDR_LEN + private_data.len()) else {
            return Response::error(
                libc::EINVAL,
                format!("private data over {CM_SIDR_PRIVATE_DATA_LEN} bytes"),
            );
        };
        user.copy_from_slice(private_data);
        let id = self.new_id();
        let tid = u64::from(engine.random_psn()) << 24 | u64::from(engine.random_psn());
        let request_id = engine.random_psn() << 8 ^ id;
        let service_id = cma::service_id(cma::PS_UDP, port);
        let q = Query::start(now, addr, service_id, pd, tid, request_id);
        self.conns.insert(
            id,
            Entry {
                client,
                peer: addr,
                slot: Slot::SidrQuery(Box::new(q)),
            },
        );
        self.flush(engine, now, id);
        Response::CmConnect { id }
    }

    /// `CmAccept` of SIDR request `id` with the client's UD QP `qpn`: the SIDR_REP with its
    /// QPN and Q_Key and up to 136 bytes of private data. The Q_Key is the client's word
    /// for a direct client's QP (`Some`), else read from rocexd's engine.
    pub(super) fn sidr_accept(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        id: u32,
        (qpn, said): (u32, Option<u32>),
        private_data: &[u8],
    ) -> Response {
        if let Some(refused) = over_rep_private_data(private_data) {
            return refused;
        }
        let ud = said.is_some() || engine.qp_status(qpn).is_ok_and(|s| s.qp_type == QpType::Ud);
        let qkey = said.map_or_else(|| engine.query_qp(qpn).map(|(a, _)| a.qkey), Ok);
        let (true, Ok(qkey)) = (ud, qkey) else {
            return Response::error(libc::EINVAL, format!("QP {qpn:#x} is not a UD QP"));
        };
        self.answer(engine, now, id, sidr::STATUS_OK, qpn, qkey, private_data);
        Response::Done(kind::CM_ACCEPT)
    }

    /// `CmReject` of SIDR request `id`: a SIDR_REP with status 2 (rejected), as the kernel's
    /// rdma_cm answers `rdma_reject` on a UD id.
    pub(super) fn sidr_reject(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        id: u32,
        private_data: &[u8],
    ) -> Response {
        if let Some(refused) = over_rep_private_data(private_data) {
            return refused;
        }
        self.answer(engine, now, id, sidr::STATUS_REJECT, 0, 0, private_data);
        Response::Done(kind::CM_REJECT)
    }

    /// Sends the SIDR_REP for pending request `id` and keeps it for the request's repeats
    /// for one retry interval.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        id: u32,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) {
        let Some(e) = self.conns.get_mut(&id) else {
            return;
        };
        let Slot::SidrPending { tid, req } = &e.slot else {
            return;
        };
        let rep = query::answer(*tid, req, status, qpn, qkey, private_data);
        Self::send(engine, now, e.peer, &rep);
        e.slot = Slot::SidrAnswered {
            request_id: req.request_id,
            rep: Box::new(rep),
            until: now + conn::timeout(conn::CM_RESPONSE_TIMEOUT),
        };
    }

    /// A SIDR_REQ or SIDR_REP from `src`.
    pub(super) fn sidr_receive(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        src: IpAddr,
        mad: &Mad,
    ) {
        match mad.msg {
            Message::SidrRep(_) => {
                let owner = self
                    .conns
                    .iter_mut()
                    .find_map(|(&id, e)| match &mut e.slot {
                        Slot::SidrQuery(q) if q.owns(src, mad) => {
                            q.handle(mad);
                            Some(id)
                        }
                        _ => None,
                    });
                if let Some(id) = owner {
                    self.flush(engine, now, id);
                }
            }
            Message::SidrReq(req) => self.sidr_request(engine, now, src, mad.tid, &req),
            _ => {}
        }
    }

    /// A SIDR_REQ: a repeat is answered again (or left to the pending request), a new one
    /// for a listened port becomes the listener's `ConnectRequest`, any other is refused.
    fn sidr_request(
        &mut self,
        engine: &mut Engine,
        now: Instant,
        src: IpAddr,
        tid: u64,
        req: &SidrReqRepr,
    ) {
        let repeat = self.conns.values().find_map(|e| match &e.slot {
            Slot::SidrPending { req: r, .. } if e.peer == src && r.request_id == req.request_id => {
                Some(None)
            }
            Slot::SidrAnswered {
                request_id, rep, ..
            } if e.peer == src && *request_id == req.request_id => Some(Some(**rep)),
            _ => None,
        });
        match repeat {
            Some(Some(rep)) => return Self::send(engine, now, src, &rep),
            Some(None) => return,
            None => {}
        }
        let hdr = cma::Repr::parse(&cma::Hdr::new_unchecked(&req.private_data[..]));
        let target = cma::port_of(req.service_id)
            .zip(hdr.ok())
            .filter(|&((ps, _), hdr)| ps == cma::PS_UDP && hdr.src == src)
            .and_then(|((_, port), hdr)| {
                Some((port, hdr, *self.listeners.get(&(cma::PS_UDP, port))?))
            });
        let Some((port, hdr, client)) = target else {
            self.stats.unserved += 1;
            let rep = query::answer(tid, req, sidr::STATUS_UNSUPPORTED, 0, 0, &[]);
            return Self::send(engine, now, src, &rep);
        };
        let id = self.new_id();
        self.conns.insert(
            id,
            Entry {
                client,
                peer: src,
                slot: Slot::SidrPending {
                    tid,
                    req: Box::new(*req),
                },
            },
        );
        let ev = self.event(client, CmEventKind::ConnectRequest, id, src);
        ev.port = port;
        ev.ps = cma::PS_UDP;
        ev.peer_port = hdr.src_port;
        ev.private_data = req.private_data[CMA_HDR_LEN..].to_vec();
    }

    /// Sends what SIDR exchange `id` has to send and turns its outcome into the client's
    /// event: `Established` with the service's QPN, Q_Key and the SIDR_REP's private data,
    /// or `Unreachable` with a refusal's status (0 when no answer came).
    pub(super) fn flush_sidr(&mut self, engine: &mut Engine, now: Instant, id: u32) {
        let Some(e) = self.conns.get_mut(&id) else {
            return;
        };
        let (client, peer) = (e.client, e.peer);
        let Slot::SidrQuery(q) = &mut e.slot else {
            return;
        };
        while let Some(m) = q.poll_transmit() {
            Self::send(engine, now, peer, &m);
        }
        let Some(outcome) = q.poll_outcome() else {
            return;
        };
        self.conns.remove(&id);
        let (kind, rep) = match outcome {
            Outcome::Resolved(rep) => (CmEventKind::Established, Some(rep)),
            Outcome::Refused(rep) => (CmEventKind::Unreachable, Some(rep)),
            Outcome::TimedOut => (CmEventKind::Unreachable, None),
        };
        let ev = self.event(client, kind, id, peer);
        ev.ps = cma::PS_UDP;
        if let Some(rep) = rep {
            ev.private_data = rep.private_data.to_vec();
            if kind == CmEventKind::Established {
                ev.qkey = rep.qkey;
                ev.conn.remote_qpn = rep.qpn;
            } else {
                ev.reason = rep.status.into();
            }
        }
    }
}

/// The refusal of more private data than a SIDR_REP carries.
fn over_rep_private_data(private_data: &[u8]) -> Option<Response> {
    (private_data.len() > CM_SIDR_REP_PRIVATE_DATA_LEN).then(|| {
        Response::error(
            libc::EINVAL,
            format!("private data over {CM_SIDR_REP_PRIVATE_DATA_LEN} bytes"),
        )
    })
}
