//! rdma_cm on a direct context: rocexd's CM runs the handshake on QP1, and this process
//! moves its own QPs with the attributes the CM settled, as rdma-core's librdmacm moves
//! the QPs of its process with those the kernel's rdma_cm reports (`ucma_modify_qp_rtr`,
//! `ucma_modify_qp_rts`, `ucma_modify_qp_err`).

use std::collections::HashMap;
use std::net::IpAddr;

use rocex_proto::verbs::{AttrMask, QpAttr, QpState, QpType};
use rocex_shm::control::{CmConn, CmEvent, CmEventKind};
use rustix::io::Errno;

use super::Host;
use crate::{Error, Result};

/// rdma_cm's UDP port space (`RDMA_PS_UDP`): a SIDR request's.
const PS_UDP: u16 = 0x0111;
/// A REJ's reason when the consumer refuses (IBTA table 112), as rocexd reports a REP its
/// own QP could not take.
const REASON_CONSUMER: u16 = 28;

/// What a direct context keeps of its connection ids between their events.
#[derive(Debug, Default)]
pub(crate) struct CmIds(HashMap<u32, CmId>);

#[derive(Debug, Clone, Copy)]
enum CmId {
    /// A request not yet answered: its peer, what accepting it settles, and whether it is
    /// a SIDR request.
    Request {
        peer: IpAddr,
        conn: CmConn,
        sidr: bool,
    },
    /// A connection of local QP `qpn` to `peer`.
    Conn { qpn: u32, peer: IpAddr },
}

/// What [`Host::cm_event`] makes of an event.
pub(crate) enum Seen {
    /// The program's to take.
    Pass,
    /// The QP is in RTS: answer `CmEstablish` (the `Established` event follows).
    Establish,
}

impl Host {
    /// Whether `qpn` is a UD QP (its connect resolves a UD service: SIDR).
    pub(crate) fn is_ud(&self, qpn: u32) -> Result<bool> {
        Ok(self.engine(|e| e.qp_status(qpn))?.qp_type == QpType::Ud)
    }

    /// `rdma_connect` sent for `qpn` to `peer`: connection `id` is the QP's.
    pub(crate) fn cm_connecting(&self, id: u32, qpn: u32, peer: IpAddr) {
        self.cm.borrow_mut().0.insert(id, CmId::Conn { qpn, peer });
    }

    /// What `rdma_accept` of request `id` with `qpn` needs before rocexd answers the
    /// peer: an RC QP moved to RTS with the request's attributes (rocexd sends the REP
    /// next), or a UD QP's Q_Key for the SIDR_REP. Returns that Q_Key (0 for RC).
    pub(crate) fn cm_accepting(&self, id: u32, qpn: u32) -> Result<u32> {
        let Some(&CmId::Request { peer, conn, sidr }) = self.cm.borrow().0.get(&id) else {
            return Err(device_error(Errno::NOENT, "no such CM request"));
        };
        let qkey = match sidr {
            true => self.query_qp(qpn)?.0.qkey,
            false => {
                self.ready(qpn, &conn, peer)?;
                0
            }
        };
        self.cm.borrow_mut().0.insert(id, CmId::Conn { qpn, peer });
        Ok(qkey)
    }

    /// `rdma_reject` of request `id`, or a connection given up: forgotten.
    pub(crate) fn cm_forget(&self, id: u32) {
        self.cm.borrow_mut().0.remove(&id);
    }

    /// `rdma_disconnect` of `id`: its QP goes to ERROR first, as rocexd moves its own.
    pub(crate) fn cm_disconnecting(&self, id: u32) -> Result<()> {
        match self.cm.borrow().0.get(&id) {
            Some(&CmId::Conn { qpn, .. }) => self.to_error(qpn),
            _ => Ok(()),
        }
    }

    /// Acts on a CM event for this context's QPs. A `ConnectResponse` that its QP cannot
    /// take becomes the `Rejected` (consumer) rocexd reports for its own QPs then.
    pub(crate) fn cm_event(&self, e: &mut CmEvent) -> Seen {
        let known = self.cm.borrow().0.get(&e.id).copied();
        match (e.kind, known) {
            (CmEventKind::ConnectRequest, _) => {
                let sidr = e.ps == PS_UDP;
                let (peer, conn) = (e.peer, e.conn);
                let r = CmId::Request { peer, conn, sidr };
                self.cm.borrow_mut().0.insert(e.id, r);
            }
            (CmEventKind::ConnectResponse, Some(CmId::Conn { qpn, peer })) => {
                if self.ready(qpn, &e.conn, peer).is_ok() {
                    return Seen::Establish;
                }
                self.cm_forget(e.id);
                (e.kind, e.reason) = (CmEventKind::Rejected, REASON_CONSUMER);
            }
            (CmEventKind::Disconnected, Some(CmId::Conn { qpn, .. })) => {
                // rocexd forgot the connection: so does this end.
                let _ = self.to_error(qpn);
                self.cm_forget(e.id);
            }
            (CmEventKind::Rejected | CmEventKind::Unreachable, _) => self.cm_forget(e.id),
            _ => {}
        }
        Seen::Pass
    }

    /// INIT → RTR → RTS with what the connection settled, from where the QP stands.
    fn ready(&self, qpn: u32, conn: &CmConn, peer: IpAddr) -> Result<()> {
        let bad_mtu = || device_error(Errno::INVAL, "the connection's path MTU is invalid");
        let [_, rtr, rts] = conn.qp_attr(peer).ok_or_else(bad_mtu)?.rc_steps();
        self.engine(|e| e.ready_rc(qpn, rtr, rts))
    }

    fn to_error(&self, qpn: u32) -> Result<()> {
        let attr = QpAttr {
            qp_state: QpState::Err,
            ..QpAttr::default()
        };
        self.modify_qp(qpn, &attr, AttrMask::STATE)
    }
}

/// The refusal rocexd's CM answers in the same case.
fn device_error(errno: Errno, detail: &str) -> Error {
    Error::Daemon {
        errno: errno.raw_os_error() as u32,
        detail: detail.into(),
    }
}
