//! `RegMrProcess`: a client's ordinary memory (a `Vec<u8>`, an anonymous mapping)
//! registered with `Pd::reg_mr_process`, which rocexd reaches with
//! `process_vm_readv`/`process_vm_writev`. A client on another daemon WRITEs, READs and
//! runs atomics on it; the owner SENDs and WRITEs from it; out-of-bounds and unmapped
//! memory give error completions and leave the daemon serving; a daemon that may not
//! ptrace the client refuses. Daemons on 127.0.8.1 to 127.0.8.7.

mod common;

use common::{
    ACCESS, End, T, connect, end, ok, pair, pair_at, pattern, ring_daemon_at, rocexd, socket_in,
};
use rocex_verbs::verbs::{Mtu, QpCap, QpType, RecvWr, Remote, SendOp, SendWr, WcOpcode, WcStatus};
use rocex_verbs::{Context, Error, Qp, QpInitAttr};

/// Posts one signaled request with `sges` from `x` and returns its completion's status.
fn run(sges: Vec<rocex_verbs::verbs::Sge>, x: &mut End, id: u64, op: SendOp) -> WcStatus {
    x.qp.post_send(&[SendWr::new(id, op, sges)]).unwrap();
    let wc = x.cq.poll_wait(T).expect("completion");
    assert_eq!(wc.wr_id, id, "{wc:?}");
    wc.status
}

#[test]
fn a_vec_is_the_target_and_source_of_rdma() {
    let (sa, sb) = (socket_in("pmr-a"), socket_in("pmr-b"));
    let _da = ring_daemon_at("127.0.8.1", &sa, &[]);
    let _db = ring_daemon_at("127.0.8.2", &sb, &[]);
    let (mut a, mut b) = (end(&sa), end(&sb));
    pair(&a, &b);

    // Layout of the Vec: [0, 3000) WRITE target, [4096, 6596) READ and SEND source,
    // 8000 a FETCH_ADD counter, 8008 a CMP_SWAP word.
    let mut vec = vec![0u8; 8192];
    vec[4096..6596].copy_from_slice(&pattern(2, 2500));
    vec[8000..8008].copy_from_slice(&40u64.to_ne_bytes());
    vec[8008..8016].copy_from_slice(&5u64.to_ne_bytes());
    let mr = a._pd.reg_mr_process(&mut vec, ACCESS).unwrap();
    assert_eq!(mr.len(), 8192);

    // Remote WRITE into the Vec.
    b.mr.write(0, &pattern(1, 3000)).unwrap();
    let w = SendOp::Write(mr.remote(0));
    assert_eq!(
        run(vec![b.mr.sge(0, 3000)], &mut b, 1, w),
        WcStatus::Success
    );

    // Remote READ out of it.
    let r = SendOp::Read(mr.remote(4096));
    assert_eq!(
        run(vec![b.mr.sge(10_000, 2500)], &mut b, 2, r),
        WcStatus::Success
    );
    let mut got = vec![0u8; 2500];
    b.mr.read(10_000, &mut got).unwrap();
    assert_eq!(got, pattern(2, 2500));

    // Atomics: the originals come back, the new values land in the Vec.
    let faa = SendOp::FetchAdd {
        remote: mr.remote(8000),
        add: 2,
    };
    assert_eq!(
        run(vec![b.mr.sge(20_000, 8)], &mut b, 3, faa),
        WcStatus::Success
    );
    assert_eq!(b.mr.read_u64(20_000).unwrap(), 40);
    let cas = SendOp::CompareSwap {
        remote: mr.remote(8008),
        compare: 5,
        swap: 9,
    };
    assert_eq!(
        run(vec![b.mr.sge(20_008, 8)], &mut b, 4, cas),
        WcStatus::Success
    );
    assert_eq!(b.mr.read_u64(20_008).unwrap(), 5);

    // The owner SENDs from the Vec...
    b.qp.post_recv(&[RecvWr {
        wr_id: 5,
        sges: vec![b.mr.sge(40_000, 4096)].into(),
    }])
    .unwrap();
    let sent = run(vec![mr.sge(4096, 2500)], &mut a, 5, SendOp::Send);
    assert_eq!(sent, WcStatus::Success);
    assert_eq!(ok(&mut b.cq, 5, WcOpcode::Recv), 2500);
    b.mr.read(40_000, &mut got).unwrap();
    assert_eq!(got, pattern(2, 2500));

    // ... and WRITEs from it what the peer wrote into it.
    let w = SendOp::Write(b.mr.remote(60_000));
    assert_eq!(run(vec![mr.sge(0, 3000)], &mut a, 6, w), WcStatus::Success);
    let mut back = vec![0u8; 3000];
    b.mr.read(60_000, &mut back).unwrap();
    assert_eq!(back, pattern(1, 3000));

    // An rkey access past the end: a remote access error (the last request on this QP).
    let past = SendOp::Write(mr.remote(8192 - 8));
    assert_eq!(
        run(vec![b.mr.sge(0, 16)], &mut b, 7, past),
        WcStatus::RemAccessErr
    );

    // Deregistered, the borrow ends: the bytes are in the Vec.
    drop(mr);
    assert_eq!(&vec[..3000], &pattern(1, 3000)[..]);
    assert_eq!(&vec[3000..4096], &[0u8; 1096][..]);
    assert_eq!(u64::from_ne_bytes(vec[8000..8008].try_into().unwrap()), 42);
    assert_eq!(u64::from_ne_bytes(vec[8008..8016].try_into().unwrap()), 9);
    assert_eq!(&vec[8016..], &[0u8; 176][..]);
}

/// An anonymous mapping of `len` bytes, unmapped on drop unless already unmapped.
struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Self {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        Self { addr, len }
    }

    fn unmap(&mut self) {
        // SAFETY: the mapping is ours and nothing references it.
        assert_eq!(unsafe { libc::munmap(self.addr, self.len) }, 0);
        self.len = 0;
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len > 0 {
            self.unmap();
        }
    }
}

/// One more RC QP on `x`'s PD and CQ (where its process MRs are), connected to `peer`.
fn qp_beside(x: &End, peer: &End) -> Qp {
    let qp = x
        ._pd
        .create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &x.cq,
            recv_cq: &x.cq,
            cap: QpCap::default(),
        })
        .unwrap();
    let (p, q) = (0x777, 0x999);
    connect(&qp, p, (peer.ctx.gid_addr(), peer.qp.qpn(), q), Mtu::M1024);
    connect(&peer.qp, q, (x.ctx.gid_addr(), qp.qpn(), p), Mtu::M1024);
    qp
}

#[test]
fn unmapped_memory_fails_the_access_not_the_daemon() {
    let (sa, sb) = (socket_in("pmr-c"), socket_in("pmr-d"));
    let mut da = ring_daemon_at("127.0.8.3", &sa, &["--max-mr-bytes", "2M"]);
    let _db = ring_daemon_at("127.0.8.4", &sb, &[]);
    // Three QPs on one PD of the owner `a`, each with its own peer on the other daemon:
    // every error below moves its QPs to the error state.
    let (mut a, mut b, mut b2, b3) = (end(&sa), end(&sb), end(&sb), end(&sb));
    pair(&a, &b);
    let _qp2 = qp_beside(&a, &b2);
    let mut qp3 = qp_beside(&a, &b3);

    // Registration probes the range: memory that is not mapped is refused.
    // SAFETY: the daemon refuses the range, so it never touches it.
    match unsafe { a._pd.reg_mr_process_raw(4096, 4096, ACCESS) } {
        Err(Error::Daemon { errno, detail }) => {
            assert_eq!(errno, libc::EFAULT as u32, "{detail}");
            assert!(detail.contains("not mapped"), "{detail}");
        }
        other => panic!("expected EFAULT, got {other:?}"),
    }
    // Process MRs count against the registered-bytes limit (1 MiB is held by `end`).
    let mut big = vec![0u8; 2 << 20];
    match a._pd.reg_mr_process(&mut big, ACCESS) {
        Err(Error::Limit { key, .. }) => assert_eq!(key, "max_mr_bytes"),
        other => panic!("expected the max_mr_bytes limit, got {other:?}"),
    }

    let mut map = Mapping::new(8192);
    // SAFETY: the mapping is referenced by nothing in this program; it is unmapped below,
    // while registered, on purpose.
    let mr = unsafe { a._pd.reg_mr_process_raw(map.addr as u64, map.len, ACCESS) }.unwrap();
    b.mr.write(0, &pattern(3, 4096)).unwrap();
    let w = SendOp::Write(mr.remote(0));
    assert_eq!(
        run(vec![b.mr.sge(0, 4096)], &mut b, 1, w),
        WcStatus::Success
    );
    // SAFETY: the daemon wrote the mapping and completed; nothing else touches it.
    let written = unsafe { std::slice::from_raw_parts(map.addr as *const u8, 4096) };
    assert_eq!(written, &pattern(3, 4096)[..]);

    map.unmap();
    // A peer's WRITE, and a peer's READ: remote access errors.
    let w = SendOp::Write(mr.remote(0));
    assert_eq!(
        run(vec![b.mr.sge(0, 4096)], &mut b, 2, w),
        WcStatus::RemAccessErr
    );
    let r = SendOp::Read(Remote {
        addr: mr.addr() + 100,
        rkey: mr.rkey(),
    });
    assert_eq!(
        run(vec![b2.mr.sge(0, 64)], &mut b2, 3, r),
        WcStatus::RemAccessErr
    );
    // The owner's own SEND from it: a local protection error.
    qp3.post_send(&[SendWr::new(4, SendOp::Send, vec![mr.sge(0, 64)])])
        .unwrap();
    let wc = loop {
        let wc = a.cq.poll_wait(T).expect("completion");
        if wc.wr_id == 4 {
            break wc;
        }
    };
    assert_eq!(wc.status, WcStatus::LocProtErr, "{wc:?}");
    drop(mr);

    // The daemon still serves: it is alive and a new client gets a working MR.
    assert!(da.alive());
    let ctx = Context::open(&sa).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut fresh = vec![0u8; 4096];
    let mr = pd.reg_mr_process(&mut fresh, ACCESS).unwrap();
    assert_ne!(mr.lkey(), mr.rkey());
}

/// A daemon running as `nobody` may not ptrace this (root) process: `RegMrProcess` is
/// refused with `EPERM` and a detail naming what it needs; memfd MRs still work.
#[test]
fn a_daemon_without_ptrace_permission_refuses_with_eperm() {
    use std::os::unix::fs::PermissionsExt;

    if rocex_testkit::require_root("a_daemon_without_ptrace_permission_refuses_with_eperm")
        .is_none()
    {
        return;
    }
    let sock = socket_in("pmr-g");
    let dir = sock.parent().unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    // A copy `nobody` can reach: the build tree may lie below a directory only root may
    // enter (a checkout under /root, a 0700 temporary directory).
    let exe = dir.join("rocexd");
    std::fs::copy(env!("CARGO_BIN_EXE_rocexd"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = rocexd("127.0.8.7")
        .bin(&exe)
        .socket(&sock)
        .user(65534, 65534)
        .daemon_path()
        .start();
    let ctx = Context::open(&d.sock).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    let refused = pd.reg_mr_process(&mut buf, ACCESS);
    let memfd = pd.alloc_mr(4096, ACCESS);
    drop((memfd.unwrap(), pd, ctx, d));
    match refused {
        Err(Error::Daemon { errno, detail }) => {
            assert_eq!(errno, libc::EPERM as u32, "{detail}");
            assert!(detail.contains("CAP_SYS_PTRACE"), "{detail}");
            assert!(detail.contains("ptrace_scope"), "{detail}");
        }
        other => panic!("expected EPERM, got {other:?}"),
    }
}

/// Streams `count` 64 KiB WRITEs from `x` to `remote`, 16 outstanding; returns Gb/s.
fn write_stream(x: &mut End, remote: impl Fn(u64) -> Remote, count: u64) -> f64 {
    const LEN: u32 = 64 << 10;
    let start = std::time::Instant::now();
    let (mut posted, mut done) = (0u64, 0u64);
    while done < count {
        while posted < count && posted - done < 16 {
            let op = SendOp::Write(remote(0));
            x.post(posted, op, 0, LEN);
            posted += 1;
        }
        let wc = x.cq.poll_wait(T).expect("completion");
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        done += 1;
    }
    (count * u64::from(LEN) * 8) as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// Not a check: prints 64 KiB WRITE throughput into a memfd MR and into a process MR
/// (`cargo test --release -p rocex-daemon --test process_mr -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement, run by hand"]
fn write_speed_memfd_vs_process() {
    let (sa, sb) = (socket_in("pmr-e"), socket_in("pmr-f"));
    let _da = ring_daemon_at("127.0.8.5", &sa, &[]);
    let _db = ring_daemon_at("127.0.8.6", &sb, &[]);
    let (a, mut b) = (end(&sa), end(&sb));
    pair_at(&a, &b, Mtu::M4096);
    let mut vec = vec![0u8; 64 << 10];
    let pmr = a._pd.reg_mr_process(&mut vec, ACCESS).unwrap();
    for round in 0..5 {
        let memfd = write_stream(&mut b, |o| a.mr.remote(o), 4000);
        let process = write_stream(&mut b, |o| pmr.remote(o), 4000);
        println!("round {round}: memfd MR {memfd:.2} Gb/s, process MR {process:.2} Gb/s");
    }
}
