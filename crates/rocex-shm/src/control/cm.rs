//! Connection-manager fields: peer addresses, private data, and the events `CmPoll` returns.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rocex_verbs_types::{AddressVector, Mtu, QpAttr};

use super::codec::{BodyError, Get, Put, read_fields};

/// Most private-data bytes a `CmConnect` carries: a REQ's 92 less rdma_cm's 36-byte
/// address header.
pub const CM_PRIVATE_DATA_LEN: usize = 56;
/// Most private-data bytes a `CmConnect` of a UD QP carries: a SIDR_REQ's 216 less
/// rdma_cm's header (the kernel's `RDMA_MAX_UDP_PRIVATE_DATA`).
pub const CM_SIDR_PRIVATE_DATA_LEN: usize = 180;
/// Most private-data bytes a `CmAccept` of a SIDR request carries: a SIDR_REP's.
pub const CM_SIDR_REP_PRIVATE_DATA_LEN: usize = 136;
/// Most private-data bytes a `CmAccept` carries: a REP's, in which rdma_cm puts no header.
pub const CM_REP_PRIVATE_DATA_LEN: usize = 196;
/// Most private-data bytes a `CmReject` carries: a REJ's.
pub const CM_REJ_PRIVATE_DATA_LEN: usize = 148;

pub(super) fn put_addr(p: &mut Put, a: IpAddr) {
    match a {
        IpAddr::V4(v4) => p.u8(4).bytes(&v4.octets()).bytes(&[0; 12]),
        IpAddr::V6(v6) => p.u8(6).bytes(&v6.octets()),
    };
}

pub(super) fn get_addr(g: &mut Get<'_>) -> Result<IpAddr, BodyError> {
    let fam = g.u8("family")?;
    let a: [u8; 16] = g.arr("addr")?;
    match fam {
        4 if a[4..] == [0; 12] => Ok(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
        6 => Ok(IpAddr::V6(Ipv6Addr::from(a))),
        _ => Err(g.bad("family", fam.into())),
    }
}

/// Private data of at most `max` bytes (the rest is cut off), after its length.
pub(super) fn put_private(p: &mut Put, d: &[u8], max: usize) {
    let d = &d[..d.len().min(max)];
    p.u8(d.len() as u8).bytes(d);
}

/// Private data of at most `max` bytes; a longer length is malformed.
pub(super) fn get_private(g: &mut Get<'_>, max: usize) -> Result<Vec<u8>, BodyError> {
    let n = g.u8("private_data_len")?;
    if usize::from(n) > max {
        return Err(g.bad("private_data_len", n.into()));
    }
    Ok(g.take(n.into(), "private_data")?.to_vec())
}

/// The RNR NAK timer a connected QP advertises (12: 0.64 ms), as rdma_cm sets it
/// (`cm_init_qp_rtr_attr`).
const MIN_RNR_TIMER: u8 = 12;

/// What happened to a CM connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEventKind {
    /// A REQ for a port the client listens on: accept or reject it.
    ConnectRequest = 1,
    /// The connection is up: the QP is in RTS.
    Established = 2,
    /// The peer rejected the connection (`reason`, IBTA table 112; 8: nobody listens).
    Rejected = 3,
    /// The peer never answered.
    Unreachable = 4,
    /// The connection ended (either side's DREQ); the QP is in ERROR (a direct client's
    /// own engine moves it there).
    Disconnected = 5,
    /// The peer accepted (REP) a connection of a direct client's QP: the client moves the
    /// QP to RTR and RTS with `conn`, then answers [`Request::CmEstablish`], which sends the
    /// RTU; `Established` follows. A QP of rocexd's engine never sees it (rocexd moves it).
    ///
    /// [`Request::CmEstablish`]: super::Request::CmEstablish
    ConnectResponse = 6,
}

impl CmEventKind {
    pub(super) fn from_wire(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::ConnectRequest,
            2 => Self::Established,
            3 => Self::Rejected,
            4 => Self::Unreachable,
            5 => Self::Disconnected,
            6 => Self::ConnectResponse,
            _ => return None,
        })
    }
}

/// The QP attributes a connection settled (or, for a request not yet accepted, will
/// settle when accepted), as `rdma_init_qp_attr` gives them; all zero when the event has
/// none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmConn {
    /// The peer's QPN (a REQ's, REP's or SIDR_REP's).
    pub remote_qpn: u32,
    /// The local QP's first send PSN: the peer's expected PSN.
    pub sq_psn: u32,
    /// The local QP's expected PSN: the PSN the daemon chose and sends in the REP.
    pub rq_psn: u32,
    /// Path MTU (`ibv_mtu`).
    pub path_mtu: u8,
    /// READ/atomic requests the local QP issues (initiator depth).
    pub max_rd_atomic: u8,
    /// READ/atomic requests the local QP accepts (responder resources).
    pub max_dest_rd_atomic: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// The path's traffic class (the IP TOS of the QP's packets).
    pub traffic_class: u8,
}

impl CmConn {
    /// Every attribute the connection settled for the local RC QP toward `peer`, as a
    /// direct client moves its own QP with them ([`QpAttr::rc_steps`] picks each state's,
    /// as rocexd's CM moves its QPs: rocex-cm's `QpParams`); `None` for a path MTU that is
    /// not one.
    pub fn qp_attr(&self, peer: IpAddr) -> Option<QpAttr> {
        Some(QpAttr {
            ah_attr: Some(AddressVector { dest: peer }),
            traffic_class: self.traffic_class,
            path_mtu: Mtu::from_ibv(self.path_mtu)?,
            dest_qp_num: self.remote_qpn,
            rq_psn: self.rq_psn,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
            min_rnr_timer: MIN_RNR_TIMER,
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            sq_psn: self.sq_psn,
            max_rd_atomic: self.max_rd_atomic,
            ..QpAttr::default()
        })
    }

    pub(super) fn put(&self, p: &mut Put) {
        p.u32(self.remote_qpn).u32(self.sq_psn).u32(self.rq_psn);
        p.u8(self.path_mtu)
            .u8(self.max_rd_atomic)
            .u8(self.max_dest_rd_atomic)
            .u8(self.retry_cnt)
            .u8(self.rnr_retry)
            .u8(self.timeout)
            .u8(self.traffic_class);
    }

    pub(super) fn get(g: &mut Get<'_>) -> Result<Self, BodyError> {
        Ok(read_fields!(
            g,
            Self {
                remote_qpn: u32,
                sq_psn: u32,
                rq_psn: u32,
                path_mtu: u8,
                max_rd_atomic: u8,
                max_dest_rd_atomic: u8,
                retry_cnt: u8,
                rnr_retry: u8,
                timeout: u8,
                traffic_class: u8,
            }
        ))
    }
}

/// One CM event (`CmPoll`'s answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmEvent {
    /// What happened.
    pub kind: CmEventKind,
    /// The connection's id.
    pub id: u32,
    /// The peer's address.
    pub peer: IpAddr,
    /// The listening port (a request), or 0.
    pub port: u16,
    /// The port space of the connection: `RDMA_PS_TCP` (0x0106) for a REQ's, `RDMA_PS_UDP`
    /// (0x0111) for a SIDR exchange's.
    pub ps: u16,
    /// The peer's rdma_cm port (from a request's rdma_cm header), or 0.
    pub peer_port: u16,
    /// The peer's Q_Key (a SIDR_REP's), or 0.
    pub qkey: u32,
    /// The QP attributes of the connection: a request's (before `CmAccept`, with the PSN
    /// the accept will send), an RC `Established`'s, or a SIDR `Established`'s remote QPN.
    pub conn: CmConn,
    /// The REJ reason (`Rejected`), a refusing SIDR_REP's status (`Unreachable`), or 0.
    pub reason: u16,
    /// The private data of the peer's message, each field whole as the kernel's rdma_cm
    /// hands it on: the REQ's after rdma_cm's header (`ConnectRequest`, 56 bytes), the
    /// REP's (`Established` on the connecting side, 196), the REJ's (`Rejected` by the
    /// peer, 148); a SIDR_REQ's after rdma_cm's header (180), a SIDR_REP's (136); else
    /// empty.
    pub private_data: Vec<u8>,
}
