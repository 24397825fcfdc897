//! Ring arithmetic: full, empty, wrapping, a hostile producer index, and the sleep/wakeup
//! protocol on one thread.

use super::*;

#[test]
fn full_and_empty() {
    let spec = RingSpec::new(RingKind::Cq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let (mut p, mut c) = (ring.producer(), ring.consumer());
    let mut out = [0u8; 64];
    assert!(!c.pop_into(&mut out).unwrap());
    for i in 0..4u8 {
        p.push(&[i; 64]).unwrap();
    }
    assert_eq!(p.push(&[9; 64]), Err(RingError::Full));
    assert!(!c.pop_into(&mut out).unwrap(), "nothing published yet");
    let _ = p.publish();
    for i in 0..4u8 {
        assert!(c.pop_into(&mut out).unwrap());
        assert_eq!(out, [i; 64]);
    }
    assert!(!c.pop_into(&mut out).unwrap());
    assert_eq!(p.push(&[9; 64]), Err(RingError::Full), "not released yet");
    c.release();
    assert_eq!(p.free().unwrap(), 4);
    assert_eq!(
        p.push(&[0; 65]),
        Err(RingError::TooLarge {
            len: 65,
            slot_size: 64
        })
    );
}

#[test]
fn wraps_around_u32_max() {
    let spec = RingSpec::new(RingKind::Cq, 4, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let start = u32::MAX - 5;
    ring.reset(start);
    let (mut p, mut c) = (ring.producer_at(start), ring.consumer_at(start));
    let mut out = [0u8; 4];
    let mut next = 0u32;
    let mut seen = 0u32;
    for _ in 0..10 {
        while p.push(&next.to_ne_bytes()).is_ok() {
            next += 1;
        }
        let _ = p.publish();
        while c.pop_into(&mut out).unwrap() {
            assert_eq!(u32::from_ne_bytes(out), seen);
            seen += 1;
        }
        c.release();
    }
    assert_eq!(seen, 40);
    assert_eq!(
        mem.view()
            .word(ring_off::PRODUCER)
            .unwrap()
            .load(std::sync::atomic::Ordering::Relaxed),
        start.wrapping_add(40)
    );
}

#[test]
fn producer_index_beyond_ring_is_an_error() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let mut c = ring.consumer();
    let w = mem.view().word(ring_off::PRODUCER).unwrap();
    w.store(9, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        c.available(),
        Err(RingError::ProducerAhead {
            producer: 9,
            consumer: 0,
            slots: 8
        })
    );
    w.store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(
        c.next_slot(),
        Err(RingError::ProducerAhead { .. })
    ));
    w.store(8, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(c.available(), Ok(8));
    // The consumer index as seen by a producer.
    let mut p = ring.producer();
    mem.view()
        .word(ring_off::CONSUMER)
        .unwrap()
        .store(3, std::sync::atomic::Ordering::Relaxed);
    assert!(matches!(p.free(), Err(RingError::ConsumerAhead { .. })));
}

#[test]
fn geometry_in_shared_header_is_ignored() {
    let spec = sq_spec(8);
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    // A hostile client claims a huge ring.
    mem.view().write(12, &u32::MAX.to_ne_bytes()).unwrap();
    mem.view().write(16, &u32::MAX.to_ne_bytes()).unwrap();
    let mut w = WqWriter::new(ring.producer(), spec);
    let mut r = SqReader::new(ring.consumer(), RC);
    for wr in every_op() {
        w.post_send(&wr).unwrap();
        let _ = w.publish();
        assert_eq!(r.read_send().unwrap(), Some(wr));
        r.ring().release();
    }
}

#[test]
fn sleep_and_wakeup_single_thread() {
    let spec = RingSpec::new(RingKind::Cq, 8, 64).unwrap();
    let mem = HeapMem::new(spec.bytes());
    let ring = Ring::new(mem.view(), spec).unwrap();
    let (mut p, mut c) = (ring.producer(), ring.consumer());
    // Polling consumer: no eventfd.
    p.push(&[1; 64]).unwrap();
    assert!(!p.publish());
    // Work raced in: the re-check sees it.
    assert_eq!(c.prepare_sleep(1), Ok(SleepCheck::Ready(1)));
    let mut out = [0u8; 64];
    assert!(c.pop_into(&mut out).unwrap());
    assert_eq!(c.prepare_sleep(1), Ok(SleepCheck::Sleep));
    p.push(&[2; 64]).unwrap();
    assert!(p.publish(), "sleeping consumer is woken");
    p.push(&[3; 64]).unwrap();
    assert!(!p.publish(), "one eventfd write per sleep");
    c.finish_sleep();
    // Batched wakeup: wake once 3 are ready.
    while c.pop_into(&mut out).unwrap() {}
    assert_eq!(c.prepare_sleep(3), Ok(SleepCheck::Sleep));
    p.push(&[4; 64]).unwrap();
    assert!(!p.publish());
    p.push(&[5; 64]).unwrap();
    p.push(&[6; 64]).unwrap();
    assert!(p.publish());
    assert!(need_wakeup_event_math());
}

fn need_wakeup_event_math() -> bool {
    use crate::ring::need_event;
    need_event(5, 6, 5)
        && !need_event(5, 5, 4)
        && need_event(u32::MAX, 1, u32::MAX - 1)
        && !need_event(3, 10, 4)
}
