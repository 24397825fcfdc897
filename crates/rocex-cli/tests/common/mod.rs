//! What the tests that run `rocexd` share: the daemon of `rocex_testkit::rocexd` (built
//! next to the `rocex` under test, or `$ROCEXD`).

// Each test binary uses its own part.
#![allow(dead_code, unused_imports)]

use std::net::IpAddr;

use rocex_testkit::rc;
pub(crate) use rocex_testkit::rocexd::{Daemon, Rocexd};
use rocex_verbs::verbs::{Mtu, QpAttr, QpCap, QpType};
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

/// `rocex_testkit::rc::rc_attrs` at MTU 1024 with one READ each way.
pub(crate) fn rc_attrs(my_psn: u32, peer: (IpAddr, u32, u32), access: Access) -> QpAttr {
    QpAttr {
        max_dest_rd_atomic: 1,
        max_rd_atomic: 1,
        ..rc::rc_attrs(my_psn, peer, Mtu::M1024, access)
    }
}

/// RESET → INIT → RTR → RTS with `to_rts` (`QpAttr::rc_steps`).
pub(crate) fn connect(qp: &Qp, to_rts: &QpAttr) {
    for (a, mask) in to_rts.rc_steps() {
        qp.modify(&a, mask).unwrap();
    }
}
