//! Each rule of the memory table, with the error it produces.

use std::sync::Arc;

use rocex_mem::{Access, Keys, MemError, MemTable, MwBinding, PdId, Region, Target, VecRegion};

const IOVA: u64 = 0x7f00_0000_1000;
const LEN: u64 = 4096;

const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);
const ALL_REMOTE: Access = RW
    .union(Access::REMOTE_ATOMIC)
    .union(Access::FLUSH_GLOBAL)
    .union(Access::MW_BIND);

fn region(len: u64) -> Arc<VecRegion> {
    Arc::new(VecRegion::new(len as usize))
}

fn table() -> (MemTable, PdId) {
    let mut t = MemTable::new([42; 32]);
    let pd = t.alloc_pd();
    (t, pd)
}

fn with_mr(access: Access) -> (MemTable, PdId, Keys, Arc<VecRegion>) {
    let (mut t, pd) = table();
    let r = region(LEN);
    let keys = t.reg_mr(pd, IOVA, LEN, access, r.clone()).unwrap();
    (t, pd, keys, r)
}

/// Whether a check or bind failed for want of access rights.
fn denied<T>(r: Result<T, MemError>) -> bool {
    matches!(r, Err(MemError::AccessDenied { .. }))
}

fn bytes(target: &Target) -> Vec<u8> {
    let mut buf = vec![0; target.len() as usize];
    target.read_at(0, &mut buf).unwrap();
    buf
}

#[test]
fn rkey_bounds_at_the_edge_and_one_past() {
    let (t, pd, k, _) = with_mr(RW);
    let read = Access::REMOTE_READ;
    let whole = t.check_rkey(pd, k.rkey, IOVA, LEN, read).unwrap();
    assert_eq!((whole.offset(), whole.len()), (0, LEN));
    let last = t.check_rkey(pd, k.rkey, IOVA + LEN - 1, 1, read).unwrap();
    assert_eq!(last.offset(), LEN - 1);
    assert_eq!(
        t.check_rkey(pd, k.rkey, IOVA, LEN + 1, read).unwrap_err(),
        MemError::OutOfBounds {
            addr: IOVA,
            len: LEN + 1
        }
    );
    assert_eq!(
        t.check_rkey(pd, k.rkey, IOVA + LEN, 1, read).unwrap_err(),
        MemError::OutOfBounds {
            addr: IOVA + LEN,
            len: 1
        }
    );
    assert_eq!(
        t.check_rkey(pd, k.rkey, IOVA - 1, 1, read).unwrap_err(),
        MemError::OutOfBounds {
            addr: IOVA - 1,
            len: 1
        }
    );
}

#[test]
fn lkey_bounds_at_the_edge_and_one_past() {
    let (t, pd, k, _) = with_mr(RW);
    let w = Access::LOCAL_WRITE;
    assert!(t.check_lkey(pd, k.lkey, IOVA, LEN, w).is_ok());
    assert!(t.check_lkey(pd, k.lkey, IOVA + 1, LEN - 1, w).is_ok());
    assert!(matches!(
        t.check_lkey(pd, k.lkey, IOVA + 1, LEN, w),
        Err(MemError::OutOfBounds { .. })
    ));
    assert!(matches!(
        t.check_lkey(pd, k.lkey, IOVA - 1, 2, w),
        Err(MemError::OutOfBounds { .. })
    ));
}

#[test]
fn ranges_that_wrap_are_overflow_not_panics() {
    let (mut t, pd, k, _) = with_mr(RW);
    let read = Access::REMOTE_READ;
    assert_eq!(
        t.check_rkey(pd, k.rkey, u64::MAX, 1, read).unwrap_err(),
        MemError::Overflow
    );
    assert_eq!(
        t.check_rkey(pd, k.rkey, IOVA, u64::MAX, read).unwrap_err(),
        MemError::Overflow
    );
    assert_eq!(
        t.check_lkey(pd, k.lkey, u64::MAX - 7, 8, Access::empty())
            .unwrap_err(),
        MemError::Overflow
    );
    assert!(matches!(
        t.check_rkey(pd, k.rkey, u64::MAX - 8, 8, read),
        Err(MemError::OutOfBounds { .. })
    ));
    // An MR whose end would pass u64::MAX cannot be registered.
    assert_eq!(
        t.reg_mr(pd, u64::MAX - 8, 16, RW, region(16)).unwrap_err(),
        MemError::Overflow
    );
    // One that ends just below does, and its last byte is reachable.
    let top = t.reg_mr(pd, u64::MAX - 16, 16, RW, region(16)).unwrap();
    let target = t.check_rkey(pd, top.rkey, u64::MAX - 1, 1, read).unwrap();
    assert_eq!(target.offset(), 15);
    assert_eq!(
        t.check_rkey(pd, top.rkey, u64::MAX, 1, read).unwrap_err(),
        MemError::Overflow
    );
}

#[test]
fn access_flags_are_enforced_each_way() {
    let (t, pd, ro, _) = with_mr(Access::REMOTE_READ);
    assert!(
        t.check_rkey(pd, ro.rkey, IOVA, 8, Access::REMOTE_READ)
            .is_ok()
    );
    assert_eq!(
        t.check_rkey(pd, ro.rkey, IOVA, 8, Access::REMOTE_WRITE)
            .unwrap_err(),
        MemError::AccessDenied {
            need: Access::REMOTE_WRITE,
            have: Access::REMOTE_READ
        }
    );
    for need in [Access::REMOTE_ATOMIC, Access::FLUSH_GLOBAL] {
        assert!(denied(t.check_rkey(pd, ro.rkey, IOVA, 8, need)), "{need}");
    }
    // No LOCAL_WRITE: fine for send data, not for a receive buffer.
    assert!(t.check_lkey(pd, ro.lkey, IOVA, 8, Access::empty()).is_ok());
    assert_eq!(
        t.check_lkey(pd, ro.lkey, IOVA, 8, Access::LOCAL_WRITE)
            .unwrap_err(),
        MemError::AccessDenied {
            need: Access::LOCAL_WRITE,
            have: Access::empty()
        }
    );

    let (t, pd, all, _) = with_mr(ALL_REMOTE);
    for need in [
        Access::REMOTE_READ,
        Access::REMOTE_WRITE,
        Access::REMOTE_ATOMIC,
        Access::FLUSH_GLOBAL,
    ] {
        assert!(t.check_rkey(pd, all.rkey, IOVA, 8, need).is_ok(), "{need}");
    }
    // ...but not persistence, which the MR was not given; an rkey grants no local rights,
    // and an lkey no remote ones.
    for need in [Access::FLUSH_PERSISTENT, Access::LOCAL_WRITE] {
        assert!(denied(t.check_rkey(pd, all.rkey, IOVA, 8, need)), "{need}");
    }
    let read = Access::REMOTE_READ;
    assert!(denied(t.check_lkey(pd, all.lkey, IOVA, 8, read)));
}

#[test]
fn keys_are_only_valid_in_their_own_role() {
    let (t, pd, k, _) = with_mr(RW);
    assert_ne!(k.lkey, k.rkey);
    assert_eq!(
        t.check_rkey(pd, k.lkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::UnknownKey { key: k.lkey }
    );
    assert_eq!(
        t.check_lkey(pd, k.rkey, IOVA, 8, Access::empty())
            .unwrap_err(),
        MemError::UnknownKey { key: k.rkey }
    );
    let bogus = k.rkey ^ 0x8000_0000;
    assert_eq!(
        t.check_rkey(pd, bogus, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::UnknownKey { key: bogus }
    );
}

#[test]
fn registration_rejects_invalid_access_and_sizes() {
    let (mut t, pd) = table();
    for bad in [
        Access::REMOTE_WRITE,
        Access::REMOTE_ATOMIC,
        Access::REMOTE_READ | Access::REMOTE_WRITE,
    ] {
        assert!(matches!(
            t.reg_mr(pd, IOVA, LEN, bad, region(LEN)),
            Err(MemError::InvalidAccess(_))
        ));
    }
    assert_eq!(
        t.reg_mr(pd, IOVA, LEN + 1, RW, region(LEN)).unwrap_err(),
        MemError::RegionTooShort {
            len: LEN + 1,
            available: LEN
        }
    );
    let ghost = PdId::from_raw(pd.raw() + 100);
    assert_eq!(
        t.reg_mr(ghost, IOVA, LEN, RW, region(LEN)).unwrap_err(),
        MemError::UnknownPd { pd: ghost }
    );
    assert_eq!(t.mr_count(), 0);
    // A shorter MR over a longer region is fine.
    assert!(t.reg_mr(pd, IOVA, LEN - 1, RW, region(LEN)).is_ok());
}

#[test]
fn a_key_from_another_pd_is_wrong_pd() {
    let (mut t, pd, k, _) = with_mr(RW);
    let other = t.alloc_pd();
    assert_ne!(pd, other);
    assert_eq!(
        t.check_rkey(other, k.rkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::WrongPd
    );
    assert_eq!(
        t.check_lkey(other, k.lkey, IOVA, 8, Access::empty())
            .unwrap_err(),
        MemError::WrongPd
    );
    let mw = t.alloc_mw(other).unwrap();
    assert_eq!(
        t.bind_mw(pd, mw, k.lkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::WrongPd
    );
    // The window's PD matches, the region's does not.
    assert_eq!(
        t.bind_mw(other, mw, k.lkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::WrongPd
    );
}

#[test]
fn zero_length_local_entries_need_no_valid_key() {
    let (t, pd) = table();
    assert!(
        t.check_lkey(pd, 0, 0, 0, Access::LOCAL_WRITE)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn zero_length_remote_accesses_still_check_the_key_rights_and_address() {
    // rxe `check_rkey`: only a zero-byte READ or WRITE skips the lookup, and the engine
    // does that skip; a zero-length FLUSH range or anything else is checked.
    let (t, pd, k, _) = with_mr(RW | Access::FLUSH_GLOBAL);
    assert_eq!(
        t.check_rkey(pd, 0xdead_beef, IOVA, 0, Access::FLUSH_GLOBAL)
            .unwrap_err(),
        MemError::UnknownKey { key: 0xdead_beef }
    );
    assert!(matches!(
        t.check_rkey(pd, k.rkey, IOVA, 0, Access::FLUSH_PERSISTENT),
        Err(MemError::AccessDenied { .. })
    ));
    assert!(matches!(
        t.check_rkey(pd, k.rkey, IOVA + LEN + 1, 0, Access::FLUSH_GLOBAL),
        Err(MemError::OutOfBounds { .. })
    ));
    let end = t
        .check_rkey(pd, k.rkey, IOVA + LEN, 0, Access::FLUSH_GLOBAL)
        .unwrap();
    assert!(end.is_empty() && end.region().is_none());
    assert!(end.write_at(0, &[1]).is_err());
}

#[test]
fn a_whole_region_check_checks_the_key_and_covers_the_region_or_window() {
    let (mut t, pd) = table();
    let r = region(LEN);
    let k = t.reg_mr(pd, IOVA, LEN, ALL_REMOTE, r.clone()).unwrap();
    let whole = t
        .check_rkey_whole(pd, k.rkey, Access::FLUSH_GLOBAL)
        .unwrap();
    assert_eq!((whole.offset(), whole.len()), (0, LEN));
    assert!(matches!(
        t.check_rkey_whole(pd, k.rkey, Access::FLUSH_PERSISTENT),
        Err(MemError::AccessDenied { .. })
    ));
    assert_eq!(
        t.check_rkey_whole(pd, k.lkey, Access::FLUSH_GLOBAL)
            .unwrap_err(),
        MemError::UnknownKey { key: k.lkey }
    );
    let other = t.alloc_pd();
    assert_eq!(
        t.check_rkey_whole(other, k.rkey, Access::FLUSH_GLOBAL)
            .unwrap_err(),
        MemError::WrongPd
    );
    // A window: its own range, and nothing once it is invalidated.
    let mw = t.alloc_mw(pd).unwrap();
    let grant = Access::REMOTE_WRITE | Access::FLUSH_GLOBAL;
    let w = t.bind_mw(pd, mw, k.lkey, IOVA + 64, 128, grant).unwrap();
    let view = t.check_rkey_whole(pd, w, Access::FLUSH_GLOBAL).unwrap();
    assert_eq!((view.offset(), view.len()), (64, 128));
    t.invalidate(pd, w).unwrap();
    assert_eq!(
        t.check_rkey_whole(pd, w, Access::FLUSH_GLOBAL).unwrap_err(),
        MemError::Invalidated
    );
}

#[test]
fn zero_based_mr_counts_remote_addresses_from_zero() {
    let access = RW | Access::ZERO_BASED;
    let (t, pd, k, r) = with_mr(access);
    let target = t
        .check_rkey(pd, k.rkey, 16, 4, Access::REMOTE_WRITE)
        .unwrap();
    assert_eq!(target.offset(), 16);
    target.write_at(0, &[1, 2, 3, 4]).unwrap();
    assert_eq!(r.snapshot()[16..20], [1, 2, 3, 4]);
    assert!(
        t.check_rkey(pd, k.rkey, 0, LEN, Access::REMOTE_READ)
            .is_ok()
    );
    assert!(matches!(
        t.check_rkey(pd, k.rkey, 1, LEN, Access::REMOTE_READ),
        Err(MemError::OutOfBounds { .. })
    ));
    // The iova no longer works remotely, but still does locally.
    assert!(matches!(
        t.check_rkey(pd, k.rkey, IOVA, 4, Access::REMOTE_READ),
        Err(MemError::OutOfBounds { .. })
    ));
    let local = t
        .check_lkey(pd, k.lkey, IOVA + 16, 4, Access::empty())
        .unwrap();
    assert_eq!(bytes(&local), [1, 2, 3, 4]);
}

#[test]
fn targets_reach_the_registered_bytes_and_run_atomics() {
    let access = RW | Access::REMOTE_ATOMIC;
    let (t, pd, k, r) = with_mr(access);
    let w = t
        .check_rkey(pd, k.rkey, IOVA + 8, 8, Access::REMOTE_ATOMIC)
        .unwrap();
    assert_eq!(w.fetch_add(0, 5), Ok(0));
    assert_eq!(w.compare_swap(0, 5, 9), Ok(5));
    assert_eq!(w.compare_swap(0, 5, 1), Ok(9));
    w.atomic_write(0, 0x1122_3344_5566_7788).unwrap();
    assert_eq!(r.snapshot()[8..16], 0x1122_3344_5566_7788u64.to_ne_bytes());
    let odd = t
        .check_rkey(pd, k.rkey, IOVA + 4, 8, Access::REMOTE_ATOMIC)
        .unwrap();
    assert_eq!(odd.fetch_add(0, 1), Err(MemError::Misaligned { offset: 4 }));
}

#[test]
fn persistent_flush_needs_a_persistent_region() {
    let (mut t, pd) = table();
    let flush_p = Access::FLUSH_PERSISTENT;
    assert!(matches!(
        t.reg_mr(pd, IOVA, LEN, flush_p, region(LEN)),
        Err(MemError::InvalidAccess(_))
    ));
    // A global-flush MR over plain memory: global flush works, persistent flush is refused.
    let plain = t
        .reg_mr(pd, IOVA, LEN, Access::FLUSH_GLOBAL, region(LEN))
        .unwrap();
    let g = t
        .check_rkey(pd, plain.rkey, IOVA, LEN, Access::FLUSH_GLOBAL)
        .unwrap();
    assert_eq!(g.flush(false), Ok(()));
    assert_eq!(
        g.flush(true),
        Err(MemError::Flush(rocex_mem::FlushError::NotPersistent))
    );
    assert!(matches!(
        t.check_rkey(pd, plain.rkey, IOVA, LEN, flush_p),
        Err(MemError::AccessDenied { .. })
    ));

    let pmem: Arc<dyn Region> = Arc::new(VecRegion::new(LEN as usize).with_persistent(true));
    let p = t
        .reg_mr(pd, IOVA, LEN, flush_p | Access::FLUSH_GLOBAL, pmem)
        .unwrap();
    let target = t.check_rkey(pd, p.rkey, IOVA, LEN, flush_p).unwrap();
    assert_eq!(target.flush(true), Ok(()));
}

#[test]
fn mw_bind_invalidate_rebind_changes_the_rkey() {
    let (mut t, pd, mr, r) = with_mr(RW | Access::MW_BIND);
    let mw0 = t.alloc_mw(pd).unwrap();
    assert_eq!(t.mw_count(), 1);
    // Unbound: the rkey names the window but grants nothing.
    assert_eq!(
        t.check_rkey(pd, mw0, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::Invalidated
    );

    let win = IOVA + 256;
    let mw1 = t
        .bind_mw(pd, mw0, mr.lkey, win, 64, Access::REMOTE_WRITE)
        .unwrap();
    assert_ne!(mw1, mw0);
    assert_eq!(t.mr(mr.lkey).unwrap().bound_mws, 1);
    assert_eq!(
        t.check_rkey(pd, mw0, win, 8, Access::REMOTE_WRITE)
            .unwrap_err(),
        MemError::UnknownKey { key: mw0 }
    );
    let target = t
        .check_rkey(pd, mw1, win, 64, Access::REMOTE_WRITE)
        .unwrap();
    assert_eq!((target.offset(), target.len()), (256, 64));
    target.write_at(0, &[7; 64]).unwrap();
    assert!(r.snapshot()[256..320].iter().all(|&b| b == 7));
    // The window, not the region, bounds the access and sets the rights.
    assert!(matches!(
        t.check_rkey(pd, mw1, win, 65, Access::REMOTE_WRITE),
        Err(MemError::OutOfBounds { .. })
    ));
    assert!(matches!(
        t.check_rkey(pd, mw1, win - 1, 1, Access::REMOTE_WRITE),
        Err(MemError::OutOfBounds { .. })
    ));
    assert!(matches!(
        t.check_rkey(pd, mw1, win, 8, Access::REMOTE_READ),
        Err(MemError::AccessDenied { .. })
    ));
    // Bound type-2 windows cannot be bound again, and hold their region.
    assert_eq!(
        t.bind_mw(pd, mw1, mr.lkey, win, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::MwBound
    );
    assert_eq!(t.dereg_mr(mr.lkey), Err(MemError::Busy));

    t.invalidate(pd, mw1).unwrap();
    assert_eq!(
        t.check_rkey(pd, mw1, win, 8, Access::REMOTE_WRITE)
            .unwrap_err(),
        MemError::Invalidated
    );
    assert_eq!(t.mr(mr.lkey).unwrap().bound_mws, 0);
    // Invalidating a free window again is harmless, as in rxe.
    assert_eq!(t.invalidate(pd, mw1), Ok(()));

    let mw2 = t
        .bind_mw(pd, mw1, mr.lkey, IOVA, LEN, Access::REMOTE_READ)
        .unwrap();
    assert!(mw2 != mw1 && mw2 != mw0);
    assert!(
        t.check_rkey(pd, mw2, IOVA, LEN, Access::REMOTE_READ)
            .is_ok()
    );
    assert_eq!(t.mw(mw2).unwrap().binding.unwrap().len, LEN);
    assert!(t.mw(mw1).is_none());

    t.dealloc_mw(mw2).unwrap();
    assert_eq!(t.mr(mr.lkey).unwrap().bound_mws, 0);
    assert!(matches!(
        t.check_rkey(pd, mw2, IOVA, 8, Access::REMOTE_READ),
        Err(MemError::UnknownKey { .. })
    ));
    t.dereg_mr(mr.lkey).unwrap();
    t.dealloc_pd(pd).unwrap();
}

#[test]
fn mw_bind_checks_the_region() {
    let (mut t, pd, plain, _) = with_mr(RW);
    let mw = t.alloc_mw(pd).unwrap();
    assert_eq!(
        t.bind_mw(pd, mw, plain.lkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::AccessDenied {
            need: Access::MW_BIND,
            have: RW
        }
    );
    let ro = t
        .reg_mr(pd, IOVA, LEN, Access::MW_BIND, region(LEN))
        .unwrap();
    // Remote write through a window needs LOCAL_WRITE on the region.
    assert!(matches!(
        t.bind_mw(pd, mw, ro.lkey, IOVA, 8, Access::REMOTE_WRITE),
        Err(MemError::AccessDenied { .. })
    ));
    assert!(matches!(
        t.bind_mw(pd, mw, ro.lkey, IOVA, 8, Access::MW_BIND),
        Err(MemError::InvalidAccess(_))
    ));
    assert!(matches!(
        t.bind_mw(pd, mw, ro.lkey, IOVA, LEN + 1, Access::REMOTE_READ),
        Err(MemError::OutOfBounds { .. })
    ));
    assert!(matches!(
        t.bind_mw(pd, mw, ro.lkey, IOVA - 1, 8, Access::REMOTE_READ),
        Err(MemError::OutOfBounds { .. })
    ));
    assert_eq!(
        t.bind_mw(pd, mw, ro.lkey, u64::MAX, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::Overflow
    );
    let zb = t
        .reg_mr(
            pd,
            0,
            LEN,
            Access::MW_BIND | Access::ZERO_BASED,
            region(LEN),
        )
        .unwrap();
    assert!(matches!(
        t.bind_mw(pd, mw, zb.lkey, 0, 8, Access::REMOTE_READ),
        Err(MemError::InvalidAccess(_))
    ));
    // An MR's rkey is not a window.
    assert_eq!(
        t.bind_mw(pd, ro.rkey, ro.lkey, IOVA, 8, Access::REMOTE_READ)
            .unwrap_err(),
        MemError::UnknownKey { key: ro.rkey }
    );
    // After all the failures the window is still free and bindable at the region's edge.
    assert!(
        t.bind_mw(pd, mw, ro.lkey, IOVA + LEN - 8, 8, Access::REMOTE_READ)
            .is_ok()
    );
}

#[test]
fn zero_based_window_counts_from_the_window_start() {
    let (mut t, pd, mr, r) = with_mr(RW | Access::MW_BIND);
    let mw = t.alloc_mw(pd).unwrap();
    let access = Access::REMOTE_READ | Access::ZERO_BASED;
    let rkey = t.bind_mw(pd, mw, mr.lkey, IOVA + 100, 50, access).unwrap();
    let target = t.check_rkey(pd, rkey, 10, 40, Access::REMOTE_READ).unwrap();
    assert_eq!((target.offset(), target.len()), (110, 40));
    assert!(matches!(
        t.check_rkey(pd, rkey, 10, 41, Access::REMOTE_READ),
        Err(MemError::OutOfBounds { .. })
    ));
    r.write(110, b"hello");
    let mut buf = [0; 5];
    target.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
}

#[test]
fn send_with_inv_naming_an_mr_is_not_invalidatable() {
    let (mut t, pd, mr, _) = with_mr(RW);
    assert_eq!(t.invalidate(pd, mr.rkey), Err(MemError::NotInvalidatable));
    assert_eq!(t.invalidate(pd, mr.lkey), Err(MemError::NotInvalidatable));
    // The MR is untouched.
    assert!(
        t.check_rkey(pd, mr.rkey, IOVA, 8, Access::REMOTE_READ)
            .is_ok()
    );
    assert_eq!(
        t.invalidate(pd, 0x1234_5678),
        Err(MemError::UnknownKey { key: 0x1234_5678 })
    );
    let other = t.alloc_pd();
    let mw = t.alloc_mw(other).unwrap();
    assert_eq!(t.invalidate(pd, mw), Err(MemError::WrongPd));
}

#[test]
fn deregistered_keys_fail_and_pds_stay_busy_while_used() {
    let (mut t, pd, k, _) = with_mr(RW);
    let mw = t.alloc_mw(pd).unwrap();
    assert_eq!(t.dealloc_pd(pd), Err(MemError::Busy));
    t.dereg_mr(k.lkey).unwrap();
    assert_eq!(
        t.dereg_mr(k.lkey),
        Err(MemError::UnknownKey { key: k.lkey })
    );
    assert!(matches!(
        t.check_rkey(pd, k.rkey, IOVA, 8, Access::REMOTE_READ),
        Err(MemError::UnknownKey { .. })
    ));
    assert!(matches!(
        t.check_lkey(pd, k.lkey, IOVA, 8, Access::empty()),
        Err(MemError::UnknownKey { .. })
    ));
    assert_eq!(t.dealloc_pd(pd), Err(MemError::Busy));
    t.dealloc_mw(mw).unwrap();
    assert_eq!(t.dealloc_mw(mw), Err(MemError::UnknownKey { key: mw }));
    t.dealloc_pd(pd).unwrap();
    assert_eq!(t.dealloc_pd(pd), Err(MemError::UnknownPd { pd }));
    assert_eq!(t.alloc_mw(pd), Err(MemError::UnknownPd { pd }));
    assert_eq!((t.pd_count(), t.mr_count(), t.mw_count()), (0, 0, 0));
}

#[test]
fn a_target_outlives_deregistration_but_the_key_does_not() {
    let (mut t, pd, k, r) = with_mr(RW);
    let target = t
        .check_rkey(pd, k.rkey, IOVA, 4, Access::REMOTE_WRITE)
        .unwrap();
    t.dereg_mr(k.lkey).unwrap();
    target.write_at(0, &[9; 4]).unwrap();
    assert_eq!(r.snapshot()[..4], [9; 4]);
}

#[test]
fn errors_display_as_one_sentence() {
    let errors = [
        MemError::UnknownPd {
            pd: PdId::from_raw(3),
        },
        MemError::UnknownKey { key: 0xabcd },
        MemError::WrongPd,
        MemError::AccessDenied {
            need: Access::REMOTE_WRITE,
            have: Access::REMOTE_READ,
        },
        MemError::OutOfBounds { addr: 16, len: 8 },
        MemError::Overflow,
        MemError::Busy,
        MemError::InvalidAccess("why"),
        MemError::NotInvalidatable,
        MemError::Invalidated,
        MemError::MwBound,
        MemError::RegionTooShort {
            len: 9,
            available: 8,
        },
        MemError::Misaligned { offset: 4 },
        MemError::Flush(rocex_mem::FlushError::NotPersistent),
        MemError::KeysExhausted,
    ];
    for e in errors {
        let s = e.to_string();
        assert!(s.ends_with('.'), "{s}");
        assert_eq!(s.matches(". ").count(), 0, "{s}");
        assert!(s.chars().next().unwrap().is_uppercase(), "{s}");
    }
}

#[test]
fn a_window_bound_keeping_its_key_is_reached_through_that_key_until_invalidated() {
    let (mut t, pd, k, r) = with_mr(ALL_REMOTE);
    let mw = t.alloc_mw_with_key(pd, 0x1234_5600).unwrap();
    let grant = Access::REMOTE_WRITE;
    let to = |addr, len| MwBinding {
        mr_lkey: k.lkey,
        addr,
        len,
        access: grant,
    };
    assert_eq!(t.bind_mw_keeping_key(pd, mw, to(IOVA + 8, 16)), Ok(mw));
    // The window and its region's own rkey reach the same bytes.
    t.check_rkey(pd, mw, IOVA + 8, 8, grant)
        .unwrap()
        .write_at(0, &[7; 8])
        .unwrap();
    let word = t
        .check_rkey(pd, k.rkey, IOVA + 8, 8, Access::REMOTE_ATOMIC)
        .unwrap();
    assert_eq!(word.fetch_add(0, 1), Ok(0x0707_0707_0707_0707));
    assert_eq!(r.snapshot()[8], 8);
    // Same rules as bind_mw: a bound window is not bound again.
    assert_eq!(
        t.bind_mw_keeping_key(pd, mw, to(IOVA, 8)),
        Err(MemError::MwBound)
    );
    t.invalidate(pd, mw).unwrap();
    assert_eq!(
        t.check_rkey(pd, mw, IOVA + 8, 8, grant).unwrap_err(),
        MemError::Invalidated
    );
}

#[test]
fn a_window_bound_with_a_chosen_key_byte_answers_only_to_the_new_key() {
    let (mut t, pd, k, _r) = with_mr(ALL_REMOTE);
    let mw = t.alloc_mw_with_key(pd, 0x1234_5600).unwrap();
    let to = MwBinding {
        mr_lkey: k.lkey,
        addr: IOVA,
        len: 64,
        access: Access::REMOTE_WRITE,
    };
    // rxe keeps the upper 24 bits and takes the low byte the binder chose.
    assert_eq!(t.bind_mw_with_key(pd, mw, 0x01, to), Ok(0x1234_5601));
    assert!(
        t.check_rkey(pd, 0x1234_5601, IOVA, 8, Access::REMOTE_WRITE)
            .is_ok()
    );
    assert_eq!(
        t.check_rkey(pd, mw, IOVA, 8, Access::REMOTE_WRITE)
            .unwrap_err(),
        MemError::UnknownKey { key: mw }
    );
    // Invalidated, then bound again under the next key byte.
    t.invalidate(pd, 0x1234_5601).unwrap();
    assert_eq!(
        t.bind_mw_with_key(pd, 0x1234_5601, 0x02, to),
        Ok(0x1234_5602)
    );
    // A key byte that makes another object's key is refused, the window unchanged.
    let other = t.alloc_mw_with_key(pd, 0x1234_5603).unwrap();
    t.invalidate(pd, 0x1234_5602).unwrap();
    assert!(t.bind_mw_with_key(pd, 0x1234_5602, 0x03, to).is_err());
    assert_eq!(t.mw(other).map(|m| m.rkey), Some(other));
}

#[test]
fn a_type1_window_binds_again_while_bound_and_is_never_invalidated() {
    let (mut t, pd, k, _r) = with_mr(ALL_REMOTE);
    let mw = t.alloc_mw_type1(pd).unwrap();
    let to = |addr| MwBinding {
        mr_lkey: k.lkey,
        addr,
        len: 16,
        access: Access::REMOTE_WRITE,
    };
    let first = t
        .bind_mw_with_key(pd, mw, (mw as u8).wrapping_add(1), to(IOVA))
        .unwrap();
    // Bound again elsewhere while bound: the old range is out of reach, the new one in.
    let second = t
        .bind_mw_with_key(pd, first, (first as u8).wrapping_add(1), to(IOVA + 32))
        .unwrap();
    assert!(
        t.check_rkey(pd, second, IOVA + 32, 8, Access::REMOTE_WRITE)
            .is_ok()
    );
    assert!(
        t.check_rkey(pd, second, IOVA, 8, Access::REMOTE_WRITE)
            .is_err()
    );
    // rxe_invalidate_mw refuses a type-1 window; it stays bound.
    assert_eq!(t.invalidate(pd, second), Err(MemError::NotInvalidatable));
    assert!(
        t.check_rkey(pd, second, IOVA + 32, 8, Access::REMOTE_WRITE)
            .is_ok()
    );
}
