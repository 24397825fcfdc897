//! The part of a request packet the requester comparison looks at.

use core::fmt;

use rocex_wire::{Opcode, PacketRepr, Psn};

/// What is compared of one request: opcode, PSN, AckReq, SE, payload length and every
/// extension header's fields (RETH, AtomicETH, immediate data, IETH, FETH). The
/// destination QPN, pad, payload bytes and ICRC are not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Opcode.
    pub opcode: Opcode,
    /// PSN.
    pub psn: Psn,
    /// AckReq.
    pub ack_req: bool,
    /// Solicited event.
    pub solicited: bool,
    /// Payload bytes.
    pub payload_len: usize,
    /// RETH: address, rkey, DMA length.
    pub reth: Option<(u64, u32, u32)>,
    /// AtomicETH: address, rkey, swap or add, compare.
    pub atomic: Option<(u64, u32, u64, u64)>,
    /// Immediate data.
    pub imm: Option<u32>,
    /// IETH: the rkey to invalidate.
    pub inv_rkey: Option<u32>,
    /// FETH: placement and selectivity.
    pub feth: Option<(u8, u8)>,
}

impl Request {
    /// The compared fields of a parsed request packet.
    pub fn of(p: &PacketRepr<'_>) -> Self {
        Self {
            opcode: p.bth.opcode,
            psn: p.bth.psn,
            ack_req: p.bth.ack_req,
            solicited: p.bth.solicited,
            payload_len: p.payload.len(),
            reth: p.reth.map(|r| (r.va, r.rkey, r.dma_len)),
            atomic: p.atomic_eth.map(|a| (a.va, a.rkey, a.swap_add, a.compare)),
            imm: p.immdt.map(|i| i.data),
            inv_rkey: p.ieth.map(|i| i.rkey),
            feth: p.feth.map(|f| (f.placement, f.selectivity)),
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.opcode.name().unwrap_or("?");
        write!(f, "{name} psn={}", self.psn.value())?;
        if self.ack_req {
            f.write_str(" ack")?;
        }
        if self.solicited {
            f.write_str(" se")?;
        }
        if let Some((va, rkey, len)) = self.reth {
            write!(f, " va={va:#x} rkey={rkey:#x} dma_len={len}")?;
        }
        if let Some((va, rkey, swap_add, compare)) = self.atomic {
            write!(
                f,
                " va={va:#x} rkey={rkey:#x} swap_add={swap_add:#x} compare={compare:#x}"
            )?;
        }
        if let Some(i) = self.imm {
            write!(f, " imm={i:#010x}")?;
        }
        if let Some(r) = self.inv_rkey {
            write!(f, " inv_rkey={r:#x}")?;
        }
        if let Some((p, s)) = self.feth {
            write!(f, " placement={p:#x} selectivity={s}")?;
        }
        write!(f, " len={}", self.payload_len)
    }
}
