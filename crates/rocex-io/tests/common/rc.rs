//! The RC QPs of engines that run on threads of their own: making one, what the two sides
//! hand each other, and the attributes that take a QP to RTS.

use std::io;
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, Sender};
use std::time::Duration;

use rocex_proto::verbs::{Mtu, QpCap};
use rocex_proto::{Access, Engine, PdId, QpInit};

/// Any error of the set-up as an I/O error, which the tests' threads return.
pub(crate) fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Hands `mine` to the peer's thread and waits up to 10 s for the peer's.
pub(crate) fn exchange<T>(mine: T, to_peer: &Sender<T>, from_peer: &Receiver<T>) -> io::Result<T> {
    to_peer.send(mine).map_err(err)?;
    from_peer.recv_timeout(Duration::from_secs(10)).map_err(err)
}

/// An RC QP on `pd` completing on `cq`, with room for `depth` (sends, receives).
pub(crate) fn rc_qp(e: &mut Engine, pd: PdId, cq: u32, depth: (u32, u32)) -> io::Result<u32> {
    let cap = QpCap {
        max_send_wr: depth.0,
        max_recv_wr: depth.1,
        ..QpCap::default()
    };
    let init = QpInit::rc(pd, cq, cap);
    e.create_qp(init).map_err(err)
}

/// Takes `qpn` through INIT and RTR to RTS with `rocex_testkit::rc::rc_attrs`: towards
/// `peer` (its address, QPN and first PSN) at `mtu`, sending from `my_psn` and allowing
/// the peer `access`.
pub(crate) fn connect_qp(
    e: &mut Engine,
    qpn: u32,
    my_psn: u32,
    peer: (IpAddr, u32, u32),
    mtu: Mtu,
    access: Access,
) -> io::Result<()> {
    let to_rts = rocex_testkit::rc::rc_attrs(my_psn, peer, mtu, access);
    for (a, mask) in to_rts.rc_steps() {
        e.modify_qp(qpn, &a, mask).map_err(err)?;
    }
    Ok(())
}
