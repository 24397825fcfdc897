//! Random key, address, length and rights never panic, and every granted target lies inside
//! the region (and window) the key names.

use std::sync::Arc;

use proptest::prelude::*;
use rocex_mem::{Access, MemTable, PdId, Region, VecRegion};

/// One registered object and the byte range of its region a key may reach.
struct Known {
    key: u32,
    pd: PdId,
    remote: bool,
    region: Arc<dyn Region>,
    /// Region offsets `[lo, hi)` the key may reach.
    lo: u64,
    hi: u64,
}

struct World {
    table: MemTable,
    pds: [PdId; 2],
    known: Vec<Known>,
}

fn world(seed: u8, iova: u64, mr_len: u64, win: (u64, u64), access: u32) -> World {
    let mut table = MemTable::new([seed; 32]);
    let pds = [table.alloc_pd(), table.alloc_pd()];
    let mut known = Vec::new();
    let access = Access::from_bits_truncate(access) | Access::LOCAL_WRITE | Access::MW_BIND;
    let region: Arc<dyn Region> = Arc::new(VecRegion::new(mr_len as usize + 3));
    let iova = iova.min(u64::MAX - mr_len);
    for (i, zero_based) in [false, true].into_iter().enumerate() {
        let access = if zero_based {
            access | Access::ZERO_BASED
        } else {
            access.difference(Access::ZERO_BASED)
        }
        .difference(Access::FLUSH_PERSISTENT);
        let keys = table
            .reg_mr(pds[i], iova, mr_len, access, region.clone())
            .unwrap();
        for (key, remote) in [(keys.lkey, false), (keys.rkey, true)] {
            known.push(Known {
                key,
                pd: pds[i],
                remote,
                region: region.clone(),
                lo: 0,
                hi: mr_len,
            });
        }
        if !zero_based {
            let (start, len) = (win.0 % (mr_len + 1), win.1);
            let len = len % (mr_len - start + 1);
            let mw = table.alloc_mw(pds[i]).unwrap();
            let rkey = table
                .bind_mw(
                    pds[i],
                    mw,
                    keys.lkey,
                    iova + start,
                    len,
                    Access::REMOTE.difference(Access::FLUSH_PERSISTENT),
                )
                .unwrap();
            known.push(Known {
                key: rkey,
                pd: pds[i],
                remote: true,
                region: region.clone(),
                lo: start,
                hi: start + len,
            });
        }
    }
    World { table, pds, known }
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0u64..64,
        (u64::MAX - 64)..=u64::MAX,
        0x1000u64..0x1100,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hostile_queries_never_escape_the_registration(
        seed in any::<u8>(),
        iova in edge_u64(),
        mr_len in 1u64..256,
        win in (any::<u64>(), any::<u64>()),
        mr_access in any::<u32>(),
        queries in prop::collection::vec(
            (any::<u32>(), 0usize..6, any::<bool>(), edge_u64(), edge_u64(), any::<u32>(), any::<u64>(), 0usize..16),
            1..24,
        ),
    ) {
        let w = world(seed, iova, mr_len, win, mr_access);
        for (raw_key, pick, other_pd, va, len, need, rel, io_len) in queries {
            let known = w.known.get(pick);
            let key = known.map_or(raw_key, |k| k.key);
            let pd = match known {
                Some(k) if !other_pd => k.pd,
                _ => w.pds[usize::from(other_pd)],
            };
            let need = match need % 8 {
                0 => Access::from_bits_truncate(need),
                1 => Access::empty(),
                2 => Access::LOCAL_WRITE,
                3 => Access::REMOTE_WRITE,
                4 => Access::REMOTE_ATOMIC,
                5 => Access::FLUSH_GLOBAL,
                _ => Access::REMOTE_READ,
            };
            let (va, len) = match known {
                // Bias towards ranges near the registration (iova-based or zero-based) so
                // that many checks succeed.
                Some(_) if len > 512 => {
                    let base = if va & 1 == 0 { iova.min(u64::MAX - mr_len) } else { 0 };
                    (base.wrapping_add(va % 300), len % 300)
                }
                _ => (va, len),
            };
            for remote in [false, true] {
                let result = if remote {
                    w.table.check_rkey(pd, key, va, len, need)
                } else {
                    w.table.check_lkey(pd, key, va, len, need)
                };
                let Ok(target) = result else { continue };
                prop_assert_eq!(target.len(), len);
                if len == 0 {
                    prop_assert!(target.region().is_none());
                    continue;
                }
                let k = w.known.iter().find(|k| k.key == key && k.remote == remote);
                prop_assert!(k.is_some(), "granted a key in a role it does not have");
                let k = k.unwrap();
                prop_assert!(Arc::ptr_eq(target.region().unwrap(), &k.region));
                prop_assert!(target.offset() >= k.lo);
                prop_assert!(target.offset() + target.len() <= k.hi);
                // Accesses through the target never panic and stay inside it.
                let mut buf = vec![0u8; io_len];
                let fits = rel.checked_add(io_len as u64).is_some_and(|end| end <= target.len());
                prop_assert_eq!(target.read_at(rel, &mut buf).is_ok(), fits || io_len == 0 && rel <= target.len());
                let _ = target.write_at(rel % (target.len() + 1), &buf);
                let _ = target.fetch_add(rel, 1);
                let _ = target.compare_swap(rel % 16, 0, 1);
                let _ = target.slice(rel, io_len as u64);
                let _ = target.flush(need.contains(Access::FLUSH_PERSISTENT));
            }
        }
    }

    #[test]
    fn hostile_management_calls_never_panic(
        seed in any::<u8>(),
        ops in prop::collection::vec((0u8..8, any::<u32>(), 0usize..8, edge_u64(), edge_u64(), any::<u32>()), 1..64),
    ) {
        let mut t = MemTable::new([seed; 32]);
        let mut pds = vec![t.alloc_pd()];
        let mut keys: Vec<u32> = Vec::new();
        let region: Arc<dyn Region> = Arc::new(VecRegion::new(128));
        for (op, raw, pick, a, b, bits) in ops {
            let key = keys.get(pick).copied().unwrap_or(raw);
            let pd = pds.get(pick % 2).copied().unwrap_or(PdId::from_raw(raw));
            let access = Access::from_bits_truncate(bits);
            match op {
                0 => pds.push(t.alloc_pd()),
                1 => {
                    let _ = t.dealloc_pd(pd);
                }
                2 => {
                    if let Ok(k) = t.reg_mr(pd, a, b % 256, access, region.clone()) {
                        keys.extend([k.lkey, k.rkey]);
                    }
                }
                3 => {
                    let _ = t.dereg_mr(key);
                }
                4 => {
                    if let Ok(k) = t.alloc_mw(pd) {
                        keys.push(k);
                    }
                }
                5 => {
                    let mr = keys.get(pick / 2).copied().unwrap_or(raw);
                    if let Ok(k) = t.bind_mw(pd, key, mr, a, b, access) {
                        keys.push(k);
                    }
                }
                6 => {
                    let _ = t.invalidate(pd, key);
                }
                _ => {
                    let _ = t.dealloc_mw(key);
                }
            }
            if let Ok(target) = t.check_rkey(pd, key, a, b, access) {
                prop_assert!(target.offset() + target.len() <= 128);
            }
        }
    }
}
