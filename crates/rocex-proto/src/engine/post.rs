//! Posting send and receive work requests, with the checks `ibv_post_send` and
//! `ibv_post_recv` make before a request is queued.

use rocex_wire::Psn;

use super::{Engine, VerbsError};
use crate::qp::{Qp, SendWqe};
use crate::time::Instant;
use crate::verbs::{QpState, QpType, RecvWr, SendData, SendOp, SendWr};

impl Engine {
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
}

/// The checks `ibv_post_recv` makes before a request is queued.
pub(super) fn validate_recv(qp: &Qp, wr: &RecvWr) -> Result<(), VerbsError> {
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
pub(super) fn validate_send(qp: &Qp, wr: &SendWr, port_mtu: u32) -> Result<(), VerbsError> {
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
