//! The direct data path's grant (`docs/abi.md` §6.6): what a client needs to run its own
//! engine on the device's address, beside the slot's socket that comes with it.

use core::net::IpAddr;

use super::cm::{get_addr, put_addr};
use super::codec::{BodyError, Get, Put};

/// `OpenDirect`'s answer: the client's QPN slot and the device settings its engine and
/// back end take, so that its packets are the daemon's on the wire. The frame carries one
/// descriptor: a UDP socket bound to `addr:4791`, the member of the daemon's
/// `SO_REUSEPORT` group to which the kernel steers every packet whose destination QPN has
/// `qpn & ((1 << slot_bits) - 1) == slot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectGrant {
    /// The client's QPN slot (1 up to `1 << slot_bits`; 0 is the daemon's).
    pub slot: u32,
    /// Low QPN bits that name a slot.
    pub slot_bits: u8,
    /// The device address; the socket is bound to its port 4791.
    pub addr: IpAddr,
    /// The port's active MTU (`enum ibv_mtu`).
    pub mtu: u8,
    /// QPs the engine holds.
    pub max_qp: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// Selective repeat towards every RC peer (`rocexd --selective-repeat`).
    pub selective_repeat: bool,
    /// PSNs an RC QP keeps in flight at most (`rocexd --window`, `Config::window`).
    pub window: u32,
    /// Retransmit only when kernel rxe would (`rocexd --rxe-recovery`).
    pub rxe_recovery: bool,
    /// RC and UC packets marked ECT(0), DCQCN with its default parameters (`rocexd --ecn`).
    pub ecn: bool,
    /// The back end's options: no UDP GSO...
    pub no_gso: bool,
    /// ...no UDP GRO (always, on a steered socket)...
    pub no_gro: bool,
    /// ...every peer is rocex (the stricter ICRC check, `rocexd --peers-are-rocex`)...
    pub peers_are_rocex: bool,
    /// ...and the TOS of a packet whose QP has none: DSCP << 2 | ECN.
    pub tos: u8,
}

impl DirectGrant {
    pub(super) fn put(&self, p: &mut Put) {
        p.u32(self.slot).u8(self.slot_bits);
        put_addr(p, self.addr);
        p.u8(self.mtu)
            .u32(self.max_qp)
            .u32(self.max_cqe)
            .u8(flags(&[
                self.selective_repeat,
                self.rxe_recovery,
                self.ecn,
                self.no_gso,
                self.no_gro,
                self.peers_are_rocex,
            ]))
            .u32(self.window)
            .u8(self.tos);
    }

    pub(super) fn get(g: &mut Get<'_>) -> Result<Self, BodyError> {
        let slot = g.u32("slot")?;
        let slot_bits = g.u8("slot_bits")?;
        if !(1..=8).contains(&slot_bits) {
            return Err(g.bad("slot_bits", slot_bits.into()));
        }
        if slot == 0 || slot >> slot_bits != 0 {
            return Err(g.bad("slot", slot.into()));
        }
        let addr = get_addr(g)?;
        let mtu = g.u8("mtu")?;
        if !(1..=5).contains(&mtu) {
            return Err(g.bad("mtu", mtu.into()));
        }
        let max_qp = g.u32("max_qp")?;
        let max_cqe = g.u32("max_cqe")?;
        let f = g.u8("flags")?;
        if f >> FLAGS != 0 {
            return Err(g.bad("flags", f.into()));
        }
        let bit = |i: u8| f & 1 << i != 0;
        Ok(Self {
            slot,
            slot_bits,
            addr,
            mtu,
            max_qp,
            max_cqe,
            selective_repeat: bit(0),
            rxe_recovery: bit(1),
            ecn: bit(2),
            no_gso: bit(3),
            no_gro: bit(4),
            peers_are_rocex: bit(5),
            window: g.u32("window")?,
            tos: g.u8("tos")?,
        })
    }
}

/// Flag bits defined; the rest are reserved, 0.
const FLAGS: u8 = 6;

fn flags(bits: &[bool; FLAGS as usize]) -> u8 {
    bits.iter()
        .enumerate()
        .fold(0, |f, (i, &b)| f | u8::from(b) << i)
}
