//! Connecting through rdma_cm: the daemon's CM sends the REQ, REP and RTU and moves the
//! QPs ([`CmListener`], [`Connection::connect_cm`]); the [`Connection`] afterwards is the
//! same as over the TCP exchange.
//!
//! The REQ's private data carries the client's exchange [`Params`] message; the CM settles
//! QPNs, PSNs, MTU and READ depths. The REP carries no private data, so both ends use the
//! client's receive buffer size: the listener sizes its buffers from the REQ.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use rocex_verbs::{CmEvent, CmEventKind};

use crate::connect::{Config, Endpoint};
use crate::connection::{Connection, Link};
use crate::device::Device;
use crate::error::Result;
use crate::exchange::{self, HandshakeError, Message, Params};

/// Accepts rdma_cm connections on one port of its device's daemon.
#[derive(Debug)]
pub struct CmListener {
    device: Device,
    port: u16,
    config: Config,
}

impl CmListener {
    /// Listens on rdma_cm `port` (TCP port space) of `device`.
    pub fn bind(device: &Device, port: u16) -> Result<Self> {
        Self::bind_with(device, port, Config::default())
    }

    /// [`CmListener::bind`] with `config` for every accepted connection (its
    /// `recv_size` is the client's).
    pub fn bind_with(device: &Device, port: u16, config: Config) -> Result<Self> {
        device.inner.ctx.cm_listen(port)?;
        Ok(Self {
            device: device.clone(),
            port,
            config,
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Waits for the next connection request and accepts it; a request whose private data
    /// is not a rocex client's is rejected and the wait goes on.
    pub fn accept(&self) -> Result<Connection> {
        let ctx = &self.device.inner.ctx;
        loop {
            let req = wait(&self.device, None, None, CmEventKind::ConnectRequest)?;
            let Ok(client) = client_params(&req.private_data) else {
                ctx.cm_reject(req.id)?;
                continue;
            };
            let config = Config {
                recv_size: client.recv_size,
                ..self.config
            };
            let ep = Endpoint::new(&self.device, &config)?;
            ctx.cm_accept(req.id, ep.qp())?;
            let t = Instant::now() + config.handshake_timeout;
            let up = wait(
                &self.device,
                Some(req.id),
                Some(t),
                CmEventKind::Established,
            );
            if up.is_err() {
                let _ = ctx.cm_disconnect(req.id);
            }
            up?;
            let link = Link::Cm {
                id: req.id,
                peer: SocketAddr::new(req.peer, 0),
            };
            return ep_connection(ep, client.recv_size, link);
        }
    }
}

impl Connection {
    /// Connects through rdma_cm to the [`CmListener`] at `addr`:`port`.
    pub fn connect_cm(device: &Device, addr: IpAddr, port: u16) -> Result<Self> {
        Self::connect_cm_with(device, addr, port, Config::default())
    }

    /// [`Connection::connect_cm`] with `config`.
    pub fn connect_cm_with(
        device: &Device,
        addr: IpAddr,
        port: u16,
        config: Config,
    ) -> Result<Self> {
        let ep = Endpoint::new(device, &config)?;
        let hello = Message::Params(ep.ours).to_bytes();
        let ctx = &device.inner.ctx;
        let id = ctx.cm_connect(ep.qp(), addr, port, &hello)?;
        let t = Instant::now() + config.handshake_timeout;
        let ev = wait(device, Some(id), Some(t), CmEventKind::Established);
        if matches!(ev, Err(crate::Error::Handshake(HandshakeError::Timeout))) {
            let _ = ctx.cm_disconnect(id);
        }
        ev?;
        let link = Link::Cm {
            id,
            peer: SocketAddr::new(addr, port),
        };
        ep_connection(ep, config.recv_size, link)
    }
}

/// The next `want` event of `device` (of connection `id`, if given), or the rejection,
/// unreachable peer or deadline that ends the handshake. Other events are dropped: the
/// library runs one rdma_cm handshake at a time per device, and a connection learns of
/// its end from its QP, which the peer's DREQ moves to ERROR.
fn wait(
    device: &Device,
    id: Option<u32>,
    until: Option<Instant>,
    want: CmEventKind,
) -> Result<CmEvent> {
    let ctx = &device.inner.ctx;
    loop {
        let left = match until {
            Some(t) => t.saturating_duration_since(Instant::now()),
            None => std::time::Duration::from_secs(3600),
        };
        let e = match ctx.cm_wait_event(left) {
            Ok(e) => e,
            Err(rocex_verbs::Error::Timeout) if until.is_some() => {
                return Err(HandshakeError::Timeout.into());
            }
            Err(rocex_verbs::Error::Timeout) => continue,
            Err(e) => return Err(e.into()),
        };
        if id.is_some_and(|id| id != e.id) {
            continue;
        }
        match e.kind {
            k if k == want => return Ok(e),
            CmEventKind::Rejected => {
                return Err(HandshakeError::Rejected { reason: e.reason }.into());
            }
            CmEventKind::Unreachable => return Err(HandshakeError::Timeout.into()),
            _ => {}
        }
    }
}

/// The client's parameters from a REQ's private data.
fn client_params(pd: &[u8]) -> std::result::Result<Params, HandshakeError> {
    let h: &[u8; exchange::HEADER_LEN] = pd
        .get(..exchange::HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(HandshakeError::Closed)?;
    let (k, len) = Message::parse_header(h)?;
    let body = pd
        .get(exchange::HEADER_LEN..exchange::HEADER_LEN + len)
        .ok_or(HandshakeError::Closed)?;
    Message::parse_body(k, body)?.params()
}

/// The connection over `ep`, whose QP the daemon brought to RTS; the peer's parameters
/// as the QP holds them.
fn ep_connection(ep: Endpoint, recv_size: u32, link: Link) -> Result<Connection> {
    let (attr, _) = ep.qp().query()?;
    let peer = Params {
        qpn: attr.dest_qp_num,
        psn: attr.rq_psn,
        gid: match attr.ah_attr.map(|a| a.dest) {
            Some(IpAddr::V4(a)) => a.to_ipv6_mapped().octets(),
            Some(IpAddr::V6(a)) => a.octets(),
            None => [0; 16],
        },
        mtu: attr.path_mtu,
        rd_atomic: attr.max_dest_rd_atomic,
        recv_size,
    };
    Ok(ep.into_connection(peer, link))
}
