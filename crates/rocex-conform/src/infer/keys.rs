//! What the capture says about the responder's memory: which rkeys are valid, over which
//! ranges and with which rights; which reach the same bytes; which IETH rkeys are windows;
//! what an atomic found in memory before the first atomic on its address.

use std::collections::BTreeMap;

use rocex_proto::Access;
use rocex_proto::verbs::flush_access;
use rocex_wire::opcode::Operation;
use rocex_wire::{NakCode, feth};

use super::{InferenceKind, MAX_REGION, Memory, MrPlan, Plan, Seed};
use crate::connection::Connection;

/// One use of an rkey by a request.
struct Use {
    frame: u64,
    va: u64,
    len: u64,
    need: Access,
    refused: bool,
    /// A FLUSH of the whole region: its RETH names no range.
    whole: bool,
}

fn uses(conn: &Connection, plan: &Plan) -> BTreeMap<u32, Vec<Use>> {
    let mut by_key: BTreeMap<u32, Vec<Use>> = BTreeMap::new();
    for (i, req) in conn.requests.iter().enumerate() {
        let Some(p) = req.packet().filter(|_| plan.executed[i]) else {
            continue;
        };
        let answer = plan.answers[i].map(|j| plan.responses[j]);
        // A FLUSH the QP's own flags refused (NAK 0x61) never had its key looked at.
        if req.info.operation == Operation::Flush
            && answer.is_some_and(|r| r.is_nak(NakCode::InvalidRequest))
        {
            continue;
        }
        let refused = answer.is_some_and(|r| r.is_nak(NakCode::RemoteAccessError));
        let (rkey, va, len, need) = match (p.reth, p.atomic_eth) {
            (_, Some(a)) => (a.rkey, a.va, 8, Access::REMOTE_ATOMIC),
            (Some(r), None) => {
                let need = match req.info.operation {
                    Operation::ReadRequest => Access::REMOTE_READ,
                    Operation::Flush => flush_access(p.feth.map_or(0, |f| f.placement)),
                    _ => Access::REMOTE_WRITE,
                };
                (r.rkey, r.va, u64::from(r.dma_len), need)
            }
            _ => continue,
        };
        // A zero-byte READ or WRITE names no key (rxe `check_rkey`); every other
        // request's key is checked, a zero-length FLUSH's too.
        if len == 0
            && matches!(
                req.info.operation,
                Operation::ReadRequest | Operation::Write
            )
        {
            continue;
        }
        let whole = req.info.operation == Operation::Flush
            && p.feth
                .is_some_and(|f| f.selectivity == feth::SEL_MEMORY_REGION);
        by_key.entry(rkey).or_default().push(Use {
            frame: req.frame,
            va,
            len,
            need,
            refused,
            whole,
        });
    }
    by_key
}

pub(super) fn rkeys(conn: &Connection, plan: &mut Plan) {
    for (rkey, uses) in uses(conn, plan) {
        let ok: Vec<&Use> = uses.iter().filter(|u| !u.refused).collect();
        for u in uses.iter().filter(|u| u.refused) {
            let text = format!(
                "rkey {rkey:#x} refused for {} over [{:#x}, +{}): rxe answered NAK 0x62",
                u.need, u.va, u.len
            );
            plan.infer(u.frame, InferenceKind::RkeyInvalid, text);
        }
        if ok.is_empty() {
            continue;
        }
        // A whole-region FLUSH says nothing of the range; with only those, the region is
        // taken empty at the address they carry.
        let ranged: Vec<&&Use> = ok.iter().filter(|u| !u.whole).collect();
        let lo = ranged
            .iter()
            .map(|u| u.va)
            .min()
            .unwrap_or_else(|| ok.iter().map(|u| u.va).min().unwrap_or(0));
        let hi = ranged
            .iter()
            .map(|u| u.va.saturating_add(u.len))
            .max()
            .unwrap_or(lo);
        let access = ok.iter().fold(Access::LOCAL_WRITE, |a, u| a | u.need);
        if hi - lo > MAX_REGION {
            let text = format!(
                "rkey {rkey:#x} spans {} bytes: too large to register, left invalid",
                hi - lo
            );
            plan.infer(ok[0].frame, InferenceKind::RkeyInvalid, text);
            continue;
        }
        let text = format!(
            "rkey {rkey:#x} valid for {access} over [{lo:#x}, {hi:#x}): {} request(s) not refused",
            ok.len()
        );
        plan.infer(ok[0].frame, InferenceKind::RkeyValid, text);
        plan.mrs.push(MrPlan {
            rkey,
            iova: lo,
            len: hi - lo,
            access,
            memory: 0,
            window: false,
        });
    }
}

/// SEND_WITH_INV: rxe advances the MSN when the rkey was a window it invalidated, and
/// not when it named a region, whose QP then goes to error and answers nothing more. Which
/// of the two an rkey is, is read from rxe's answers for every IETH rkey: a window needs
/// the MSN advanced and, if requests follow, an answer to one of them (so a response lost
/// before the ACK cannot pass a region off as a window). A window that requests also
/// used is bound over their range; one named only by SEND_WITH_INV is allocated unbound.
pub(super) fn windows(conn: &Connection, plan: &mut Plan) {
    let mut decided: Vec<u32> = Vec::new();
    for (i, req) in conn.requests.iter().enumerate() {
        let Some(ieth) = req.packet().and_then(|p| p.ieth) else {
            continue;
        };
        if decided.contains(&ieth.rkey) {
            continue;
        }
        let Some(j) = plan.answers[i] else { continue };
        let Some((_, msn)) = plan.responses[j].aeth else {
            continue;
        };
        decided.push(ieth.rkey);
        let before = plan.responses[..j]
            .iter()
            .rev()
            .find_map(|r| r.aeth.map(|(_, m)| m))
            .unwrap_or(0);
        let later: Vec<usize> = (i + 1..conn.requests.len())
            .filter(|&k| conn.requests[k].psn.is_after(req.psn))
            .collect();
        let lived = later.iter().any(|&k| plan.answers[k].is_some());
        let frame = conn.responses[j].frame;
        let rkey = ieth.rkey;
        if msn == before || (!later.is_empty() && !lived) {
            let why = if msn == before {
                format!("rxe's ACK at frame {frame} left the MSN at {msn}")
            } else {
                format!(
                    "after rxe's ACK at frame {frame} none of the {} later request(s) was answered",
                    later.len()
                )
            };
            let text = format!("rkey {rkey:#x} names a memory region: {why}");
            plan.infer(req.frame, InferenceKind::MemoryRegion, text);
            continue;
        }
        match plan.mrs.iter_mut().find(|m| m.rkey == rkey) {
            Some(m) => m.window = true,
            None => plan.mws.push(rkey),
        }
        let text = format!(
            "rkey {rkey:#x} names a type-2 memory window: rxe's ACK at frame {frame} advanced the MSN to {msn}"
        );
        plan.infer(req.frame, InferenceKind::MemoryWindow, text);
    }
}

/// Groups the regions whose ranges overlap or touch into one memory each: rkeys that reach
/// the same addresses reach the same bytes (a window and the region under it, two
/// regions over one buffer), so a WRITE through one shows through the other.
pub(super) fn memories(conn: &Connection, plan: &mut Plan) {
    let mut order: Vec<usize> = (0..plan.mrs.len()).collect();
    order.sort_by_key(|&k| (plan.mrs[k].iova, plan.mrs[k].rkey));
    let mut groups: Vec<(Memory, Vec<usize>)> = Vec::new();
    for k in order {
        let (lo, hi) = (plan.mrs[k].iova, plan.mrs[k].iova + plan.mrs[k].len);
        match groups.last_mut() {
            Some((m, members)) if lo <= m.iova + m.len => {
                m.len = m.len.max(hi - m.iova);
                members.push(k);
            }
            _ => groups.push((
                Memory {
                    iova: lo,
                    len: hi - lo,
                },
                vec![k],
            )),
        }
    }
    let frame = conn.requests.first().map_or(0, |p| p.frame);
    for (index, (m, members)) in groups.into_iter().enumerate() {
        for &k in &members {
            plan.mrs[k].memory = index;
        }
        if members.len() > 1 {
            let keys: Vec<String> = members
                .iter()
                .map(|&k| format!("{:#x}", plan.mrs[k].rkey))
                .collect();
            let text = format!(
                "rkeys {} reach one memory [{:#x}, {:#x}): their ranges overlap",
                keys.join(", "),
                m.iova,
                m.iova + m.len
            );
            plan.infer(frame, InferenceKind::SharedMemory, text);
        }
        plan.memories.push(m);
    }
}

/// The value at each atomic address before the first atomic on it, from rxe's answer to
/// that atomic (or to its retransmission, which replays the same original value).
pub(super) fn atomics(conn: &Connection, plan: &mut Plan) {
    // Addresses are compared within a memory, whichever rkey reached them.
    let memory_of = |rkey: u32| plan.mrs.iter().find(|m| m.rkey == rkey).map(|m| m.memory);
    let mut seen: Vec<(Option<usize>, u64)> = Vec::new();
    let mut written: Vec<(Option<usize>, u64, u64)> = Vec::new();
    let mut seeds = Vec::new();
    let mut inferences = Vec::new();
    for (i, req) in conn.requests.iter().enumerate() {
        let Some(p) = req.packet().filter(|_| plan.executed[i]) else {
            continue;
        };
        if let Some(r) = p.reth.filter(|_| {
            matches!(
                req.info.operation,
                Operation::Write | Operation::AtomicWrite
            )
        }) {
            written.push((memory_of(r.rkey), r.va, u64::from(r.dma_len)));
        }
        let Some(a) = p.atomic_eth else { continue };
        let memory = memory_of(a.rkey);
        if seen.contains(&(memory, a.va)) {
            continue;
        }
        if plan.answers[i].is_some_and(|j| {
            plan.responses[j]
                .aeth_syndrome()
                .is_some_and(|s| !s.is_ack())
        }) {
            continue;
        }
        seen.push((memory, a.va));
        let answer = plan.answers[i].or_else(|| {
            (0..conn.responses.len()).find(|&j| {
                conn.responses[j].frame > req.frame
                    && plan.responses[j].psn == req.psn
                    && plan.responses[j].orig.is_some()
            })
        });
        let Some(j) = answer else { continue };
        let Some(value) = plan.responses[j].orig else {
            continue;
        };
        if written
            .iter()
            .any(|&(m, va, len)| m == memory && va <= a.va && a.va < va.saturating_add(len))
        {
            continue;
        }
        seeds.push(Seed {
            request: i,
            rkey: a.rkey,
            va: a.va,
            value,
        });
        let text = format!(
            "memory at rkey {:#x} va {:#x} held {value:#x} before the atomic at frame {}: rxe's ATOMIC ACK at frame {} returned it",
            a.rkey, a.va, req.frame, conn.responses[j].frame
        );
        inferences.push((req.frame, text));
    }
    plan.seeds.extend(seeds);
    for (frame, text) in inferences {
        plan.infer(frame, InferenceKind::AtomicOrig, text);
    }
}

#[cfg(test)]
mod tests {
    use rocex_proto::Access;

    use crate::infer::InferenceKind;
    use crate::infer::lab::{kinds, planned};

    #[test]
    fn a_window_and_its_region_are_one_memory_and_no_atomic_is_seeded() {
        // A WRITE through the window places the word a CMP_SWAP through the MR's rkey then
        // finds: one memory, so nothing needs seeding from rxe's answer.
        for name in ["probe_mw.pcap", "probe_mw-loss5.pcap"] {
            let p = planned(name);
            assert_eq!((p.mrs.len(), p.memories.len()), (2, 1), "{name}");
            assert!(p.mrs.iter().all(|m| m.memory == 0 && !m.window), "{name}");
            assert!(p.seeds.is_empty(), "{name}: {:?}", p.seeds);
            let k = kinds(&p);
            assert!(k.contains(&InferenceKind::SharedMemory), "{name}");
            assert!(!k.contains(&InferenceKind::AtomicOrig), "{name}");
        }
    }

    #[test]
    fn send_with_invalidate_tells_a_window_from_a_region() {
        for name in ["probe_mw_inv.pcap", "probe_mw_inv-loss5.pcap"] {
            let p = planned(name);
            assert_eq!(p.mrs.len(), 1, "{name}");
            assert!(
                p.mrs[0].window,
                "{name}: a bound window, used before its invalidation"
            );
            assert!(kinds(&p).contains(&InferenceKind::MemoryWindow), "{name}");
        }
        for name in ["probe_send_inv_mr.pcap", "probe_send_inv_mr-loss5.pcap"] {
            let p = planned(name);
            assert!(
                p.mrs.iter().all(|m| !m.window) && p.mws.is_empty(),
                "{name}"
            );
            assert!(kinds(&p).contains(&InferenceKind::MemoryRegion), "{name}");
        }
    }

    #[test]
    fn a_whole_region_flush_lends_its_rights_but_no_range() {
        let p = planned("probe_flush_mr.pcap");
        assert_eq!(p.mrs.len(), 1);
        let mr = &p.mrs[0];
        assert!(mr.access.contains(Access::FLUSH_GLOBAL));
        // The range is the WRITE's 4 KiB alone.
        assert_eq!(mr.len, 4096);
    }
}
