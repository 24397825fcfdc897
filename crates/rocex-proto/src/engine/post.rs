//! Posting send and receive work requests, with the checks `ibv_post_send` and
//! `ibv_post_recv` make before a request is queued.

use rocex_wire::Psn;

use super::{Engine, VerbsError};
use crate::qp::{Qp, SendWqe};
use crate::time::Instant;
use crate::verbs::{
    QpState, QpType, RecvWr, SendData, SendOp, SendWr, WrError, check_data, check_op, message_len,
};

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

    /// How many more send work requests `qpn` takes now, by the rules of
    /// [`Engine::post_send`]: none until it is ready to send (RTS) or while its queue is
    /// full. A caller that takes no more than this from its own queue (the daemon's SQ
    /// ring) is never refused for want of room, and leaves the rest where it was posted.
    pub fn send_room(&self, qpn: u32) -> usize {
        self.qps.get(&qpn).map_or(0, |qp| match qp.state {
            QpState::Reset | QpState::Init | QpState::Rtr => 0,
            _ => (qp.cap.max_send_wr as usize).saturating_sub(qp.sq.len()),
        })
    }

    /// How many more receive work requests `qpn` takes now, as [`Engine::send_room`].
    pub fn recv_room(&self, qpn: u32) -> usize {
        self.qps.get(&qpn).map_or(0, |qp| match qp.state {
            QpState::Reset => 0,
            _ => (qp.cap.max_recv_wr as usize).saturating_sub(qp.rq.len()),
        })
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
    message_len(&wr.sges).map_err(|_| VerbsError::MessageTooLong)?;
    Ok(())
}

/// The checks `ibv_post_send` makes before a request is queued: the QP's state and caps
/// here, the request's own rules shared with rocexd's descriptor reader
/// ([`rocex_verbs_types::check_op`], [`rocex_verbs_types::check_data`]).
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
    let inline = matches!(wr.data, SendData::Inline(_));
    check_op(qp.qp_type, &wr.op, inline, wr.ud.is_some())
        .and_then(|()| check_data(&wr.op, &wr.data))
        .map_err(|e| match e {
            WrError::TooLong(_) => VerbsError::MessageTooLong,
            e => VerbsError::BadRequest(e.why()),
        })?;
    if qp.qp_type == QpType::Ud && wr.length() > u64::from(port_mtu) {
        return Err(VerbsError::MessageTooLong);
    }
    Ok(())
}
