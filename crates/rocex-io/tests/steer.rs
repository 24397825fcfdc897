//! A steering group over real sockets on loopback: the kernel hands each datagram to the
//! socket of its destination QPN's slot when the slot is granted, else to slot 0; a slot
//! given back routes to slot 0 again; a granted (locked) socket cannot replace the
//! group's program or its own filter, and when it removes the group's program it still
//! reads nothing of another slot's; a slot whose socket another process kept is not
//! granted again until it lets go. Each test has its own 127.0.219.x address (and one ::1).
//! The tests take turns (`rocex_testkit::serial`): a child between `fork` and `exec` holds
//! a copy of every descriptor of this process, a socket given back included, and the group
//! rightly skips a slot whose socket another process holds. A sender's batch for QPs of two
//! slots reaches both; a run coalesced for one slot arrives whole, one that mixes slots
//! reaches no client.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use rocex_io::{Backend, BackendOptions, SteerGroup, UdpPort};

const BITS: u8 = 5;

/// A BTH for `qpn` and a tag byte after it.
fn datagram(qpn: u32, tag: u8) -> Vec<u8> {
    let mut d = vec![0x04, 0x40, 0xff, 0xff, 0];
    d.extend_from_slice(&qpn.to_be_bytes()[1..]);
    d.extend_from_slice(&[0x80, 0, 0, 1, tag]);
    d
}

/// The tag after a datagram's BTH (a sender may add 4 bytes of ICRC after it), or the
/// last byte of one too short for a BTH.
fn tag_of(d: &[u8]) -> u8 {
    d.get(12).or(d.last()).copied().unwrap()
}

fn group(last: u8) -> (IpAddr, SteerGroup) {
    let ip = IpAddr::from([127, 0, 219, last]);
    (
        ip,
        SteerGroup::open(ip, BITS, BackendOptions::default()).unwrap(),
    )
}

/// Sends each `(qpn, tag)` to `ip:4791`, each from its own source port so that a group
/// without its program would spread them by hash.
fn send(ip: IpAddr, what: &[(u32, u8)]) {
    let from = match ip {
        IpAddr::V4(_) => IpAddr::from([127, 0, 219, 250]),
        IpAddr::V6(_) => ip,
    };
    for &(qpn, tag) in what {
        let s = UdpSocket::bind(SocketAddr::new(from, 0)).unwrap();
        s.send_to(&datagram(qpn, tag), SocketAddr::new(ip, 4791))
            .unwrap();
    }
}

/// The tags a socket receives up to and including `marker` (sent last to it).
fn tags_until(sock: &UdpSocket, marker: u8) -> Vec<u8> {
    let end = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    let mut buf = [0u8; 64];
    while got.last() != Some(&marker) {
        assert!(Instant::now() < end, "no marker {marker}; got {got:?}");
        match sock.recv(&mut buf) {
            Ok(n) => got.push(tag_of(&buf[..n])),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => panic!("{e}"),
        }
    }
    got
}

/// The same on slot 0's port.
fn port_tags_until(port: &mut UdpPort, marker: u8) -> Vec<u8> {
    let end = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    while got.last() != Some(&marker) {
        assert!(Instant::now() < end, "no marker {marker}; got {got:?}");
        port.recv(&mut |_, p| got.push(tag_of(p))).unwrap();
    }
    got
}

#[test]
fn each_datagram_reaches_the_socket_of_its_slot() {
    let _serial = rocex_testkit::serial();
    let (ip, mut g) = group(1);
    let mut rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    let b = g.grant().unwrap().unwrap();
    assert_eq!((a.slot, b.slot, g.in_use()), (1, 2, 2));
    send(
        ip,
        &[
            (0x12_3401, 10), // slot 1
            (0x00_0002, 20), // slot 2
            (0x00_0001, 30), // QP1: rocexd's in any slot
            (0x00_0005, 31), // slot 5, not granted
            (0x7f_ffe0, 32), // slot 0
            (0xab_cd41, 11), // slot 1
            (0xff_ff22, 21), // slot 2
        ],
    );
    // Too short for a QPN: slot 0.
    UdpSocket::bind(SocketAddr::new(IpAddr::from([127, 0, 219, 250]), 0))
        .unwrap()
        .send_to(&[7, 7, 33], SocketAddr::new(ip, 4791))
        .unwrap();
    assert_eq!(tags_until(&a.socket, 11), [10, 11]);
    assert_eq!(tags_until(&b.socket, 21), [20, 21]);
    assert_eq!(port_tags_until(&mut rocexd, 33), [30, 31, 32, 33]);
}

#[test]
fn over_ipv6_too() {
    let _serial = rocex_testkit::serial();
    // The programs read the UDP payload and the UDP header, the same over either family.
    let ip = IpAddr::from(std::net::Ipv6Addr::LOCALHOST);
    let mut g = SteerGroup::open(ip, BITS, BackendOptions::default()).unwrap();
    let mut rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    send(ip, &[(0x0101, 1), (0x0102, 2), (0x0001, 3), (0x0201, 4)]);
    assert_eq!(tags_until(&a.socket, 4), [1, 4]);
    assert_eq!(port_tags_until(&mut rocexd, 3), [2, 3]);
}

#[test]
fn a_slot_given_back_routes_to_slot_0_and_is_granted_again() {
    let _serial = rocex_testkit::serial();
    // Granting a slot again reads every process's descriptors: root's right.
    if rocex_testkit::require_root(&rocex_testkit::this_test()).is_none() {
        return;
    }
    let (ip, mut g) = group(2);
    let mut rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    send(ip, &[(0x0101, 1), (0x0201, 2)]);
    assert_eq!(tags_until(&a.socket, 2), [1, 2]);
    // Waiting in the socket when the slot is given back: drained and counted.
    send(ip, &[(0x0301, 3)]);
    assert_eq!(g.free(a.slot).unwrap(), 1);
    assert_eq!((g.in_use(), g.drained()), (0, 1));
    assert!(g.free(a.slot).is_err(), "a slot is given back once");
    send(ip, &[(0x0401, 4), (0x0002, 5)]);
    assert_eq!(port_tags_until(&mut rocexd, 5), [4, 5]);
    drop(a);
    // This process holds no other descriptor of it: the same socket again.
    let again = g.grant().unwrap().unwrap();
    assert_eq!(again.slot, 1);
    send(ip, &[(0x0501, 6)]);
    assert_eq!(tags_until(&again.socket, 6), [6]);
}

#[test]
fn every_slot_granted_means_no_grant() {
    let _serial = rocex_testkit::serial();
    // Granting a slot again reads every process's descriptors: root's right.
    if rocex_testkit::require_root(&rocex_testkit::this_test()).is_none() {
        return;
    }
    let (_, mut g) = group(3);
    let all: Vec<_> = (1..32).map(|_| g.grant().unwrap().unwrap()).collect();
    assert_eq!(
        all.iter().map(|s| s.slot).collect::<Vec<_>>(),
        (1..32).collect::<Vec<_>>()
    );
    assert!(g.grant().unwrap().is_none());
    g.free(17).unwrap();
    assert_eq!(g.grant().unwrap().unwrap().slot, 17);
}

fn setsockopt<T>(s: &UdpSocket, name: libc::c_int, v: &T) -> io::Result<()> {
    setsockopt_at(s, libc::SOL_SOCKET, name, v)
}

fn setsockopt_at<T>(s: &UdpSocket, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[test]
fn a_granted_socket_cannot_take_other_slots_datagrams() {
    let _serial = rocex_testkit::serial();
    let (ip, mut g) = group(4);
    let mut rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    let b = g.grant().unwrap().unwrap();
    // Its own program for the group (`return 1`: everything to the first client) and its
    // own socket filter (keep all): both refused.
    let mut take_all = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 1,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: take_all.as_mut_ptr(),
    };
    for name in [libc::SO_ATTACH_REUSEPORT_CBPF, libc::SO_ATTACH_FILTER] {
        let e = setsockopt(&a.socket, name, &prog).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "option {name}");
    }
    for name in [libc::SO_DETACH_FILTER, libc::SO_LOCK_FILTER] {
        let e = setsockopt(&a.socket, name, &0 as &libc::c_int).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "option {name}");
    }
    send(ip, &[(0x0002, 1), (0x0001, 2), (0x0101, 3)]);
    assert_eq!(tags_until(&b.socket, 1), [1]);
    assert_eq!(port_tags_until(&mut rocexd, 2), [2]);
    assert_eq!(tags_until(&a.socket, 3), [3]);
    // The kernel lets any member remove the group's program: datagrams are then spread
    // by hash over the 32 sockets, and the holder's filter keeps only its own slot's.
    setsockopt(&a.socket, libc::SO_DETACH_REUSEPORT_BPF, &1 as &libc::c_int).unwrap();
    let others: Vec<(u32, u8)> = (0..200u32)
        .map(|i| (i << 5 | [0, 2, 3, 7][i as usize % 4], 100))
        .collect();
    send(ip, &others);
    g.attach().unwrap();
    send(ip, &[(0x0201, 4)]);
    assert_eq!(
        tags_until(&a.socket, 4),
        [4],
        "only its own slot's and the marker"
    );
}

#[test]
fn a_slot_whose_socket_another_process_kept_is_not_granted_until_it_lets_go() {
    let _serial = rocex_testkit::serial();
    // Granting a slot again reads every process's descriptors: root's right.
    if rocex_testkit::require_root(&rocex_testkit::this_test()).is_none() {
        return;
    }
    let (ip, mut g) = group(5);
    let mut rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    // A process that keeps the socket after giving the slot back: a child inherits it.
    // SAFETY: F_SETFD on a descriptor this test owns.
    unsafe { libc::fcntl(a.socket.as_raw_fd(), libc::F_SETFD, 0) };
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    drop(a);
    g.free(1).unwrap();
    let b = g.grant().unwrap().unwrap();
    assert_eq!(b.slot, 2, "slot 1's socket is still held");
    // Slot 1's QPNs stay rocexd's.
    send(ip, &[(0x0101, 1), (0x0202, 2)]);
    assert_eq!(port_tags_until(&mut rocexd, 1), [1]);
    assert_eq!(tags_until(&b.socket, 2), [2]);
    child.kill().unwrap();
    child.wait().unwrap();
    let c = g.grant().unwrap().unwrap();
    assert_eq!(c.slot, 1, "let go of");
    send(ip, &[(0x0301, 3)]);
    assert_eq!(tags_until(&c.socket, 3), [3]);
}

#[test]
fn an_address_in_use_is_refused_with_its_holder_named() {
    let _serial = rocex_testkit::serial();
    let (ip, g) = group(6);
    // A second group of the same user would join the first: refused instead.
    let e = SteerGroup::open(ip, BITS, BackendOptions::default()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    assert!(
        e.to_string()
            .contains(&format!("pid {} (", std::process::id())),
        "{e}"
    );
    assert_eq!(
        UdpPort::bind(ip).unwrap_err().kind(),
        io::ErrorKind::AddrInUse
    );
    drop(g);
    let single = UdpPort::bind(ip).unwrap();
    let e = SteerGroup::open(ip, BITS, BackendOptions::default()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    assert_eq!(single.local(), ip);
    for bits in [0, 7] {
        let e = SteerGroup::open(
            IpAddr::from([127, 0, 219, 7]),
            bits,
            BackendOptions::default(),
        );
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }
}

#[test]
fn a_port_is_made_only_on_a_socket_bound_to_its_address() {
    let _serial = rocex_testkit::serial();
    let ip = IpAddr::from([127, 0, 219, 8]);
    let other = UdpSocket::bind(SocketAddr::new(ip, 0)).unwrap();
    let e = UdpPort::from_socket(other, ip, BackendOptions::default()).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("not 127.0.219.8:4791"), "{e}");
}

/// Datagrams of one length to one address may leave as one UDP GSO send, which the
/// receiving kernel steers as one (by its first segment's QPN) before it cuts it: a send
/// that joined two slots' datagrams would hand the second to the first's socket, whose
/// filter drops it. The sender therefore never joins datagrams for two QPs.
#[test]
fn a_batch_for_two_slots_reaches_both() {
    let _serial = rocex_testkit::serial();
    let (ip, mut g) = group(7);
    let opts = g.options();
    let _rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    let b = g.grant().unwrap().unwrap();
    let mut tx = UdpPort::bind(IpAddr::from([127, 0, 219, 251])).unwrap();
    // Four bytes after the tag stand for the ICRC, which the sender fixes in each segment.
    let packet = |qpn, tag| [datagram(qpn, tag), vec![0; 4]].concat();
    // Two QPs' datagrams interleaved: each QP's leave as one GSO send.
    for (qpn, tag) in [(0x21, 10), (0x02, 20), (0x21, 11), (0x02, 21)] {
        tx.send(ip, 4791, 0, &packet(qpn, tag)).unwrap();
    }
    tx.flush().unwrap();
    let port = |g: rocex_io::Granted| UdpPort::from_socket(g.socket, ip, opts).unwrap();
    assert_eq!(port_tags_until(&mut port(a), 11), [10, 11]);
    assert_eq!(port_tags_until(&mut port(b), 21), [20, 21]);
}

/// `UDP_SEGMENT` sends of `segment`-byte datagrams from one socket: each buffer leaves as
/// one run, which the receiving kernel steers whole by its first datagram.
fn send_runs(to: IpAddr, segment: u16, runs: &[Vec<u8>]) {
    let s = UdpSocket::bind(SocketAddr::new(IpAddr::from([127, 0, 219, 252]), 0)).unwrap();
    setsockopt_at(
        &s,
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        &libc::c_int::from(segment),
    )
    .unwrap();
    for run in runs {
        s.send_to(run, SocketAddr::new(to, 4791)).unwrap();
    }
}

/// On a link that joins no datagrams (loopback) a group's sockets take UDP GRO, and each
/// handed-out socket's eBPF filter reads every datagram of a run: a run of its own slot
/// arrives as one buffer, a run that also holds another slot's datagram is dropped whole
/// (its holder never reads the other's), whichever slot comes first. Loading the filter
/// takes CAP_BPF: this test fails without it.
#[test]
fn a_run_of_one_slot_arrives_whole_and_a_run_that_mixes_slots_reaches_no_one() {
    let _serial = rocex_testkit::serial();
    let (ip, mut g) = group(9);
    assert_eq!(g.no_coalescing(), None);
    assert!(!g.options().no_gro);
    let _rocexd = g.port().unwrap();
    let a = g.grant().unwrap().unwrap();
    let b = g.grant().unwrap().unwrap();
    let (qa, qb) = (0x100 | a.slot, 0x200 | b.slot);
    let run = |d: &[(u32, u8)]| d.iter().flat_map(|&(q, t)| datagram(q, t)).collect();
    let seg = datagram(0, 0).len() as u16;
    send_runs(
        ip,
        seg,
        &[
            run(&[(qa, 1), (qa, 2), (qa, 3)]),
            run(&[(qa, 4), (qb, 5)]),
            run(&[(qb, 6), (qa, 7)]),
            run(&[(qb, 8), (qb, 9)]),
            run(&[(qa, 10), (0x300 | a.slot, 11)]),
        ],
    );
    send(ip, &[(qa, 12), (qb, 13)]);
    let buffers = |s: &UdpSocket, marker| {
        let end = Instant::now() + Duration::from_secs(10);
        let (mut got, mut buf) = (Vec::new(), [0u8; 256]);
        while got
            .last()
            .is_none_or(|b: &Vec<u8>| b[b.len() - 1] != marker)
        {
            assert!(Instant::now() < end, "no marker {marker}; got {got:?}");
            match s.recv(&mut buf) {
                Ok(n) => got.push(buf[..n].chunks(usize::from(seg)).map(tag_of).collect()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        got
    };
    assert_eq!(
        buffers(&a.socket, 12),
        [vec![1, 2, 3], vec![10, 11], vec![12]]
    );
    assert_eq!(buffers(&b.socket, 13), [vec![8, 9], vec![13]]);
}
