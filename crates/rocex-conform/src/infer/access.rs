//! What the capture says about the responder QP's own access flags. rxe checks a request
//! against them before anything else about it (`check_qp_attr_access`): a FLUSH whose
//! placement type the QP does not allow is an invalid request (NAK 0x61). READ, WRITE and
//! atomics are taken as allowed (perftest, the probe and rping's QPs allow them); FLUSH of
//! each placement type is taken as allowed unless rxe refused a FLUSH that asked for it.

use rocex_proto::Access;
use rocex_proto::verbs::flush_access;
use rocex_wire::NakCode;
use rocex_wire::opcode::Operation;

use super::{InferenceKind, Plan};
use crate::connection::Connection;

/// What every replayed responder QP allows.
pub(crate) const REMOTE: Access = Access::REMOTE_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// Both FLUSH flags.
const FLUSH: Access = Access::FLUSH_GLOBAL.union(Access::FLUSH_PERSISTENT);

/// Sets [`Plan::qp_access`]: the FLUSH flags that no executed FLUSH was refused for with NAK
/// 0x61. A refused FLUSH that asked for both types withholds whichever another FLUSH did not
/// show the QP allows. Counted once for a connection that FLUSHes.
pub(super) fn qp_access(conn: &Connection, plan: &mut Plan) {
    let mut shown = Access::empty();
    let mut refused = Vec::new();
    let mut first = None;
    for (i, req) in conn.requests.iter().enumerate() {
        if req.info.operation != Operation::Flush || !plan.executed[i] {
            continue;
        }
        let need = flush_access(req.packet().and_then(|p| p.feth).map_or(0, |f| f.placement));
        first.get_or_insert(req.frame);
        match plan.answers[i] {
            Some(j) if plan.responses[j].is_nak(NakCode::InvalidRequest) => {
                refused.push((req.frame, conn.responses[j].frame, need));
            }
            Some(_) => shown |= need,
            None => {}
        }
    }
    let withheld = refused
        .iter()
        .fold(Access::empty(), |w, &(.., need)| w | need)
        .difference(shown);
    plan.qp_access = REMOTE | FLUSH.difference(withheld);
    let Some(frame) = first else { return };
    let text = match refused.first() {
        Some(&(req, nak, _)) => format!(
            "responder QP lacks {withheld}: rxe answered the FLUSH at frame {req} with NAK 0x61 at frame {nak}{}",
            if refused.len() > 1 {
                format!(" ({} FLUSHes refused so)", refused.len())
            } else {
                String::new()
            }
        ),
        None => format!("responder QP allows {FLUSH}: rxe refused no FLUSH with NAK 0x61"),
    };
    plan.infer(frame, InferenceKind::QpAccess, text);
}

#[cfg(test)]
mod tests {
    use rocex_proto::Access;

    use super::{FLUSH, REMOTE};
    use crate::infer::InferenceKind;
    use crate::infer::lab::{kinds, planned};

    #[test]
    fn a_flush_refused_as_an_invalid_request_withholds_its_type_from_the_qp() {
        for name in [
            "probe_flush_qp_noaccess.pcap",
            "probe_flush_qp_noaccess-loss5.pcap",
        ] {
            let p = planned(name);
            assert_eq!(p.qp_access, REMOTE | Access::FLUSH_PERSISTENT, "{name}");
            assert!(kinds(&p).contains(&InferenceKind::QpAccess), "{name}");
            // The key was never looked at: the FLUSH lends it no right.
            assert!(
                p.mrs.iter().all(|m| !m.access.intersects(FLUSH)),
                "{name}: {:?}",
                p.mrs
            );
        }
    }

    #[test]
    fn a_flush_rxe_answered_otherwise_leaves_the_qp_both_types() {
        for name in ["probe_flush.pcap", "probe_flush_noaccess.pcap"] {
            let p = planned(name);
            assert_eq!(p.qp_access, REMOTE | FLUSH, "{name}");
            assert!(kinds(&p).contains(&InferenceKind::QpAccess), "{name}");
        }
        // With no FLUSH there is nothing to infer (and nothing the flags would change).
        let p = planned("probe_write.pcap");
        assert_eq!(p.qp_access, REMOTE | FLUSH);
        assert!(!kinds(&p).contains(&InferenceKind::QpAccess));
    }
}
