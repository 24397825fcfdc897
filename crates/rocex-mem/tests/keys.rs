//! Keys are unpredictable: distinct, never 0, and with no arithmetic pattern between them.

use std::collections::HashSet;
use std::sync::Arc;

use rocex_mem::{Access, MemTable, VecRegion};

/// 1000 consecutive keys from a table seeded with `seed`: MR lkeys, MR rkeys and MW rkeys
/// interleaved, as an application would draw them.
fn draw_keys(seed: [u8; 32]) -> Vec<u32> {
    let mut t = MemTable::new(seed);
    let pd = t.alloc_pd();
    let region = Arc::new(VecRegion::new(64));
    let mut keys = Vec::with_capacity(1000);
    while keys.len() < 1000 {
        let k = t
            .reg_mr(pd, 0x1000, 64, Access::MW_BIND, region.clone())
            .unwrap();
        keys.extend([k.lkey, k.rkey]);
        keys.push(t.alloc_mw(pd).unwrap());
    }
    keys.truncate(1000);
    keys
}

#[test]
fn keys_are_distinct_nonzero_and_not_sequential() {
    for seed in [
        [0u8; 32],
        [1; 32],
        [0xff; 32],
        *b"rocex-mem key unpredictability!!",
    ] {
        let keys = draw_keys(seed);
        let distinct: HashSet<u32> = keys.iter().copied().collect();
        assert_eq!(distinct.len(), keys.len());
        assert!(!keys.contains(&0));

        let steps: Vec<u32> = keys.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
        // No two consecutive keys differ by a small constant in either direction ...
        for &d in &steps {
            assert!(d > 1 << 16 && d < u32::MAX - (1 << 16), "step {d:#x}");
        }
        // ... nor by any repeated constant.
        let distinct_steps: HashSet<u32> = steps.iter().copied().collect();
        assert!(distinct_steps.len() > steps.len() - 3);

        // Each bit is set in roughly half the keys.
        for bit in 0..32 {
            let ones = keys.iter().filter(|&&k| k >> bit & 1 == 1).count();
            assert!((400..=600).contains(&ones), "bit {bit} set {ones} times");
        }
    }
}

#[test]
fn the_seed_decides_the_keys() {
    assert_eq!(draw_keys([9; 32]), draw_keys([9; 32]));
    let a: HashSet<u32> = draw_keys([9; 32]).into_iter().collect();
    let b: HashSet<u32> = draw_keys([10; 32]).into_iter().collect();
    assert!(a.intersection(&b).count() < 3);
}

#[test]
fn a_rebound_window_never_gets_a_recent_key_back() {
    let mut t = MemTable::new([5; 32]);
    let pd = t.alloc_pd();
    let mr = t
        .reg_mr(
            pd,
            0,
            64,
            Access::MW_BIND | Access::LOCAL_WRITE,
            Arc::new(VecRegion::new(64)),
        )
        .unwrap();
    let mut rkey = t.alloc_mw(pd).unwrap();
    let mut seen = HashSet::from([rkey, mr.lkey, mr.rkey]);
    for _ in 0..2000 {
        rkey = t
            .bind_mw(pd, rkey, mr.lkey, 0, 64, Access::REMOTE_READ)
            .unwrap();
        assert!(seen.insert(rkey));
        t.invalidate(pd, rkey).unwrap();
    }
}
