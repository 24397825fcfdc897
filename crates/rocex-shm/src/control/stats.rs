//! `Stat`'s answer: named counter groups and one page of QPs.

use rocex_verbs_types::{QpState, QpType};

use super::codec::{BodyError, Get, Put};
use super::frame::MAX_FRAME;
use super::qp::{qp_state_from_wire, qp_type_from_wire, qp_type_to_wire};

/// Named counters. Names travel with the values, so a daemon may add counters without
/// a new ABI version; a client shows what it gets.
pub type Counters = Vec<(String, u64)>;

/// One group of device counters: `engine` (rxe's hw_counters names), `daemon`,
/// `backend`, `inject`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatGroup {
    /// The group's name.
    pub name: String,
    /// Its counters.
    pub counters: Counters,
}

/// One QP's state and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpStat {
    /// QP number.
    pub qpn: u32,
    /// Transport.
    pub qp_type: QpType,
    /// State.
    pub state: QpState,
    /// PSNs, queue depths, retries left, ... by name.
    pub counters: Counters,
}

/// `Stat`'s response: the device's counter groups and one page of QPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Device-wide groups.
    pub groups: Vec<StatGroup>,
    /// QPs in ascending QPN order.
    pub qps: Vec<QpStat>,
    /// The cursor of the next page; 0 when this is the last.
    pub next: u32,
}

/// Bytes a `Stat` response body may take (a frame's body limit).
pub const STAT_BUDGET: usize = MAX_FRAME as usize - 12;

pub(super) fn put_name(p: &mut Put, name: &str) {
    let b = &name.as_bytes()[..name.len().min(u8::MAX as usize)];
    p.u8(b.len() as u8).bytes(b);
}

pub(super) fn get_name(g: &mut Get<'_>, field: &'static str) -> Result<String, BodyError> {
    let n = g.u8(field)?;
    let b = g.take(n.into(), field)?;
    core::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| BodyError::Utf8)
}

pub(super) fn put_counters(p: &mut Put, c: &Counters) {
    let n = c.len().min(u16::MAX as usize);
    p.u16(n as u16);
    for (name, v) in &c[..n] {
        put_name(p, name);
        p.u64(*v);
    }
}

pub(super) fn get_counters(g: &mut Get<'_>) -> Result<Counters, BodyError> {
    let n = g.u16("counter_count")?;
    // Each counter takes at least 9 bytes: no allocation beyond what the body holds.
    let mut c = Vec::with_capacity(usize::from(n).min(g.b.len() / 9));
    for _ in 0..n {
        let name = get_name(g, "counter_name")?;
        c.push((name, g.u64("counter_value")?));
    }
    Ok(c)
}

impl QpStat {
    pub(super) fn put(&self, p: &mut Put) {
        p.u32(self.qpn)
            .u8(qp_type_to_wire(self.qp_type))
            .u8(self.state as u8);
        put_counters(p, &self.counters);
    }

    /// Bytes this QP adds to a `Stat` body.
    pub fn encoded_len(&self) -> usize {
        let mut p = Put::default();
        self.put(&mut p);
        p.0.len()
    }
}

impl Stats {
    pub(super) fn put(&self, p: &mut Put) {
        let groups = self.groups.len().min(u8::MAX as usize);
        p.u8(groups as u8);
        for g in &self.groups[..groups] {
            put_name(p, &g.name);
            put_counters(p, &g.counters);
        }
        let qps = self.qps.len().min(u16::MAX as usize);
        p.u16(qps as u16);
        for q in &self.qps[..qps] {
            q.put(p);
        }
        p.u32(self.next);
    }

    pub(super) fn get(g: &mut Get<'_>) -> Result<Self, BodyError> {
        let ng = g.u8("group_count")?;
        let mut groups = Vec::with_capacity(ng.into());
        for _ in 0..ng {
            groups.push(StatGroup {
                name: get_name(g, "group_name")?,
                counters: get_counters(g)?,
            });
        }
        let nq = g.u16("qp_count")?;
        let mut qps = Vec::with_capacity(usize::from(nq).min(g.b.len() / 8));
        for _ in 0..nq {
            let qpn = g.u32("qpn")?;
            let t = g.u8("qp_type")?;
            let qp_type = qp_type_from_wire(t).ok_or_else(|| g.bad("qp_type", t.into()))?;
            let s = g.u8("qp_state")?;
            let state = qp_state_from_wire(s).ok_or_else(|| g.bad("qp_state", s.into()))?;
            qps.push(QpStat {
                qpn,
                qp_type,
                state,
                counters: get_counters(g)?,
            });
        }
        Ok(Self {
            groups,
            qps,
            next: g.u32("next")?,
        })
    }

    /// Bytes of the body without QPs; each QP adds [`QpStat::encoded_len`].
    pub fn encoded_len(&self) -> usize {
        let mut p = Put::default();
        self.put(&mut p);
        p.0.len()
    }

    /// The counter `name` of group `group`.
    pub fn get_counter(&self, group: &str, name: &str) -> Option<u64> {
        self.groups
            .iter()
            .find(|g| g.name == group)?
            .counters
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
    }
}
