//! The high-level API end to end: two real `rocexd` (127.0.7.1 and 127.0.7.2), a
//! listening side on a thread of its own with its own device, every operation blocking
//! and async with the data checked on both sides, wrong tokens, and peers that vanish.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use common::{pair, pattern, watchdog};
use rocex::{Connection, Device, Error, Listener, Op, RemoteBuffer, Rights, Side};

/// Runs `f` on a thread with its own device on `sock`, listening on 127.0.7.1; returns
/// the address to connect to.
fn serve<T: Send + 'static>(
    sock: &Path,
    f: impl FnOnce(Device, Listener) -> T + Send + 'static,
) -> (SocketAddr, JoinHandle<T>) {
    let sock = sock.to_path_buf();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let dev = Device::open_at(&sock).expect("open device A");
        let l = Listener::bind(&dev, "127.0.7.1:0").expect("bind");
        tx.send(l.local_addr().unwrap()).unwrap();
        f(dev, l)
    });
    (rx.recv().expect("server started"), h)
}

/// A current-thread runtime for one side.
fn local<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

fn send_token(dev: &Device, conn: &Connection, t: &RemoteBuffer) {
    let mut msg = dev.alloc(RemoteBuffer::LEN).unwrap();
    msg.copy_from_slice(&t.to_bytes());
    conn.send(&msg, ..).unwrap();
}

fn recv_token(conn: &Connection) -> RemoteBuffer {
    let mut b = [0u8; 64];
    let n = conn.recv(&mut b).unwrap();
    RemoteBuffer::from_bytes(&b[..n]).unwrap()
}

#[test]
fn blocking_operations_move_data() {
    let _w = watchdog("blocking_operations_move_data");
    let p = pair();
    let (addr, server) = serve(&p.a.sock, |dev, l| {
        let conn = l.accept().unwrap();
        let mut shared = dev.alloc(1 << 20).unwrap();
        shared[500_000..600_000].copy_from_slice(&pattern(3, 100_000));
        shared[..8].copy_from_slice(&40u64.to_ne_bytes());
        let token = shared.share(Rights::ALL).unwrap();
        send_token(&dev, &conn, &token);

        // The WRITE with immediate comes last of the one-sided operations.
        let mut small = [0u8; 16];
        assert_eq!(conn.recv_with_imm(&mut small).unwrap(), (0, Some(0xfeed)));
        shared.refresh().unwrap();
        assert!(shared[4096..104_096] == pattern(7, 100_000), "WRITE data");
        assert_eq!(&shared[200_000..200_005], b"immed");
        assert_eq!(u64::from_ne_bytes(shared[..8].try_into().unwrap()), 7);
        assert!(shared[500_000..600_000] == pattern(3, 100_000));

        // SENDs, one too long for a 16-byte buffer first: it stays queued.
        assert!(matches!(
            conn.recv(&mut small),
            Err(Error::BufferTooSmall {
                needed: 5000,
                have: 16
            })
        ));
        let mut big = vec![0u8; 65536];
        assert_eq!(conn.recv(&mut big).unwrap(), 5000);
        assert_eq!(big[..5000], pattern(9, 5000));
        assert_eq!(conn.recv_with_imm(&mut big).unwrap(), (3, Some(77)));
        assert_eq!(&big[..3], b"abc");
        assert_eq!(conn.recv(&mut big).unwrap(), 0);

        let mut reply = dev.alloc(4).unwrap();
        reply.copy_from_slice(b"done");
        conn.send(&reply, ..).unwrap();
        // Wait for the client to hang up before the connection goes.
        assert!(matches!(conn.recv(&mut big), Err(Error::Disconnected)));
    });

    let dev = Device::open_at(&p.b.sock).unwrap();
    let conn = Connection::connect(&dev, addr).unwrap();
    assert_eq!(conn.max_message(), 65536);
    let remote = recv_token(&conn);
    assert_eq!(remote.len(), 1 << 20);
    let mut buf = dev.alloc(1 << 20).unwrap();

    // WRITE 100 000 bytes, READ them back, READ what the server put there.
    buf[..100_000].copy_from_slice(&pattern(7, 100_000));
    conn.write(&buf, ..100_000, &remote, 4096).unwrap();
    conn.read(&mut buf, 200_000..300_000, &remote, 4096)
        .unwrap();
    assert!(buf[200_000..300_000] == pattern(7, 100_000), "READ back");
    conn.read(&mut buf, 300_000..400_000, &remote, 500_000)
        .unwrap();
    assert!(buf[300_000..400_000] == pattern(3, 100_000), "READ");

    // Atomics on the word at 0 (40).
    assert_eq!(conn.fetch_add(&remote, 0, 2).unwrap(), 40);
    assert_eq!(conn.compare_swap(&remote, 0, 42, 7).unwrap(), 42);
    assert_eq!(conn.compare_swap(&remote, 0, 42, 9).unwrap(), 7);

    // Checks made before posting fail without harm to the connection.
    assert!(matches!(
        conn.write(&buf, ..16, &remote, (1 << 20) - 8),
        Err(Error::OutOfRange {
            side: Side::Remote,
            ..
        })
    ));
    assert!(matches!(
        conn.write(&buf, (1 << 20) - 8..(1 << 20) + 8, &remote, 0),
        Err(Error::OutOfRange {
            side: Side::Local,
            ..
        })
    ));
    assert!(matches!(
        conn.fetch_add(&remote, 4, 1),
        Err(Error::Misaligned { .. })
    ));
    assert!(matches!(
        conn.send(&buf, ..65537),
        Err(Error::MessageTooLarge {
            len: 65537,
            max: 65536
        })
    ));
    let other = Device::open_at(&p.b.sock).unwrap();
    let foreign = other.alloc(16).unwrap();
    assert!(matches!(
        conn.write(&foreign, .., &remote, 0),
        Err(Error::WrongDevice)
    ));

    buf[..5].copy_from_slice(b"immed");
    conn.write_with_imm(&buf, ..5, &remote, 200_000, 0xfeed)
        .unwrap();
    buf[..5000].copy_from_slice(&pattern(9, 5000));
    conn.send(&buf, ..5000).unwrap();
    buf[..3].copy_from_slice(b"abc");
    conn.send_with_imm(&buf, ..3, 77).unwrap();
    conn.send(&buf, 0..0).unwrap();
    let mut done = [0u8; 8];
    assert_eq!(conn.recv(&mut done).unwrap(), 4);
    assert_eq!(&done[..4], b"done");
    drop(conn);
    server.join().unwrap();
}

#[test]
fn async_operations_in_flight_together() {
    const TASKS: u64 = 32;
    const CHUNK: usize = 16 * 1024;
    let _w = watchdog("async_operations_in_flight_together");
    let p = pair();
    let (addr, server) = serve(&p.a.sock, |dev, l| {
        local(async move {
            let conn = l.accept_async().await.unwrap();
            let mut shared = dev.alloc(4 << 20).unwrap();
            shared[1 << 20..].copy_from_slice(&pattern(5, 3 << 20));
            shared[..8].copy_from_slice(&1000u64.to_ne_bytes());
            let token = shared.share(Rights::ALL).unwrap();
            let mut msg = dev.alloc(RemoteBuffer::LEN).unwrap();
            msg.copy_from_slice(&token.to_bytes());
            conn.send_async(&msg, ..).await.unwrap();

            let mut b = vec![0u8; 65536];
            assert_eq!(
                conn.recv_with_imm_async(&mut b).await.unwrap(),
                (4, Some(1))
            );
            assert_eq!(&b[..4], b"sent");
            shared.refresh().unwrap();
            for i in 0..TASKS as usize {
                let at = 65536 + i * CHUNK;
                assert!(
                    shared[at..at + CHUNK] == pattern(i as u8, CHUNK),
                    "chunk {i}"
                );
            }
            assert_eq!(
                u64::from_ne_bytes(shared[..8].try_into().unwrap()),
                1000 + TASKS
            );
            let winner = u64::from_ne_bytes(shared[8..16].try_into().unwrap());
            assert!((1..=TASKS).contains(&winner));
            assert_eq!(conn.recv_async(&mut b).await.unwrap(), 60_000);
            assert!(b[..60_000] == pattern(11, 60_000));
            assert_eq!(
                conn.recv_with_imm_async(&mut b).await.unwrap(),
                (0, Some(0xabc))
            );
            shared.refresh().unwrap();
            assert_eq!(&shared[16..20], b"last");
            let mut reply = dev.alloc(8).unwrap();
            reply.copy_from_slice(&winner.to_be_bytes());
            conn.send_with_imm_async(&reply, .., 2).await.unwrap();
            assert!(matches!(
                conn.recv_async(&mut b).await,
                Err(Error::Disconnected)
            ));
        })
    });

    local(async move {
        let dev = Device::open_at(&p.b.sock).unwrap();
        let conn = Rc::new(Connection::connect_async(&dev, addr).await.unwrap());
        let mut t = [0u8; 64];
        let n = conn.recv_async(&mut t).await.unwrap();
        let remote = RemoteBuffer::from_bytes(&t[..n]).unwrap();

        // Each task: WRITE its chunk, READ it back, READ a chunk of the server's pattern,
        // one fetch-and-add and one compare-and-swap; all tasks at once.
        let want = Rc::new(pattern(5, 3 << 20));
        let tasks: Vec<_> = (0..TASKS)
            .map(|i| {
                let (conn, dev, want) = (conn.clone(), dev.clone(), want.clone());
                tokio::task::spawn_local(async move {
                    let mut buf = dev.alloc(3 * 65536).unwrap();
                    buf[..CHUNK].copy_from_slice(&pattern(i as u8, CHUNK));
                    let at = 65536 + i * CHUNK as u64;
                    conn.write_async(&buf, ..CHUNK, &remote, at).await.unwrap();
                    conn.read_async(&mut buf, 65536..65536 + CHUNK, &remote, at)
                        .await
                        .unwrap();
                    assert!(buf[65536..65536 + CHUNK] == pattern(i as u8, CHUNK));
                    let from = (1 << 20) + i * 65536;
                    conn.read_async(&mut buf, 2 * 65536.., &remote, from)
                        .await
                        .unwrap();
                    let off = (i * 65536) as usize;
                    assert!(buf[2 * 65536..] == want[off..off + 65536], "READ {i}");
                    let old = conn.fetch_add_async(&remote, 0, 1).await.unwrap();
                    let cas = conn.compare_swap_async(&remote, 8, 0, i + 1).await.unwrap();
                    (old, cas == 0)
                })
            })
            .collect();
        let mut olds = Vec::new();
        let mut wins = 0;
        for t in tasks {
            let (old, won) = t.await.unwrap();
            olds.push(old);
            wins += usize::from(won);
        }
        olds.sort_unstable();
        assert_eq!(olds, (1000..1000 + TASKS).collect::<Vec<_>>());
        assert_eq!(wins, 1, "exactly one compare-and-swap wins");

        let mut buf = dev.alloc(65536).unwrap();
        buf[..4].copy_from_slice(b"sent");
        conn.send_with_imm_async(&buf, ..4, 1).await.unwrap();
        buf[..60_000].copy_from_slice(&pattern(11, 60_000));
        conn.send_async(&buf, ..60_000).await.unwrap();
        buf[..4].copy_from_slice(b"last");
        conn.write_with_imm_async(&buf, ..4, &remote, 16, 0xabc)
            .await
            .unwrap();
        let mut r = [0u8; 8];
        let (n, imm) = conn.recv_with_imm_async(&mut r).await.unwrap();
        assert_eq!((n, imm), (8, Some(2)));
        let winner = u64::from_be_bytes(r);
        assert!((1..=TASKS).contains(&winner));
    });
    server.join().unwrap();
}

/// A dropped future does not stop its operation: it runs, and its result slot is reused.
#[test]
fn abandoned_async_operations_still_run() {
    const BATCH: u64 = 100;
    let _w = watchdog("abandoned_async_operations_still_run");
    let p = pair();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (addr, server) = serve(&p.a.sock, move |dev, l| {
        let c = l.accept().unwrap();
        let mut shared = dev.alloc(4096).unwrap();
        let t = shared.share(Rights::ATOMIC).unwrap();
        send_token(&dev, &c, &t);
        done_rx.recv().unwrap();
    });
    let dev = Device::open_at(&p.b.sock).unwrap();
    let c = Connection::connect(&dev, addr).unwrap();
    let t = recv_token(&c);
    local(async {
        let mut abandoned = 0;
        for round in 1..=3 {
            // Each future is polled once (it posts; it may even finish) and dropped.
            for _ in 0..BATCH {
                let f = c.fetch_add_async(&t, 0, 1);
                let r = tokio::time::timeout(std::time::Duration::ZERO, f).await;
                abandoned += usize::from(r.is_err());
            }
            // RC runs atomics in order: this one sees every abandoned one before it.
            let old = c.fetch_add_async(&t, 0, 1).await.unwrap();
            assert_eq!(old, round * BATCH + (round - 1));
        }
        assert!(abandoned > 0, "every atomic finished in its first poll");
    });
    done_tx.send(()).unwrap();
    server.join().unwrap();
}

/// Each case on a fresh connection: a refused operation breaks the connection it ran on.
#[test]
fn wrong_tokens_give_remote_access_errors() {
    const CASES: usize = 5;
    let _w = watchdog("wrong_tokens_give_remote_access_errors");
    let p = pair();
    let (next_tx, next_rx) = mpsc::channel::<()>();
    let (addr, server) = serve(&p.a.sock, move |dev, l| {
        for case in 0..CASES {
            let conn = l.accept().unwrap();
            let mut shared = dev.alloc(65536).unwrap();
            shared.fill(case as u8);
            let token = shared.share(Rights::READ).unwrap();
            send_token(&dev, &conn, &token);
            if case == 4 {
                let mut b = [0u8; 4];
                assert_eq!(conn.recv(&mut b).unwrap(), 2);
                shared.revoke().unwrap();
                conn.send(&dev.alloc(2).unwrap(), ..).unwrap();
            }
            // Hang up only once the client saw its error (a hang-up could overtake it).
            next_rx.recv().unwrap();
        }
    });

    let dev = Device::open_at(&p.b.sock).unwrap();
    let mut buf = dev.alloc(65536).unwrap();
    for case in 0..CASES {
        let conn = Connection::connect(&dev, addr).unwrap();
        let t = recv_token(&conn);
        // The token is good for READ.
        conn.read(&mut buf, ..100, &t, 0).unwrap();
        assert!(buf[..100].iter().all(|&b| b == case as u8));
        let e = match case {
            // A wrong rkey.
            0 => {
                let bad = RemoteBuffer::new(t.addr(), t.rkey() ^ 0x5a5a, t.len());
                conn.read(&mut buf, ..64, &bad, 0).unwrap_err()
            }
            // A forged length: past the end of the peer's buffer.
            1 => {
                let bad = RemoteBuffer::new(t.addr(), t.rkey(), t.len() + 65536);
                conn.read(&mut buf, ..64, &bad, t.len()).unwrap_err()
            }
            // A right the token lacks.
            2 => conn.write(&buf, ..64, &t, 0).unwrap_err(),
            3 => local(async { conn.fetch_add_async(&t, 0, 1).await.unwrap_err() }),
            // A revoked token.
            _ => {
                conn.send(&buf, ..2).unwrap();
                let mut b = [0u8; 4];
                conn.recv(&mut b).unwrap();
                local(async { conn.read_async(&mut buf, ..64, &t, 0).await.unwrap_err() })
            }
        };
        let op = [Op::Read, Op::Read, Op::Write, Op::FetchAdd, Op::Read][case];
        assert!(
            matches!(&e, Error::RemoteAccess { op: o } if *o == op),
            "case {case}: {e}"
        );
        assert!(e.to_string().contains("refused"), "{e}");
        // The connection is broken now: the next operation is flushed.
        let next = conn.read(&mut buf, ..8, &t, 0).unwrap_err();
        assert!(
            matches!(next, Error::Flushed { op: Op::Read }),
            "case {case}: {next}"
        );
        next_tx.send(()).unwrap();
    }
    server.join().unwrap();
}

#[test]
fn a_peer_whose_device_dies_gives_retry_exceeded() {
    let _w = watchdog("a_peer_whose_device_dies_gives_retry_exceeded");
    let mut p = pair();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (addr, server) = serve(&p.a.sock, move |dev, l| {
        let conns: Vec<_> = (0..2)
            .map(|_| {
                let c = l.accept().unwrap();
                let mut shared = dev.alloc(65536).unwrap();
                let t = shared.share(Rights::ALL).unwrap();
                send_token(&dev, &c, &t);
                (c, shared)
            })
            .collect();
        // Keep the connections (and their TCP links) open while the daemon dies.
        ready_tx.send(()).unwrap();
        stop_rx.recv().unwrap();
        drop(conns);
    });
    let dev = Device::open_at(&p.b.sock).unwrap();
    let c1 = Connection::connect(&dev, addr).unwrap();
    let t1 = recv_token(&c1);
    let c2 = Connection::connect(&dev, addr).unwrap();
    let t2 = recv_token(&c2);
    let buf = dev.alloc(4096).unwrap();
    c1.write(&buf, .., &t1, 0).unwrap();

    ready_rx.recv().unwrap();
    p.a.kill();
    let e = c1.write(&buf, .., &t1, 0).unwrap_err();
    assert!(matches!(e, Error::RetryExceeded { op: Op::Write }), "{e}");
    let mut b = [0u8; 16];
    assert!(matches!(
        c1.recv(&mut b),
        Err(Error::Flushed { op: Op::Recv })
    ));
    local(async {
        let e = c2.fetch_add_async(&t2, 0, 1).await.unwrap_err();
        assert!(
            matches!(e, Error::RetryExceeded { op: Op::FetchAdd }),
            "{e}"
        );
        let e = c2.recv_async(&mut b).await.unwrap_err();
        assert!(matches!(e, Error::Flushed { op: Op::Recv }), "{e}");
    });
    stop_tx.send(()).unwrap();
    server.join().unwrap();
}

#[test]
fn a_peer_that_hangs_up_wakes_every_waiter() {
    let _w = watchdog("a_peer_that_hangs_up_wakes_every_waiter");
    let p = pair();
    let (hangup_tx, hangup_rx) = mpsc::channel::<()>();
    let (addr, server) = serve(&p.a.sock, move |_dev, l| {
        let c1 = l.accept().unwrap();
        let c2 = l.accept().unwrap();
        hangup_rx.recv().unwrap();
        drop((c1, c2));
    });
    let dev = Device::open_at(&p.b.sock).unwrap();
    let c1 = Connection::connect(&dev, addr).unwrap();
    let c2 = Connection::connect(&dev, addr).unwrap();
    let mut b = [0u8; 16];
    // Both wait for a message that never comes; the peer hangs up.
    hangup_tx.send(()).unwrap();
    assert!(matches!(c1.recv(&mut b), Err(Error::Disconnected)));
    local(async {
        assert!(matches!(
            c2.recv_async(&mut b).await,
            Err(Error::Disconnected)
        ));
    });
    // Anything later fails at once.
    let buf = dev.alloc(16).unwrap();
    assert!(matches!(c1.send(&buf, ..), Err(Error::Disconnected)));
    server.join().unwrap();
}

#[test]
fn this_ends_device_dying_is_an_error_not_a_hang() {
    let _w = watchdog("this_ends_device_dying_is_an_error_not_a_hang");
    let mut p = pair();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (addr, server) = serve(&p.a.sock, move |_dev, l| {
        let c = l.accept().unwrap();
        done_rx.recv().unwrap();
        drop(c);
    });
    let dev = Device::open_at(&p.b.sock).unwrap();
    let c = Connection::connect(&dev, addr).unwrap();
    p.b.kill();
    let mut b = [0u8; 16];
    let e = c.recv(&mut b).unwrap_err();
    assert!(matches!(e, Error::Device(_)), "{e}");
    done_tx.send(()).unwrap();
    server.join().unwrap();
}
