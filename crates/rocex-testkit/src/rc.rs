//! The attributes that take an RC QP to RTS, which the tests of the engine, the daemon and
//! the library each connect their QPs with.

use std::net::IpAddr;

use rocex_verbs_types::{Access, AddressVector, Mtu, QpAttr};

/// What takes an RC QP through INIT and RTR to RTS (`QpAttr::rc_steps`) towards `peer` (its
/// address, QPN and first PSN) at `mtu`, sending from `my_psn` and granting the peer
/// `access`: 16 READs or atomics outstanding each way, RNR timer code 1, local ACK timeout
/// 14 and 7 retries of each kind. A test that needs other values sets them over these
/// (`QpAttr { timeout: 10, ..rc_attrs(..) }`).
pub fn rc_attrs(my_psn: u32, peer: (IpAddr, u32, u32), mtu: Mtu, access: Access) -> QpAttr {
    QpAttr {
        qp_access_flags: access,
        ah_attr: Some(AddressVector { dest: peer.0 }),
        path_mtu: mtu,
        dest_qp_num: peer.1,
        rq_psn: peer.2,
        max_dest_rd_atomic: 16,
        min_rnr_timer: 1,
        sq_psn: my_psn,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 16,
        ..QpAttr::default()
    }
}
