//! `rocexd --direct` over its control socket, as a client library speaks it: `OpenDirect`
//! grants a QPN slot with the daemon's settings and a UDP socket on which RoCE packets
//! for that slot's QPNs arrive, while packets for other slots still reach the daemon
//! (which counts them as for no QP); a second request on the connection, a full set of
//! slots and a daemon without direct slots (`--no-direct`, or given options they do not
//! fit, as by default) are refused with errors a client tells apart;
//! when the connection closes the slot's QPNs come back to the daemon and the slot goes
//! to the next client, unless a process still holds its socket; a client that
//! removes the group's program has it attached again; a new daemon on the address waits
//! until the old one's clients let their sockets go; `Stat` shows a client's QPs as its
//! QP board says, but only those of its slot. Daemons on 127.0.47.1 to 127.0.47.9.
//! The tests take turns (`rocex_testkit::serial`): starting a daemon forks this process,
//! and until it execs the child holds a copy of every slot socket the other tests hold,
//! which rocexd rightly takes for a process keeping a slot.

mod common;

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Instant;

use common::{T, rocexd, socket_in};
use rocex_proto::QpStatus;
use rocex_shm::control::{
    DirectGrant, HEADER_LEN, Request, Response, Stats, decode_header, encode_frame, qp_type_to_wire,
};
use rocex_shm::region::{recv_fds, send_fds};
use rocex_shm::{ABI_VERSION, Board, BoardEntry};
use rocex_verbs::verbs::{QpState, QpType};
use rocex_wire::icrc::{self, IcrcForm};

/// A control connection speaking frames, as rocex-verbs does.
struct Control {
    sock: UnixStream,
    seq: u64,
    /// The QP board of the last grant.
    board: Option<OwnedFd>,
}

impl Control {
    fn open(path: &std::path::Path) -> Self {
        let mut c = Self {
            sock: UnixStream::connect(path).unwrap(),
            seq: 0,
            board: None,
        };
        let (r, _) = c.call(&Request::Hello {
            abi_version: ABI_VERSION,
        });
        assert!(matches!(r, Response::Hello { .. }), "{r:?}");
        c
    }

    /// Sends `req`; the response and the descriptors that came with it.
    fn call(&mut self, req: &Request) -> (Response, Vec<OwnedFd>) {
        self.seq += 1;
        let frame = encode_frame(req.kind(), self.seq, &req.encode()).unwrap();
        send_fds(self.sock.as_fd(), &frame, &[]).unwrap();
        let mut got = Vec::new();
        let mut fds = Vec::new();
        let mut buf = vec![0u8; 1 << 17];
        loop {
            if got.len() >= HEADER_LEN {
                let h = decode_header(&got).unwrap();
                if got.len() >= HEADER_LEN + h.body_len {
                    assert_eq!(h.seq, self.seq);
                    let body = &got[HEADER_LEN..HEADER_LEN + h.body_len];
                    return (Response::decode(h.kind, body).unwrap(), fds);
                }
            }
            let (n, more) = recv_fds(self.sock.as_fd(), &mut buf, 4).unwrap();
            assert!(n > 0, "rocexd closed the connection");
            got.extend_from_slice(&buf[..n]);
            fds.extend(more);
        }
    }

    /// `OpenDirect`: the grant and the slot's socket (its QP board kept in `board`).
    fn open_direct(&mut self) -> Result<(DirectGrant, UdpSocket), (u32, String)> {
        match self.call(&Request::OpenDirect) {
            (Response::Direct(g), mut fds) => {
                assert_eq!(fds.len(), 2, "a socket and a QP board with the grant");
                self.board = fds.pop();
                Ok((g, UdpSocket::from(fds.pop().unwrap())))
            }
            (Response::Error { errno, detail }, fds) => {
                assert!(fds.is_empty());
                Err((errno, detail))
            }
            (other, _) => panic!("{other:?}"),
        }
    }

    /// `Stat` of QP `qpn`, or of the device and its first page of QPs (`qpn` 0).
    fn stat(&mut self, qpn: u32) -> Stats {
        match self.call(&Request::Stat { qpn, cursor: 0 }) {
            (Response::Stat(s), _) => s,
            (other, _) => panic!("{other:?}"),
        }
    }

    /// A counter of the device's `Stat` groups.
    fn counter(&mut self, group: &str, name: &str) -> u64 {
        let s = self.stat(0);
        let g = s.groups.iter().find(|g| g.name == group).unwrap();
        g.counters.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// Waits until counter `group.name` reads `want`.
    fn wait_counter(&mut self, group: &str, name: &str, want: u64) {
        let end = Instant::now() + T;
        loop {
            let v = self.counter(group, name);
            if v == want {
                return;
            }
            assert!(Instant::now() < end, "{group}.{name} is {v}, not {want}");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// A RoCE v2 SEND_ONLY to `qpn` from `from` to `to:4791`, with a valid ICRC and `tag` as
/// its payload.
fn send_to_qpn(from: &UdpSocket, to: IpAddr, qpn: u32, tag: u8) {
    let mut p = vec![0x04, 0x00, 0xff, 0xff, 0];
    p.extend_from_slice(&qpn.to_be_bytes()[1..]);
    p.extend_from_slice(&[0x00, 0x00, 0x00, 0x01, tag, 0, 0, 0]);
    let src = from.local_addr().unwrap();
    let c = icrc::compute_for(src.ip(), to, src.port(), 4791, &p, IcrcForm::Spec).unwrap();
    p.extend_from_slice(&icrc::to_wire(c));
    from.send_to(&p, SocketAddr::new(to, 4791)).unwrap();
}

/// The tag of the next datagram on `sock`.
fn next_tag(sock: &UdpSocket) -> u8 {
    sock.set_read_timeout(Some(T)).unwrap();
    let mut buf = [0u8; 64];
    let n = sock
        .recv(&mut buf)
        .expect("a datagram on the slot's socket");
    assert_eq!(n, 20);
    buf[12]
}

/// The socket's inode: which socket of the group a descriptor is.
fn inode(s: &UdpSocket) -> String {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", s.as_raw_fd())).unwrap();
    link.to_string_lossy().into_owned()
}

fn sender() -> UdpSocket {
    UdpSocket::bind("127.0.47.100:0").unwrap()
}

#[test]
fn a_slot_steers_its_qpns_to_the_client_until_the_connection_closes() {
    let _serial = rocex_testkit::serial();
    let sock = socket_in("direct");
    let ip = IpAddr::from([127, 0, 47, 1]);
    let _d = rocexd("127.0.47.1")
        .socket(&sock)
        .daemon_path()
        .args(["--direct", "--mtu", "1024", "--ecn", "--dscp", "26"])
        .start();
    let mut a = Control::open(&sock);
    let (grant, a_sock) = a.open_direct().unwrap();
    assert_eq!(
        grant,
        DirectGrant {
            slot: 1,
            slot_bits: 5,
            addr: ip,
            mtu: 3, // IBV_MTU_1024
            max_qp: grant.max_qp,
            max_cqe: 1 << 16,
            selective_repeat: false,
            window: 128,
            rxe_recovery: false,
            ecn: true,
            no_gso: false,
            // Loopback joins nothing, and each slot's filter reads every datagram of a
            // run: the slots take UDP GRO.
            no_gro: false,
            peers_are_rocex: false,
            tos: 26 << 2 | 2,
        }
    );
    assert_eq!(a_sock.local_addr().unwrap(), SocketAddr::new(ip, 4791));
    assert_eq!(a.open_direct().unwrap_err().0, libc::EEXIST as u32);
    assert_eq!(a.counter("daemon", "direct_slots"), 1);
    assert_eq!(a.counter("daemon", "direct_refused"), 1);

    let peer = sender();
    let no_qp = a.counter("engine", "drop_no_qp");
    send_to_qpn(&peer, ip, 0x1234 << 5 | 1, 7);
    send_to_qpn(&peer, ip, 0x0042 << 5 | 1, 8);
    assert_eq!((next_tag(&a_sock), next_tag(&a_sock)), (7, 8));
    // Slot 2 is nobody's: the daemon's, which has no such QP.
    send_to_qpn(&peer, ip, 0x1234 << 5 | 2, 9);
    a.wait_counter("engine", "drop_no_qp", no_qp + 1);

    // A second client gets slot 2; the first goes away, its process gone with it.
    let mut b = Control::open(&sock);
    let (g2, b_sock) = b.open_direct().unwrap();
    assert_eq!(g2.slot, 2);
    send_to_qpn(&peer, ip, 0x1234 << 5 | 2, 10);
    assert_eq!(next_tag(&b_sock), 10);
    let first = inode(&a_sock);
    drop((a, a_sock));
    b.wait_counter("daemon", "direct_slots", 1);
    send_to_qpn(&peer, ip, 0x1234 << 5 | 1, 11);
    b.wait_counter("engine", "drop_no_qp", no_qp + 2);

    // The next client gets slot 1 again: rocexd made sure no other process holds its
    // socket, which only a root daemon can for every process.
    if rocex_testkit::require_root(&rocex_testkit::this_test()).is_none() {
        return;
    }
    let mut c = Control::open(&sock);
    let (g3, c_sock) = c.open_direct().unwrap();
    assert_eq!(g3.slot, 1);
    assert_eq!(inode(&c_sock), first, "the same socket");
    send_to_qpn(&peer, ip, 0x0777 << 5 | 1, 12);
    assert_eq!(next_tag(&c_sock), 12);

    // A client whose connection closes while its process keeps the socket: its slot is
    // not granted again while the socket is held, and its QPNs are the daemon's.
    drop(c);
    b.wait_counter("daemon", "direct_slots", 1);
    let mut d = Control::open(&sock);
    let (g4, d_sock) = d.open_direct().unwrap();
    assert_eq!(g4.slot, 3, "slot 1's socket is held, slot 2 is granted");
    send_to_qpn(&peer, ip, 0x0777 << 5 | 1, 13);
    b.wait_counter("engine", "drop_no_qp", no_qp + 3);
    send_to_qpn(&peer, ip, 0x0777 << 5 | 3, 14);
    assert_eq!(next_tag(&d_sock), 14);
    c_sock.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    let kept = c_sock.recv(&mut buf).unwrap_err();
    assert_eq!(kept.kind(), io::ErrorKind::WouldBlock);
    // Let go of, it is granted again.
    drop(c_sock);
    let mut e = Control::open(&sock);
    assert_eq!(e.open_direct().unwrap().0.slot, 1);
}

#[test]
fn every_slot_granted_is_a_limit_and_without_direct_there_is_none() {
    let _serial = rocex_testkit::serial();
    let sock = socket_in("direct-full");
    let _d = rocexd("127.0.47.2")
        .socket(&sock)
        .daemon_path()
        .args(["--direct"])
        .start();
    let mut held: Vec<_> = (1..32)
        .map(|slot| {
            let mut c = Control::open(&sock);
            let (g, s) = c.open_direct().unwrap();
            assert_eq!(g.slot, slot);
            (c, s)
        })
        .collect();
    let mut last = Control::open(&sock);
    let (errno, detail) = last.open_direct().unwrap_err();
    assert_eq!(errno, libc::ENOMEM as u32, "{detail}");
    assert!(detail.contains("all 31"), "{detail}");
    // The connection goes on serving.
    assert_eq!(last.counter("daemon", "direct_slots"), 31);
    assert_eq!(last.counter("daemon", "direct_refused"), 1);
    held.truncate(30);
    last.wait_counter("daemon", "direct_slots", 30);

    let sock = socket_in("direct-none");
    let _plain = rocexd("127.0.47.3").socket(&sock).daemon_path().start();
    let mut c = Control::open(&sock);
    let (errno, detail) = c.open_direct().unwrap_err();
    assert_eq!(errno, libc::EOPNOTSUPP as u32, "{detail}");
    assert_eq!(c.counter("daemon", "direct_refused"), 1);
    assert_eq!(
        c.counter("daemon", "request_errors"),
        0,
        "every client may ask"
    );
    assert_eq!(c.counter("daemon", "direct_slots"), 0);
}

#[test]
fn direct_takes_only_the_udp_backend() {
    let _serial = rocex_testkit::serial();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocexd"))
        .args(["--addr", "127.0.47.4", "--direct", "--backend", "uring"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--direct: the direct data path needs the udp backend, not uring"),
        "{err}"
    );
}

/// Given no direct option, a daemon grants slots where its options fit, and refuses them
/// (serving every client through itself) where they do not: another backend, a capture.
#[test]
fn slots_are_granted_by_default_where_the_options_fit() {
    let _serial = rocex_testkit::serial();
    let pcap = std::env::temp_dir().join(format!("direct-default-{}.pcap", std::process::id()));
    let pcap = pcap.to_str().unwrap().to_owned();
    // Each on an address of its own: an io_uring's sockets close after its process exits.
    let cases: [(&str, &[&str], bool); 3] = [
        ("127.0.47.4", &[], true),
        ("127.0.47.8", &["--backend", "uring"], false),
        ("127.0.47.9", &["--pcap", &pcap], false),
    ];
    for (addr, args, granted) in cases {
        let sock = socket_in("direct-default");
        let _d = rocexd(addr)
            .socket(&sock)
            .direct_default()
            .args(args)
            .start();
        let mut c = Control::open(&sock);
        match c.open_direct() {
            Ok((g, _)) => assert!(granted, "{args:?}: granted slot {}", g.slot),
            Err((errno, detail)) => {
                assert!(!granted, "{args:?}: {detail}");
                assert_eq!(errno, libc::EOPNOTSUPP as u32, "{detail}");
                assert_eq!(c.counter("daemon", "direct_refused"), 1);
            }
        }
    }
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn a_program_removed_by_a_client_is_attached_again() {
    let _serial = rocex_testkit::serial();
    let sock = socket_in("direct-detach");
    let ip = IpAddr::from([127, 0, 47, 5]);
    let _d = rocexd("127.0.47.5")
        .socket(&sock)
        .daemon_path()
        .args(["--direct"])
        .start();
    let mut a = Control::open(&sock);
    let (g, a_sock) = a.open_direct().unwrap();
    // The kernel lets a locked member remove the group's program: packets are then
    // spread by hash, and those of slot 1 that reach rocexd tell it so.
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live c_int of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&a_sock),
            libc::SOL_SOCKET,
            libc::SO_DETACH_REUSEPORT_BPF,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{}", io::Error::last_os_error());
    let end = Instant::now() + T;
    let mut qpn = 0x100 << 5 | g.slot;
    while a.counter("daemon", "direct_reattached") == 0 {
        assert!(
            Instant::now() < end,
            "rocexd never attached its program again"
        );
        for _ in 0..8 {
            send_to_qpn(&sender(), ip, qpn, 50);
            qpn += 1 << 5;
        }
    }
    // Steered again: every packet of the slot reaches the client, from any port.
    for tag in 60..70 {
        send_to_qpn(&sender(), ip, qpn, tag);
    }
    let mut got: Vec<u8> = Vec::new();
    while got.last() != Some(&69) {
        got.push(next_tag(&a_sock));
    }
    got.retain(|&t| t != 50);
    assert_eq!(got, (60..70).collect::<Vec<_>>());
}

#[test]
fn a_new_daemon_waits_until_the_old_ones_clients_let_go() {
    let _serial = rocex_testkit::serial();
    let sock = socket_in("direct-restart");
    let mut d = rocexd("127.0.47.6")
        .socket(&sock)
        .daemon_path()
        .args(["--direct"])
        .start();
    let mut a = Control::open(&sock);
    let (_, kept) = a.open_direct().unwrap();
    d.kill();
    drop(a);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rocexd"))
        .args(["--addr", "127.0.47.6", "--direct", "--socket"])
        .arg(sock.with_file_name("again.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let me = format!("is already in use by pid {} (", std::process::id());
    assert!(err.contains(&me), "{err}");
    drop(kept);
    let _again = rocexd("127.0.47.6")
        .socket(&sock)
        .daemon_path()
        .args(["--direct"])
        .start();
}

#[test]
fn stat_shows_a_direct_clients_qps_as_its_board_says_and_only_its_slots() {
    let _serial = rocex_testkit::serial();
    let sock = socket_in("direct-board");
    let _d = rocexd("127.0.47.7")
        .socket(&sock)
        .daemon_path()
        .args(["--direct", "--max-qps", "4"])
        .start();
    let mut a = Control::open(&sock);
    let (g, _slot_sock) = a.open_direct().unwrap();
    let values = QpStatus::names().count();
    let board = Board::from_fd(a.board.take().unwrap(), values).unwrap();
    assert_eq!(board.capacity(), 4, "the per-client QP limit");
    let entry = |qpn: u32, state: u8, first: u64| BoardEntry {
        qpn,
        qp_type: qp_type_to_wire(QpType::Rc),
        state,
        values: (first..).take(values).collect(),
    };
    let rts = QpState::Rts as u8;
    let mine = |n: u32| n << 5 | g.slot;
    // One of its own; another slot's, QP1 and an unknown state are not its to show.
    board.publish([
        entry(mine(0x77), rts, 100),
        entry(0x78 << 5 | (g.slot + 1), rts, 200),
        entry(1, rts, 300),
        entry(mine(0x79), 99, 400),
    ]);
    let s = a.stat(0);
    let shown: Vec<_> = s.qps.iter().filter(|q| q.qpn != 1).collect();
    assert_eq!(shown.len(), 1, "{:?}", s.qps);
    let q = shown[0];
    assert_eq!(
        (q.qpn, q.qp_type, q.state),
        (mine(0x77), QpType::Rc, QpState::Rts)
    );
    let want: Vec<(String, u64)> = QpStatus::names()
        .zip(100..)
        .map(|(n, v)| (n.to_owned(), v))
        .chain([("client_pid".to_owned(), u64::from(std::process::id()))])
        .collect();
    assert_eq!(q.counters, want);
    assert_eq!(a.stat(mine(0x77)).qps, vec![q.clone()]);
    assert_eq!(a.counter("daemon", "direct_board_refused"), 3 * 3);
    // No more than the board holds, in QPN order among the daemon's own.
    board.publish((0u32..6).map(|n| entry(mine(0x100 - n), rts, u64::from(n))));
    let qpns: Vec<u32> = a.stat(0).qps.iter().map(|q| q.qpn).collect();
    assert_eq!(qpns, [1, mine(0xfd), mine(0xfe), mine(0xff), mine(0x100)]);
    // Gone with the connection that holds the slot.
    drop(a);
    let mut b = Control::open(&sock);
    let end = Instant::now() + T;
    while b.stat(0).qps.len() > 1 {
        assert!(Instant::now() < end, "a board still shown");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
