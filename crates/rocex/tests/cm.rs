//! The high-level API over rdma_cm: two real `rocexd` (127.0.9.5 and 127.0.9.6) whose
//! CMs connect the QPs; the connection then moves data as one made over TCP does.

mod common;

use std::net::IpAddr;
use std::sync::mpsc;

use common::{daemon, pattern, serial, watchdog};
use rocex::{CmListener, Connection, Device, Error, HandshakeError, RemoteBuffer, Rights};

const PORT: u16 = 7472;

#[test]
fn connect_through_rdma_cm_then_write_read_send() {
    let _w = watchdog("connect_through_rdma_cm_then_write_read_send");
    let _s = serial();
    let da = daemon("127.0.9.5");
    let db = daemon("127.0.9.6");
    let sock = da.sock.clone();
    let (tx, rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        let dev = Device::open_at(&sock).expect("open device A");
        let l = CmListener::bind(&dev, PORT).expect("listen");
        tx.send(()).unwrap();
        let conn = l.accept().unwrap();
        let mut shared = dev.alloc(1 << 16).unwrap();
        shared[8192..12288].copy_from_slice(&pattern(5, 4096));
        let token = shared.share(Rights::ALL).unwrap();
        let mut msg = dev.alloc(RemoteBuffer::LEN).unwrap();
        msg.copy_from_slice(&token.to_bytes());
        conn.send(&msg, ..).unwrap();

        let mut got = vec![0u8; 65536];
        assert_eq!(conn.recv(&mut got).unwrap(), 3000);
        assert_eq!(got[..3000], pattern(9, 3000));
        shared.refresh().unwrap();
        assert!(shared[..4096] == pattern(7, 4096), "WRITE data");
        // The client's drop disconnects: the DREQ moves this QP to ERROR.
        let end = conn.recv(&mut got).unwrap_err();
        assert!(
            matches!(end, Error::Flushed { .. } | Error::Disconnected),
            "{end:?}"
        );
    });
    rx.recv().expect("server listening");

    let dev = Device::open_at(&db.sock).unwrap();
    let a: IpAddr = [127, 0, 9, 5].into();
    // A port nobody listens on: the peer's CM rejects the REQ.
    let e = Connection::connect_cm(&dev, a, PORT + 1).unwrap_err();
    assert!(
        matches!(e, Error::Handshake(HandshakeError::Rejected { reason: 8 })),
        "{e:?}"
    );

    let conn = Connection::connect_cm(&dev, a, PORT).unwrap();
    assert_eq!(conn.peer_addr().unwrap(), (a, PORT).into());
    assert_eq!(conn.max_message(), 65536);
    let mut b = [0u8; 64];
    let n = conn.recv(&mut b).unwrap();
    let remote = RemoteBuffer::from_bytes(&b[..n]).unwrap();

    let mut buf = dev.alloc(1 << 16).unwrap();
    buf[..4096].copy_from_slice(&pattern(7, 4096));
    conn.write(&buf, ..4096, &remote, 0).unwrap();
    conn.read(&mut buf, 4096..8192, &remote, 8192).unwrap();
    assert!(buf[4096..8192] == pattern(5, 4096), "READ data");
    buf[16384..19384].copy_from_slice(&pattern(9, 3000));
    conn.send(&buf, 16384..19384).unwrap();
    drop(conn);
    server.join().expect("server side");
}
