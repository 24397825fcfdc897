//! rdma_cm through the daemon (`docs/abi.md` §6.5): the daemon runs the CM on its QP1,
//! sends and answers the MADs and moves the QPs; this end names QPs and connections and
//! takes the events. A direct context's QPs live in this process's engine, so this end
//! moves them with the attributes the CM settled (`direct::cm`), and answers a
//! `ConnectResponse` with `CmEstablish` inside [`Context::cm_poll_event`].

use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use rocex_shm::control::{
    CM_REJ_PRIVATE_DATA_LEN, CM_REP_PRIVATE_DATA_LEN, CM_SIDR_PRIVATE_DATA_LEN, CmEvent, Request,
    Response,
};

use crate::channel::Channel;
use crate::direct::Seen;
use crate::{Context, Dev, Error, Qp, Result, proto};

/// rdma_cm's TCP port space (`RDMA_PS_TCP`).
const PS_TCP: u16 = 0x0106;

/// The longest sleep between two event polls of [`Context::cm_wait_event`].
const MAX_NAP: Duration = Duration::from_millis(5);

impl Context {
    /// `rdma_listen` on rdma_cm `port` (TCP port space): REQs for it become
    /// [`CmEventKind::ConnectRequest`](crate::CmEventKind::ConnectRequest) events.
    pub fn cm_listen(&self, port: u16) -> Result<()> {
        self.cm_listen_in(PS_TCP, port)
    }

    /// `rdma_listen` on `port` of rdma_cm port space `ps` (`RDMA_PS_TCP` 0x0106: REQs;
    /// `RDMA_PS_UDP` 0x0111: SIDR requests).
    pub fn cm_listen_in(&self, ps: u16, port: u16) -> Result<()> {
        self.cm_channel("rdma_listen")?
            .done(&Request::CmListen { ps, port })
    }

    /// Gives up rdma_cm `port` ([`cm_listen`](Self::cm_listen)): REQs for it are rejected
    /// (reason 8, invalid service ID) as for a port nobody listens on.
    pub fn cm_unlisten(&self, port: u16) -> Result<()> {
        self.cm_unlisten_in(PS_TCP, port)
    }

    /// [`cm_unlisten`](Self::cm_unlisten) in port space `ps`.
    pub fn cm_unlisten_in(&self, ps: u16, port: u16) -> Result<()> {
        self.cm_channel("rdma_cm")?
            .done(&Request::CmUnlisten { ps, port })
    }

    /// `rdma_connect`: connects `qp` (an RC QP in INIT) to the listener at `addr`:`port`
    /// with up to 56 bytes of `private_data`. Returns the connection's id at once; the
    /// outcome is an `Established`, `Rejected` or `Unreachable` event with that id.
    pub fn cm_connect(&self, qp: &Qp, addr: IpAddr, port: u16, private_data: &[u8]) -> Result<u32> {
        self.cm_connect_with(qp, addr, port, 0, 0, private_data)
    }

    /// [`cm_connect`](Self::cm_connect) from rdma_cm port `src_port` (0: the daemon picks
    /// one) with traffic class `tos` on the path (both QPs' packets carry it). For a UD QP
    /// this resolves the UD service at `addr`:`port` (SIDR, with up to 180 bytes of
    /// private data): `Established` carries its QPN and Q_Key.
    pub fn cm_connect_with(
        &self,
        qp: &Qp,
        addr: IpAddr,
        port: u16,
        src_port: u16,
        tos: u8,
        private_data: &[u8],
    ) -> Result<u32> {
        too_long(private_data, CM_SIDR_PRIVATE_DATA_LEN, "a SIDR_REQ")?;
        let qpn = qp.qpn();
        let req = Request::CmConnect {
            qpn,
            // rocexd reads it of its own QPs.
            ud: match &self.dev {
                Dev::Direct(h) => h.is_ud(qpn)?,
                Dev::Daemon(_) => false,
            },
            addr,
            port,
            src_port,
            tos,
            private_data: private_data.to_vec(),
        };
        match self.cm_channel("rdma_connect")?.call(&req, &[])?.0 {
            Response::CmConnect { id } => {
                if let Dev::Direct(h) = &self.dev {
                    h.cm_connecting(id, qpn, addr);
                }
                Ok(id)
            }
            r => Err(proto(format!("unexpected {r:?}"))),
        }
    }

    /// `rdma_accept`: answers the request `id` with `qp` (an RC QP in INIT), which the
    /// daemon (or on a direct context this end) moves to RTS before the REP leaves;
    /// `Established` follows the peer's RTU.
    pub fn cm_accept(&self, id: u32, qp: &Qp) -> Result<()> {
        self.cm_accept_with(id, qp, &[])
    }

    /// [`cm_accept`](Self::cm_accept) with up to 196 bytes of `private_data` in the REP,
    /// which the peer's `Established` event carries.
    pub fn cm_accept_with(&self, id: u32, qp: &Qp, private_data: &[u8]) -> Result<()> {
        too_long(private_data, CM_REP_PRIVATE_DATA_LEN, "a REP")?;
        let private_data = private_data.to_vec();
        let ch = self.cm_channel("rdma_accept")?;
        let qpn = qp.qpn();
        // rocexd reads its own QPs' Q_Key.
        let qkey = match &self.dev {
            Dev::Direct(h) => h.cm_accepting(id, qpn)?,
            Dev::Daemon(_) => 0,
        };
        ch.done(&Request::CmAccept {
            id,
            qpn,
            qkey,
            private_data,
        })
    }

    /// `rdma_reject`: refuses the request `id` (REJ, consumer reason).
    pub fn cm_reject(&self, id: u32) -> Result<()> {
        self.cm_reject_with(id, &[])
    }

    /// [`cm_reject`](Self::cm_reject) with up to 148 bytes of `private_data` in the REJ,
    /// which the peer's `Rejected` event carries.
    pub fn cm_reject_with(&self, id: u32, private_data: &[u8]) -> Result<()> {
        too_long(private_data, CM_REJ_PRIVATE_DATA_LEN, "a REJ")?;
        let private_data = private_data.to_vec();
        self.cm_channel("rdma_reject")?
            .done(&Request::CmReject { id, private_data })?;
        if let Dev::Direct(h) = &self.dev {
            h.cm_forget(id);
        }
        Ok(())
    }

    /// `rdma_disconnect`: moves the connection's QP to ERROR and sends a DREQ; both ends
    /// get a `Disconnected` event.
    pub fn cm_disconnect(&self, id: u32) -> Result<()> {
        let ch = self.cm_channel("rdma_disconnect")?;
        if let Dev::Direct(h) = &self.dev {
            h.cm_disconnecting(id)?;
        }
        ch.done(&Request::CmDisconnect { id })
    }

    /// The next CM event, if one is waiting. On a direct context a `ConnectResponse` is
    /// answered here (the QP moved to RTS, then `CmEstablish`), never returned.
    pub fn cm_poll_event(&self) -> Result<Option<CmEvent>> {
        let ch = self.cm_channel("rdma_cm events")?;
        loop {
            let mut e = match ch.call(&Request::CmPoll, &[])?.0 {
                Response::CmPoll(e) => e,
                r => return Err(proto(format!("unexpected {r:?}"))),
            };
            let (Some(ev), Dev::Direct(h)) = (&mut e, &self.dev) else {
                return Ok(e);
            };
            match h.cm_event(ev) {
                Seen::Pass => return Ok(e),
                Seen::Establish => ch.done(&Request::CmEstablish { id: ev.id })?,
            }
        }
    }

    /// The connection to rocexd that CM requests go through: a direct context's own, which
    /// holds its grant. An engine started without a daemon has no CM.
    fn cm_channel(&self, what: &'static str) -> Result<&Channel> {
        match &self.dev {
            Dev::Daemon(ch) => Ok(ch),
            Dev::Direct(h) => h.ctl.as_ref().ok_or(Error::Unsupported {
                what,
                why: "rdma_cm runs in rocexd, and this engine was started without one",
            }),
        }
    }

    /// Waits up to `timeout` for the next CM event ([`Error::Timeout`] if none comes),
    /// polling the daemon with short sleeps in between.
    pub fn cm_wait_event(&self, timeout: Duration) -> Result<CmEvent> {
        let end = Instant::now() + timeout;
        let mut nap = Duration::from_micros(100);
        loop {
            if let Some(e) = self.cm_poll_event()? {
                return Ok(e);
            }
            let now = Instant::now();
            if now >= end {
                return Err(Error::Timeout);
            }
            std::thread::sleep(nap.min(end - now));
            nap = (nap * 2).min(MAX_NAP);
        }
    }
}

/// `EINVAL` (as an I/O error) when `private_data` is longer than `what` carries (`max`).
fn too_long(private_data: &[u8], max: usize, what: &str) -> Result<()> {
    if private_data.len() > max {
        return Err(Error::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} bytes of private data; {what} carries at most {max}",
                private_data.len()
            ),
        )));
    }
    Ok(())
}
