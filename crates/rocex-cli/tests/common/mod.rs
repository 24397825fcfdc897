//! What the tests that run `rocexd` share: the daemon of `rocex_testkit::rocexd` (built
//! next to the `rocex` under test, or `$ROCEXD`).

// Each test binary uses its own part.
#![allow(dead_code, unused_imports)]

use std::net::IpAddr;

pub(crate) use rocex_testkit::rocexd::{Daemon, Rocexd};
use rocex_verbs::verbs::{AddressVector, Mtu, QpAttr, QpCap, QpType};
use rocex_verbs::{Access, Cq, Pd, Qp, QpInitAttr};

/// `rocexd` on `addr` with `extra` options, on a socket of its own, once it answers.
pub(crate) fn daemon(addr: &str, extra: &[&str]) -> Daemon {
    Rocexd::new(addr).args(extra).start()
}

/// An RC QP of the default capacities whose sends and receives complete on `cq`.
pub(crate) fn rc_qp(pd: &Pd, cq: &Cq) -> Qp {
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        send_cq: cq,
        recv_cq: cq,
        cap: QpCap::default(),
    };
    pd.create_qp(&init).unwrap()
}

/// What takes an RC QP to RTS towards `peer` (address, QPN, its send PSN) from `my_psn`,
/// granting the peer `access`: MTU 1024, one READ each way, timeout 14, retries 7.
pub(crate) fn rc_attrs(my_psn: u32, peer: (IpAddr, u32, u32), access: Access) -> QpAttr {
    QpAttr {
        qp_access_flags: access,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: Mtu::M1024,
        dest_qp_num: peer.1,
        rq_psn: peer.2,
        max_dest_rd_atomic: 1,
        min_rnr_timer: 1,
        sq_psn: my_psn,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
        ..QpAttr::default()
    }
}

/// RESET → INIT → RTR → RTS with `to_rts` (`QpAttr::rc_steps`).
pub(crate) fn connect(qp: &Qp, to_rts: &QpAttr) {
    for (a, mask) in to_rts.rc_steps() {
        qp.modify(&a, mask).unwrap();
    }
}
