//! The ABI's sizes and offsets, ring geometry, and the bounds-checked view.

use super::*;

#[test]
fn layout_sizes_and_offsets() {
    assert_eq!(size_of::<RingHeader>(), 512);
    assert_eq!(ring_off::PRODUCER, 128);
    assert_eq!(ring_off::CONSUMER, 256);
    assert_eq!(ring_off::RESPONDER_MSN, 260);
    assert_eq!(ring_off::NEED_WAKEUP, 384);
    assert_eq!(size_of::<SendDesc>(), 128);
    assert_eq!(size_of::<RecvDesc>(), 16);
    assert_eq!(size_of::<Cqe>(), 64);
    assert_eq!(size_of::<SgeDesc>(), 16);
    assert_eq!(size_of::<RegionHeader>(), 128);
    let h = RegionHeader::new(4096);
    assert!(h.compatible());
    assert_eq!(h.abi_version, ABI_VERSION);
    assert_eq!(&h.as_bytes()[..8], b"ROCEXSHM");
}

#[test]
fn spec_rejects_bad_geometry() {
    assert_eq!(
        RingSpec::new(RingKind::Sq, 0, 256),
        Err(SpecError::SlotCount(0))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 3, 256),
        Err(SpecError::SlotCount(3))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 1 << 17, 256),
        Err(SpecError::SlotCount(1 << 17))
    );
    assert_eq!(
        RingSpec::new(RingKind::Sq, 4, 64),
        Err(SpecError::SlotSize(64))
    );
    assert_eq!(
        RingSpec::new(RingKind::Cq, 4, 96),
        Err(SpecError::SlotSize(96))
    );
    let s = RingSpec::new(RingKind::Cq, 8, 64).unwrap();
    assert_eq!(s.bytes(), 512 + 8 * 64);
    assert_eq!(s.stride(), 4096);
}

#[test]
fn ring_header_written_by_init() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let mut b = [0u8; 512];
    mem.view().read(0, &mut b).unwrap();
    let h: RingHeader = zerocopy::FromBytes::read_from_bytes(&b[..]).unwrap();
    assert_eq!(h.slot_count, 8);
    assert_eq!(h.index_mask, 7);
    assert_eq!(h.log2_slot_size, 8);
    assert_eq!(h.kind, RingKind::Sq as u32);
    assert_eq!((h.max_sge, h.max_inline), (4, 64));
}

#[test]
fn view_is_bounds_checked() {
    let mem = HeapMem::new(64);
    let v = mem.view();
    let mut b = [0u8; 8];
    assert!(v.read(60, &mut b).is_err());
    assert!(v.read(2, &mut b[..4]).is_err());
    assert!(v.read(usize::MAX - 3, &mut b[..4]).is_err());
    assert!(v.write(64, &[0; 4]).is_err());
    assert!(v.word(64).is_err());
    assert!(v.sub(32, 36).is_err());
    assert!(v.read(56, &mut b).is_ok());
    assert!(Ring::new(v, sq_spec(8)).is_err());
}

/// Bulk copies (over `BULK` bytes) and word-wise copies lay bytes out alike: native order
/// within each word, whichever way they were written and read.
#[test]
fn bulk_and_word_copies_agree() {
    let mem = HeapMem::new(256);
    let v = mem.view();
    let data: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    for len in (4..=64).step_by(4) {
        for at in (0..=128).step_by(4) {
            v.zero(0, 256).unwrap();
            v.write(at, &data[..len]).unwrap();
            for (i, chunk) in data[..len].chunks_exact(4).enumerate() {
                let w = v
                    .word(at + 4 * i)
                    .unwrap()
                    .load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(w.to_ne_bytes(), chunk, "len {len} at {at}, word {i}");
            }
            assert_eq!(
                v.word(at + len)
                    .unwrap()
                    .load(std::sync::atomic::Ordering::Relaxed),
                0
            );
            // Read back whole, and in word-wise (4-byte) and bulk (12-byte) pieces.
            let mut back = vec![0u8; len];
            v.read(at, &mut back).unwrap();
            assert_eq!(back, data[..len]);
            for piece in [4, 12] {
                let mut back = vec![0u8; len];
                for (i, out) in back.chunks_mut(piece).enumerate() {
                    v.read(at + i * piece, out).unwrap();
                }
                assert_eq!(back, data[..len], "len {len} at {at} in {piece}s");
            }
        }
    }
    let mut big = [0u8; 64];
    assert!(v.read(196, &mut big).is_err(), "a bulk read past the end");
    assert!(v.write(2, &big[..16]).is_err(), "a misaligned bulk write");
}
