//! What the OS provides: eventfds, memfd mappings shared between threads and between
//! processes.

use super::*;

/// The consumer's side of the doorbell protocol as rocexd runs it: spin while work comes,
/// then arm the ring and sleep on the eventfd until the producer signals it.
struct Idle {
    spin_limit: u32,
    idle: u32,
}

impl Idle {
    fn new(spin_limit: u32) -> Self {
        Self {
            spin_limit,
            idle: 0,
        }
    }

    fn busy(&mut self) {
        self.idle = 0;
    }

    fn idle(&mut self, ring: &mut Consumer<'_>, efd: &EventFd, timeout: std::time::Duration) {
        self.idle += 1;
        if self.idle < self.spin_limit {
            core::hint::spin_loop();
            return;
        }
        self.idle = 0;
        if let SleepCheck::Sleep = ring.prepare_sleep(1).unwrap() {
            efd.wait(Some(timeout)).unwrap();
            ring.finish_sleep();
        }
    }
}

#[test]
fn eventfd_signal_and_wait() {
    let e = EventFd::new().unwrap();
    assert!(!e.wait(Some(std::time::Duration::from_millis(1))).unwrap());
    e.signal().unwrap();
    e.signal().unwrap();
    assert!(e.wait(None).unwrap());
    assert_eq!(e.drain().unwrap(), 0);
}

#[test]
fn memfd_region_maps_and_is_shared() {
    let a = SharedRegion::create("rocex-test", 10_000).unwrap();
    assert_eq!(a.len() % 4096, 0);
    let dup = a.fd().try_clone_to_owned().unwrap();
    let b = SharedRegion::from_fd(dup).unwrap();
    a.view().write(4096, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 4];
    b.view().read(4096, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4]);
    // An unsealed memfd is refused.
    let raw = rustix::fs::memfd_create("unsealed", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&raw, 4096).unwrap();
    assert!(SharedRegion::from_fd(raw).is_err());
}

/// A deterministic descriptor for sequence number `i`, and its checksum contribution.
fn nth_wr(i: u64) -> SendWr {
    let r = Remote {
        addr: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !7,
        rkey: i as u32 ^ 0x5555,
    };
    let op = match i % 4 {
        0 => SendOp::Write(r),
        1 => SendOp::SendWithImm(i as u32),
        2 => SendOp::FetchAdd { remote: r, add: i },
        _ => SendOp::Read(r),
    };
    let n = if i % 4 == 2 { 1 } else { i % 3 };
    let sges = (0..n).map(|k| Sge {
        addr: i + k,
        length: 8,
        lkey: (i + k) as u32,
    });
    SendWr::new(i, op, sges)
}

fn checksum(wr: &SendWr) -> u64 {
    let mut h = wr.wr_id.wrapping_mul(31);
    if let SendData::Sges(s) = &wr.data {
        for s in s {
            h = h.wrapping_mul(131).wrapping_add(s.addr ^ u64::from(s.lkey));
        }
    }
    h ^ wr.length()
}

#[test]
fn two_threads_million_descriptors_over_memfd() {
    const N: u64 = 1_000_000;
    let spec = RingSpec::new(RingKind::Sq, 256, 256).unwrap();
    let region = SharedRegion::create("rocex-sq", spec.bytes()).unwrap();
    let ring = Ring::new(region.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let efd = EventFd::new().unwrap();
    let (sent, got) = std::thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut w = WqWriter::new(ring.producer(), spec);
            let mut sum = 0u64;
            let mut i = 0;
            while i < N {
                let wr = nth_wr(i);
                match w.post_send(&wr) {
                    Ok(()) => {
                        sum = sum.wrapping_add(checksum(&wr));
                        i += 1;
                        if i % 16 == 0 && w.publish() {
                            efd.signal().unwrap();
                        }
                    }
                    Err(PostError::Ring(RingError::Full)) => {
                        if w.publish() {
                            efd.signal().unwrap();
                        }
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            if w.publish() {
                efd.signal().unwrap();
            }
            sum
        });
        let mut r = SqReader::new(ring.consumer(), RC);
        let mut poll = Idle::new(256);
        let mut sum = 0u64;
        let mut n = 0;
        while n < N {
            match r.read_send().unwrap() {
                Some(wr) => {
                    assert_eq!(wr, nth_wr(n));
                    sum = sum.wrapping_add(checksum(&wr));
                    n += 1;
                    poll.busy();
                    if n % 32 == 0 {
                        r.ring().release();
                    }
                }
                None => {
                    poll.idle(r.ring(), &efd, std::time::Duration::from_secs(5));
                }
            }
        }
        r.ring().release();
        (producer.join().unwrap(), sum)
    });
    assert_eq!(sent, got);
}

/// A second process: the test binary maps the memfd it receives over a Unix socket and
/// produces into it; this process consumes.
#[test]
fn two_processes_share_a_ring() {
    const N: u64 = 20_000;
    let spec = RingSpec::new(RingKind::Sq, 64, 256).unwrap();
    if let Ok(path) = std::env::var("ROCEX_SHM_CHILD") {
        let sock = std::os::unix::net::UnixStream::connect(path).unwrap();
        let mut buf = [0u8; 8];
        let (_, mut fds) =
            crate::region::recv_fds(rustix::fd::AsFd::as_fd(&sock), &mut buf, 2).unwrap();
        let efd = EventFd::from_fd(fds.pop().unwrap());
        let region = SharedRegion::from_fd(fds.pop().unwrap()).unwrap();
        let ring = Ring::new(region.view(), spec).unwrap();
        let mut w = WqWriter::new(ring.producer(), spec);
        let mut i = 0;
        while i < N {
            match w.post_send(&nth_wr(i)) {
                Ok(()) => i += 1,
                Err(_) => std::thread::yield_now(),
            }
            if w.publish() {
                efd.signal().unwrap();
            }
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocex-shm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::os::two_processes_share_a_ring",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ROCEX_SHM_CHILD", &path)
        .spawn()
        .unwrap();
    let region = SharedRegion::create("rocex-2proc", spec.bytes()).unwrap();
    let ring = Ring::new(region.view(), spec).unwrap();
    ring.init(4, 64).unwrap();
    let efd = EventFd::new().unwrap();
    let (sock, _) = listener.accept().unwrap();
    crate::region::send_fds(
        rustix::fd::AsFd::as_fd(&sock),
        b"ring",
        &[region.fd(), rustix::fd::AsFd::as_fd(&efd)],
    )
    .unwrap();
    let mut r = SqReader::new(ring.consumer(), RC);
    let mut poll = Idle::new(1000);
    let mut n = 0;
    while n < N {
        match r.read_send().unwrap() {
            Some(wr) => {
                assert_eq!(wr, nth_wr(n));
                n += 1;
                poll.busy();
                r.ring().release();
            }
            None => poll.idle(r.ring(), &efd, std::time::Duration::from_millis(100)),
        }
    }
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}
