//! The fresh engine each replay drives, one RC QP under the captured QPN taken from RESET
//! to RTS with the attributes the plan read from the capture, and its clock.

use core::net::IpAddr;

use rocex_proto::verbs::{Mtu, QpAttr, QpCap};
use rocex_proto::{Config, Engine, Instant, PdId, QpInit};

use crate::ConformError;
use crate::connection::Connection;

/// The largest message rxe carries (`RXE_PORT_MAX_MSG_SZ`): the size of a replayed side's
/// local buffer, so that no message is refused for want of room.
pub(crate) const MAX_MSG: u64 = 0x80_0000;

/// rxe's `RXE_MAX_QP_RD_ATOM`, the READ and atomic requests an rxe QP set up by perftest
/// or the verbs examples has in flight: the replayed responder accepts as many, and the
/// replayed requester, whose work requests are posted when rxe sent them, keeps rxe's own
/// limit.
pub(crate) const RXE_MAX_QP_RD_ATOM: u8 = 128;

/// The replay clock at capture time `ts` (seconds), for a replay that starts at `t0`.
pub(crate) fn clock(t0: f64, ts: f64) -> Instant {
    Instant::from_nanos(((ts - t0).max(0.0) * 1e9) as u64)
}

/// An engine holding the QP that stands in for one side of a connection.
pub(crate) struct Side {
    pub(crate) engine: Engine,
    pub(crate) pd: PdId,
    /// The CQ both the QP's queues complete on.
    pub(crate) cq: u32,
    pub(crate) qpn: u32,
}

/// A fresh engine at `local` (seeded with `seed`) with an RC QP numbered `qpn`, of
/// capacity `cap`, moved to RTS with `attr` by [`QpAttr::rc_steps`].
///
/// With `rxe_recovery` the engine retransmits when rxe would (`Config::rxe_recovery`):
/// which packet a requester sends next depends on whether its timer has run out, so the
/// requester replay compares rxe's timing of each go-back as well as its packets. rocex's
/// own recovery starts the same go-backs sooner (docs/interop.md, "Replaying the
/// requester").
pub(crate) fn rc_side(
    conn: &Connection,
    local: IpAddr,
    seed: u8,
    qpn: u32,
    cap: QpCap,
    attr: &QpAttr,
    rxe_recovery: bool,
) -> Result<Side, ConformError> {
    let mut config = Config::new(local, [seed; 32]);
    config.port_mtu = Mtu::M4096;
    config.rxe_recovery = rxe_recovery;
    let mut engine = Engine::new(config);
    let pd = engine.alloc_pd();
    let cq = engine
        .create_cq(1 << 15)
        .map_err(ConformError::setup(conn, "create_cq"))?;
    let init = QpInit::rc(pd, cq, cap);
    let qpn = engine
        .create_qp_with_qpn(init, qpn)
        .map_err(ConformError::setup(conn, "create_qp_with_qpn"))?;
    let steps = ["modify_qp INIT", "modify_qp RTR", "modify_qp RTS"];
    for ((a, mask), step) in attr.rc_steps().into_iter().zip(steps) {
        engine
            .modify_qp(qpn, &a, mask)
            .map_err(ConformError::setup(conn, step))?;
    }
    Ok(Side {
        engine,
        pd,
        cq,
        qpn,
    })
}
