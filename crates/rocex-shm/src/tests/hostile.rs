//! A hostile writer: random slots and indices only ever give errors.

use super::*;

#[test]
fn hostile_writer_never_panics_the_reader() {
    let spec = RingSpec::new(RingKind::Sq, 16, 256).unwrap();
    // The ring sits between two guard areas that must stay untouched and unread.
    let guard = 4096;
    let region = SharedRegion::create("rocex-hostile", guard * 2 + spec.bytes()).unwrap();
    let all = region.view();
    let ring_view = all.sub(guard, spec.bytes()).unwrap();
    let ring = Ring::new(ring_view, spec).unwrap();
    ring.init(4, 64).unwrap();
    all.write(0, &[0xAA; 4096]).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut ok, mut desc_err, mut ring_err) = (0u64, 0u64, 0u64);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rng = fastrand::Rng::with_seed(7);
            let words = spec.bytes() / 4;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..64 {
                    let w = rng.usize(..words) * 4;
                    let v = match rng.u8(..4) {
                        0 => rng.u32(..),
                        1 => rng.u32(..40),
                        2 => 0,
                        _ => rng.u32(..) & 0x0f0f,
                    };
                    ring_view.write(w, &v.to_ne_bytes()).unwrap();
                }
                std::thread::yield_now();
            }
        });
        let mut r = SqReader::new(ring.consumer(), RC);
        let limits = [
            RC,
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
        ];
        let start = std::time::Instant::now();
        let mut k = 0;
        while start.elapsed() < std::time::Duration::from_millis(700) {
            match r.read_send() {
                Ok(Some(_)) => ok += 1,
                Ok(None) => {}
                Err(ReadError::Desc { .. }) => desc_err += 1,
                Err(ReadError::Ring(_)) => {
                    ring_err += 1;
                    // Start over the way a daemon would after resetting the QP.
                    k += 1;
                    r = SqReader::new(ring.consumer(), limits[k % 2]);
                    ring.reset(0);
                }
            }
            r.ring().release();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut b = [0u8; 4096];
    all.read(0, &mut b).unwrap();
    assert!(
        b.iter().all(|&x| x == 0xAA),
        "guard before the ring changed"
    );
    all.read(guard + spec.bytes().next_multiple_of(4096), &mut b)
        .unwrap();
    assert!(b.iter().all(|&x| x == 0), "guard after the ring changed");
    assert!(ring_err + desc_err > 0, "the scribbler produced no faults");
    eprintln!("hostile: {ok} accepted, {desc_err} descriptor errors, {ring_err} ring errors");
}

#[test]
fn random_slots_only_error() {
    let mut rng = fastrand::Rng::with_seed(1);
    let mut slot = vec![0u8; 256];
    for i in 0..200_000 {
        rng.fill(&mut slot);
        if i % 2 == 0 {
            // Keep most fields plausible so deeper checks run.
            slot[8] = rng.u8(..16);
            slot[9] = rng.u8(..6);
            slot[10..12].copy_from_slice(&(rng.u16(..16)).to_ne_bytes());
            slot[12..16].copy_from_slice(&(rng.u32(..140) * u32::from(rng.bool())).to_ne_bytes());
            slot[54] = [0, 4, 6][rng.usize(..3)];
            slot[55] = 0;
            slot[80..128].fill(0);
        }
        for limits in [
            RC,
            SqLimits {
                qp_type: QpType::Ud,
                ..RC
            },
            SqLimits {
                qp_type: QpType::Uc,
                max_sge: 0,
                max_inline: 0,
            },
        ] {
            let _ = validate_send(&slot, &limits);
        }
    }
}
