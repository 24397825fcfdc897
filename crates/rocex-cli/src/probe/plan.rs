//! What the two sides agree on through the PLAN line: the operations in order, the message
//! size, the iterations, and the QP settings.

use rocex_proto::verbs::{Mtu, WcStatus};

use super::status::status_from_name;
use super::{ClientArgs, Res, fatal};

pub(super) fn parse_num(s: &str) -> Result<i64, String> {
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16)
    } else {
        t.parse()
    }
    .map_err(|e| format!("{s}: {e}"))?;
    Ok(if neg { -v } else { v })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Send,
    SendImm,
    SendInv,
    Write,
    WriteImm,
    Read,
    Cas,
    Faa,
    AtomicWrite,
    Flush,
}

const ALL_OPS: [Op; 10] = [
    Op::Send,
    Op::SendImm,
    Op::SendInv,
    Op::Write,
    Op::WriteImm,
    Op::Read,
    Op::Cas,
    Op::Faa,
    Op::AtomicWrite,
    Op::Flush,
];

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::SendImm => "send_imm",
            Self::SendInv => "send_inv",
            Self::Write => "write",
            Self::WriteImm => "write_imm",
            Self::Read => "read",
            Self::Cas => "cas",
            Self::Faa => "faa",
            Self::AtomicWrite => "atomic_write",
            Self::Flush => "flush",
        }
    }
}

pub(super) fn parse_ops(list: &str) -> Res<Vec<Op>> {
    let mut ops = Vec::new();
    for t in list.split(',').filter(|t| !t.is_empty()) {
        if t == "all" {
            ops.extend(ALL_OPS);
            continue;
        }
        match ALL_OPS.iter().find(|o| o.name() == t) {
            Some(&o) if ops.len() < 32 => ops.push(o),
            Some(_) => {}
            None => return fatal(format!("unknown op {t}")),
        }
    }
    if ops.is_empty() {
        return fatal("no ops");
    }
    Ok(ops)
}

pub(super) fn mtu_of(bytes: u32) -> Res<Mtu> {
    [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096]
        .into_iter()
        .find(|m| m.bytes() == bytes)
        .map_or_else(|| fatal(format!("bad mtu {bytes}")), Ok)
}

/// What both sides agree on through the PLAN line, and the local QP settings.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) ops: Vec<Op>,
    pub(super) size: u64,
    pub(super) iters: u32,
    pub(super) mtu: u32,
    pub(super) uc: bool,
    pub(super) bad_rkey: bool,
    pub(super) rnr_delay: u32,
    pub(super) min_rnr: u8,
    pub(super) psn: Option<u32>,
    pub(super) expect: Option<i32>,
    pub(super) timeout: u8,
    pub(super) retry: u8,
    pub(super) rnr_retry: u8,
    pub(super) flush_persistent: bool,
}

impl Plan {
    /// The client's plan from its options: the size rounded up to a multiple of 8, and a bad
    /// rkey expecting a remote access error unless told otherwise.
    pub(super) fn of_client(a: &ClientArgs) -> Res<Self> {
        let mut size = a.size.max(8);
        if size % 8 != 0 {
            size += 8 - size % 8;
        }
        let mut expect = match &a.expect {
            Some(s) => Some(status_from_name(s)?),
            None => None,
        };
        if a.bad_rkey && expect.is_none() {
            expect = Some(WcStatus::RemAccessErr as i32);
        }
        let p = Self {
            ops: parse_ops(&a.ops)?,
            size,
            iters: a.iters,
            mtu: a.mtu,
            uc: a.uc,
            bad_rkey: a.bad_rkey,
            rnr_delay: a.rnr_delay,
            min_rnr: a.min_rnr,
            psn: a.psn.map(|v| (v as u32) & 0xff_ffff),
            expect,
            timeout: a.timeout,
            retry: a.retry,
            rnr_retry: a.rnr_retry,
            flush_persistent: a.flush_type == "persistent",
        };
        mtu_of(p.mtu)?;
        Ok(p)
    }

    pub(super) fn has(&self, op: Op) -> bool {
        self.ops.contains(&op)
    }

    pub(super) fn recvs(&self) -> u32 {
        self.ops
            .iter()
            .map(|o| match o {
                Op::SendInv => 1,
                Op::Send | Op::SendImm | Op::WriteImm => self.iters,
                _ => 0,
            })
            .sum()
    }

    pub(super) fn ops_list(&self) -> String {
        self.ops
            .iter()
            .map(|o| o.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(super) fn flags(&self) -> String {
        let mut f = Vec::new();
        if self.uc {
            f.push("uc".to_string());
        }
        if self.bad_rkey {
            f.push("badrkey".to_string());
        }
        if self.rnr_delay != 0 {
            f.push(format!("rnrdelay={}", self.rnr_delay));
        }
        if self.min_rnr != 12 {
            f.push(format!("minrnr={}", self.min_rnr));
        }
        if let Some(p) = self.psn {
            f.push(format!("psn=0x{p:06x}"));
        }
        if let Some(e) = self.expect {
            f.push(format!("expect={e}"));
        }
        if f.is_empty() {
            "-".to_string()
        } else {
            f.join(",")
        }
    }
}
