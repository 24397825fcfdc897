//! Model checks of the ring under loom: publish/consume ordering and the sleep/wakeup
//! protocol. Run with `RUSTFLAGS="--cfg loom" cargo test -p rocex-shm --release --lib loom`.

use crate::layout::{RingKind, RingSpec};
use crate::mem::HeapMem;
use crate::ring::{Ring, SleepCheck};
use loom::sync::{Arc, Condvar, Mutex};

/// The smallest legal ring: 2 CQ slots of 64 bytes; entries are one word, so each push and
/// pop is one relaxed data access plus the index traffic.
fn spec() -> RingSpec {
    RingSpec::new(RingKind::Cq, 2, 64).unwrap()
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Entries published with Release are seen whole by an Acquire consumer, in order, and a
/// slot is reused only after the consumer released it, across a wrap of the 2-slot ring.
#[test]
fn loom_publish_consume() {
    model(|| {
        let mem = Arc::new(HeapMem::new(spec().bytes()));
        let m2 = mem.clone();
        let t = loom::thread::spawn(move || {
            let ring = Ring::new(m2.view(), spec()).unwrap();
            let mut p = ring.producer();
            let mut v = 1u32;
            while v <= 3 {
                if p.push(&v.to_ne_bytes()).is_ok() {
                    let _ = p.publish();
                    v += 1;
                } else {
                    loom::thread::yield_now();
                }
            }
        });
        let ring = Ring::new(mem.view(), spec()).unwrap();
        let mut c = ring.consumer();
        let mut want = 1u32;
        let mut out = [0u8; 4];
        while want <= 3 {
            if c.pop_into(&mut out).unwrap() {
                assert_eq!(u32::from_ne_bytes(out), want);
                want += 1;
                c.release();
            } else {
                loom::thread::yield_now();
            }
        }
        t.join().unwrap();
    });
}

/// A modelled eventfd: a counter under a mutex with a condvar.
#[derive(Default)]
struct ModelEventFd {
    count: Mutex<u32>,
    cv: Condvar,
}

impl ModelEventFd {
    fn signal(&self) {
        *self.count.lock().unwrap() += 1;
        self.cv.notify_one();
    }

    fn wait(&self) {
        let mut n = self.count.lock().unwrap();
        while *n == 0 {
            n = self.cv.wait(n).unwrap();
        }
        *n = 0;
    }
}

/// The consumer sleeps whenever the ring looks empty; the producer writes the eventfd only
/// when `publish` says so. A missed wakeup leaves the consumer blocked forever, which loom
/// reports as a deadlock.
#[test]
fn loom_sleep_wakeup_no_missed_wakeup() {
    model(|| {
        let mem = Arc::new(HeapMem::new(spec().bytes()));
        let efd = Arc::new(ModelEventFd::default());
        let (m2, e2) = (mem.clone(), efd.clone());
        let t = loom::thread::spawn(move || {
            let ring = Ring::new(m2.view(), spec()).unwrap();
            let mut p = ring.producer();
            for v in 1..=2u32 {
                p.push(&v.to_ne_bytes()).unwrap();
                if p.publish() {
                    e2.signal();
                }
            }
        });
        let ring = Ring::new(mem.view(), spec()).unwrap();
        let mut c = ring.consumer();
        let mut got = 0u32;
        let mut out = [0u8; 4];
        while got < 2 {
            if c.pop_into(&mut out).unwrap() {
                got += 1;
                assert_eq!(u32::from_ne_bytes(out), got);
                continue;
            }
            match c.prepare_sleep(1).unwrap() {
                SleepCheck::Ready(_) => {}
                SleepCheck::Sleep => {
                    efd.wait();
                    c.finish_sleep();
                }
            }
        }
        t.join().unwrap();
    });
}
