//! Connection-manager fields: peer addresses, private data, and the events `CmPoll` returns.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::codec::{BodyError, Get, Put};

/// Most private-data bytes a `CmConnect` carries: a REQ's 92 less rdma_cm's 36-byte
/// address header.
pub const CM_PRIVATE_DATA_LEN: usize = 56;
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
    /// The connection ended (either side's DREQ); the QP is in ERROR.
    Disconnected = 5,
}

impl CmEventKind {
    pub(super) fn from_wire(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::ConnectRequest,
            2 => Self::Established,
            3 => Self::Rejected,
            4 => Self::Unreachable,
            5 => Self::Disconnected,
            _ => return None,
        })
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
    /// The REJ reason (`Rejected`), or 0.
    pub reason: u16,
    /// The private data of the peer's message, each field whole as the kernel's rdma_cm
    /// hands it on: the REQ's after rdma_cm's header (`ConnectRequest`, 56 bytes), the
    /// REP's (`Established` on the connecting side, 196), the REJ's (`Rejected` by the
    /// peer, 148); else empty.
    pub private_data: Vec<u8>,
}
