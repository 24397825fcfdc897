//! Asking rocexd for a QPN slot (`OpenDirect`, `docs/abi.md` §6.6), and the engine a grant
//! describes: the daemon's device settings, so that this process's packets are the
//! daemon's on the wire, with every QP number in the slot the kernel steers here.

use std::os::fd::OwnedFd;

use rocex_io::{BackendOptions, UdpPort};
use rocex_proto::verbs::Mtu;
use rocex_proto::{Config, QpStatus, QpnSlot};
use rocex_shm::Board;
use rocex_shm::control::{DeviceAttr, DirectGrant, Request, Response};

use crate::{Channel, Context, Error, Result, proto};

/// Whether `Context::open` asks for a slot: unless `ROCEX_DIRECT=0`.
pub(crate) fn wanted() -> bool {
    std::env::var_os("ROCEX_DIRECT").is_none_or(|v| v != "0")
}

/// The daemon's grant, the slot's socket and its QP board, or `None` when it grants none
/// (`--no-direct` or options the slots do not fit, every slot taken, a daemon that does
/// not know the request): the context then runs on the daemon as before.
pub(crate) fn ask(ch: &Channel) -> Result<Option<(DirectGrant, OwnedFd, OwnedFd)>> {
    match ch.call(&Request::OpenDirect, &[]) {
        Ok((Response::Direct(g), fds)) if fds.len() == 2 => {
            let [sock, board] = <[OwnedFd; 2]>::try_from(fds).map_err(|_| proto("grant fds"))?;
            Ok(Some((g, sock, board)))
        }
        Ok((r, _)) => Err(proto(format!("unexpected {r:?}"))),
        Err(Error::Daemon { .. } | Error::Limit { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

impl Context {
    /// The direct context on `grant`'s socket `sock`, which keeps `ch` (the connection
    /// that holds the slot), fills the QP board `board` for rocexd and presents the
    /// daemon's device `attr`.
    pub(crate) fn granted(
        ch: Channel,
        attr: DeviceAttr,
        grant: DirectGrant,
        sock: OwnedFd,
        board: OwnedFd,
    ) -> Result<Self> {
        let opts = BackendOptions {
            peers_are_rocex: grant.peers_are_rocex,
            no_gso: grant.no_gso,
            no_gro: grant.no_gro,
            vlan: None,
            dscp: grant.tos >> 2,
            ecn: grant.tos & 3,
        };
        let port = UdpPort::from_socket(sock.into(), grant.addr, opts)?;
        let board = Board::from_fd(board, QpStatus::names().count())?;
        let ctx = Self::direct(port, config(&grant)?, Some(ch), Some(board))?;
        Ok(Self { attr, ..ctx })
    }
}

/// The engine's configuration for `grant`, with a fresh seed from the kernel.
fn config(grant: &DirectGrant) -> Result<Config> {
    let mut seed = [0u8; 32];
    rustix::rand::getrandom(&mut seed, rustix::rand::GetRandomFlags::empty())
        .map_err(std::io::Error::from)?;
    let mut c = Config::new(grant.addr, seed);
    c.port_mtu = Mtu::from_ibv(grant.mtu).ok_or_else(|| proto("the grant's MTU"))?;
    c.max_qp = grant.max_qp as usize;
    c.max_cqe = grant.max_cqe as usize;
    c.selective_repeat = grant.selective_repeat;
    c.window = grant.window;
    c.rxe_recovery = grant.rxe_recovery;
    c.congestion.ecn = grant.ecn;
    c.qpn_slot = Some(QpnSlot {
        bits: grant.slot_bits,
        slot: grant.slot,
    });
    Ok(c)
}
