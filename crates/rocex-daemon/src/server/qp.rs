//! QPs: `CreateQp`, `ModifyQp`, `QueryQp`, `DestroyQp`.

use rocex_proto::verbs::{AttrMask, QpAttr};
use rocex_proto::{Engine, QpInit};
use rocex_shm::control::{Response, kind};

use super::{Reply, dup, verbs_error};
use crate::client::Client;
use crate::limits::{Limits, Resource};
use crate::pump::{self, QpPump};

/// A QP on the client's PD and CQs (`q`, as `CreateQp` asks, its caps before the rings'
/// geometry grants them), its SQ and RQ rings and doorbell shared with the client.
pub(super) fn create(
    engine: &mut Engine,
    limits: &Limits,
    c: &mut Client,
    id: u64,
    q: QpInit,
) -> Reply {
    if let Err(e) = limits.check(Resource::Qps, c.qps.len() as u64, 1) {
        return Reply::over(e);
    }
    if !c.pds.contains(&q.pd.raw()) {
        return Reply::err(libc::ENOENT, "no such PD");
    }
    if !c.cqs.contains_key(&q.send_cq) || !c.cqs.contains_key(&q.recv_cq) {
        return Reply::err(libc::ENOENT, "no such CQ");
    }
    let (sq, rq, granted) = match pump::qp_geometry(&q.cap) {
        Ok(g) => g,
        Err(e) => return Reply::err(libc::EINVAL, e.to_string()),
    };
    let qp_type = q.qp_type;
    let qpn = match engine.create_qp(QpInit { cap: granted, ..q }) {
        Ok(n) => n,
        Err(e) => return verbs_error(e),
    };
    let made = QpPump::create(qpn, qp_type, sq, rq, granted, (q.send_cq, q.recv_cq)).and_then(
        |(p, created)| {
            let fds = vec![dup(p.region().fd())?, dup(&p.doorbell)?];
            Ok((p, created, fds))
        },
    );
    match made {
        Ok((p, created, fds)) => {
            c.qps.insert(qpn, p);
            tracing::info!(client = id, qpn, ?qp_type, "QP created");
            Reply {
                resp: Response::CreateQp(created),
                fds,
            }
        }
        Err(e) => {
            let _ = engine.destroy_qp(qpn);
            Reply::err(libc::ENOMEM, e.to_string())
        }
    }
}

/// Modifies one of the client's QPs.
pub(super) fn modify(
    engine: &mut Engine,
    c: &Client,
    qpn: u32,
    attr: &QpAttr,
    mask: AttrMask,
) -> Reply {
    if !c.qps.contains_key(&qpn) {
        return Reply::err(libc::ENOENT, "no such QP");
    }
    Reply::done(kind::MODIFY_QP, engine.modify_qp(qpn, attr, mask))
}

/// One of the client's QPs' attributes and capabilities.
pub(super) fn query(engine: &Engine, c: &Client, qpn: u32) -> Reply {
    if !c.qps.contains_key(&qpn) {
        return Reply::err(libc::ENOENT, "no such QP");
    }
    match engine.query_qp(qpn) {
        Ok((attr, cap)) => Reply::ok(Response::QueryQp { attr, cap }),
        Err(e) => verbs_error(e),
    }
}

/// Destroys one of the client's QPs.
pub(super) fn destroy(engine: &mut Engine, c: &mut Client, qpn: u32) -> Reply {
    if c.qps.remove(&qpn).is_none() {
        return Reply::err(libc::ENOENT, "no such QP");
    }
    Reply::done(kind::DESTROY_QP, engine.destroy_qp(qpn))
}
