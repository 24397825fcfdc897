//! The afpacket and uring backends between two network namespaces on a veth pair: two
//! engines move verified RDMA WRITEs, READs and SENDs (64 KiB at path MTU 4096, 1 KiB at
//! 1024); afpacket interoperates with udp; a hand-made frame with a bad ICRC is dropped;
//! a capture of the afpacket run checks frame by frame. Needs root (fails under CI without).

mod common;

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::time::Duration;

use common::VethPair;
use common::rc::{connect_qp, err, exchange, rc_qp};
use rocex_io::{
    AfPacketPort, Backend, BackendCounters, BackendOptions, Driver, UdpPort, UringPort,
};
use rocex_proto::verbs::{Mtu, RecvWr, Remote, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use rocex_proto::{Access, Config, Counters, Engine, Region, VecRegion};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    AfPacket,
    Uring,
    Udp,
}

/// The options of every port here: every peer is rocex.
fn rocex_peers() -> BackendOptions {
    BackendOptions {
        peers_are_rocex: true,
        ..BackendOptions::default()
    }
}

fn open(kind: Kind, local: IpAddr, opts: BackendOptions) -> io::Result<Box<dyn Backend>> {
    Ok(match kind {
        Kind::AfPacket => Box::new(AfPacketPort::open(local, opts)?),
        Kind::Uring => Box::new(UringPort::open(local, opts)?),
        Kind::Udp => Box::new(UdpPort::open(local, opts)?),
    })
}

/// The QPs each side makes: path MTU, message size, messages of each operation.
const PLANS: [(Mtu, u32, u64); 2] = [(Mtu::M4096, 64 << 10, 16), (Mtu::M1024, 1 << 10, 64)];
/// Each side's buffer: per plan, three 1 MiB areas (WRITE, READ, SEND).
const AREA: u64 = 1 << 20;
const BUF: usize = 6 << 20;
const BASE: u64 = 0x4000_0000;
/// What the MRs and the QPs allow the peer: WRITE and READ.
const ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ);

/// What one side tells the other.
#[derive(Debug, Clone, Copy)]
struct Info {
    addr: IpAddr,
    qpns: [u32; 2],
    psns: [u32; 2],
    rkey: u32,
}

struct Side {
    driver: Driver,
    qpns: [u32; 2],
    cq: u32,
    lkey: u32,
    rkey: u32,
    buf: Arc<VecRegion>,
}

/// What a side hands back when it is done.
#[derive(Debug)]
struct Outcome {
    buf: Arc<VecRegion>,
    engine: Counters,
    backend: BackendCounters,
}

fn area(plan: usize, op: u64) -> u64 {
    (plan as u64 * 3 + op) * AREA
}

/// Bytes of message `i` of operation `op` in `plan`: different everywhere.
fn pattern(plan: usize, op: u64, i: u64, len: u32) -> Vec<u8> {
    rocex_testkit::pattern((plan as u64) << 40 | op << 32 | i, len as usize)
}

impl Side {
    fn new(backend: Box<dyn Backend>, seed: u8) -> io::Result<Self> {
        let local = backend.local();
        let mut e = Engine::new(Config {
            port_mtu: Mtu::M4096,
            udp_source_port: backend.fixed_source_port(),
            ..Config::new(local, [seed; 32])
        });
        let pd = e.alloc_pd();
        let buf = Arc::new(VecRegion::new(BUF));
        let keys = e
            .reg_mr(pd, BASE, BUF as u64, ACCESS, buf.clone())
            .map_err(err)?;
        let cq = e.create_cq(4096).map_err(err)?;
        let qpns = [
            rc_qp(&mut e, pd, cq, (256, 256))?,
            rc_qp(&mut e, pd, cq, (256, 256))?,
        ];
        Ok(Self {
            driver: Driver::with_backend(e, backend),
            qpns,
            cq,
            lkey: keys.lkey,
            rkey: keys.rkey,
            buf,
        })
    }

    /// Tells the peer about this side, learns about it, and connects both QPs.
    fn connect(&mut self, to_peer: &Sender<Info>, from_peer: &Receiver<Info>) -> io::Result<Info> {
        let e = &mut self.driver.engine;
        let psns = [e.random_psn(), e.random_psn()];
        let mine = Info {
            addr: e.config().local,
            qpns: self.qpns,
            psns,
            rkey: self.rkey,
        };
        let peer = exchange(mine, to_peer, from_peer)?;
        for (q, (mtu, _, _)) in PLANS.iter().enumerate() {
            let to = (peer.addr, peer.qpns[q], peer.psns[q]);
            connect_qp(e, self.qpns[q], psns[q], to, *mtu, ACCESS)?;
        }
        Ok(peer)
    }

    fn post_recv(&mut self, qpn: u32, wr_id: u64, off: u64, len: u32) -> io::Result<()> {
        let now = self.driver.now();
        let wr = RecvWr {
            wr_id,
            sges: self.sge(off, len).into(),
        };
        self.driver.engine.post_recv(now, qpn, wr).map_err(err)
    }

    fn sge(&self, off: u64, len: u32) -> Vec<Sge> {
        vec![Sge {
            addr: BASE + off,
            length: len,
            lkey: self.lkey,
        }]
    }

    /// Waits for the next completion; an error status is an error.
    fn next(&mut self) -> io::Result<rocex_proto::verbs::WorkCompletion> {
        let cq = self.cq;
        let wc = self
            .driver
            .run_until(Duration::from_secs(20), |e| e.poll_cq(cq))?
            .ok_or_else(|| io::Error::other("no completion within 20 s"))?;
        if wc.status != WcStatus::Success {
            return Err(io::Error::other(format!("work request {wc:?} failed")));
        }
        Ok(wc)
    }

    fn outcome(self) -> Outcome {
        Outcome {
            buf: self.buf,
            engine: self.driver.engine.counters().clone(),
            backend: self.driver.backend_counters(),
        }
    }
}

/// The responder: fills its READ areas, posts a receive per SEND, reports each, and keeps
/// answering until the requester is done.
fn responder(
    backend: Box<dyn Backend>,
    (to_peer, from_peer): (Sender<Info>, Receiver<Info>),
    ready: Sender<()>,
    done: Receiver<()>,
) -> io::Result<Outcome> {
    let mut s = Side::new(backend, 2)?;
    for (q, &(_, size, n)) in PLANS.iter().enumerate() {
        for i in 0..n {
            let off = area(q, 1) + i * u64::from(size);
            s.buf.write(off, &pattern(q, 1, i, size));
        }
    }
    s.connect(&to_peer, &from_peer)?;
    for (q, &(_, size, n)) in PLANS.iter().enumerate() {
        for i in 0..n {
            s.post_recv(s.qpns[q], i, area(q, 2) + i * u64::from(size), size)?;
        }
    }
    ready.send(()).map_err(err)?;
    let expected: u64 = PLANS.iter().map(|p| p.2).sum();
    let mut received = 0;
    // Until the requester is done (or gone: it failed, and says why), and every
    // completion is in.
    let cq = s.cq;
    let mut requester_done = false;
    loop {
        requester_done |= !matches!(done.try_recv(), Err(TryRecvError::Empty));
        let wait = Duration::from_millis(20);
        match s.driver.run_until(wait, |e| e.poll_cq(cq))? {
            Some(wc) if wc.status == WcStatus::Success && wc.opcode == WcOpcode::Recv => {
                received += 1;
            }
            Some(wc) => return Err(io::Error::other(format!("unexpected completion {wc:?}"))),
            None if requester_done => break,
            None => {}
        }
    }
    if received != expected {
        return Err(io::Error::other(format!(
            "{received} of {expected} SENDs arrived"
        )));
    }
    s.driver.linger(Duration::from_millis(200))?;
    Ok(s.outcome())
}

/// The requester: for each plan, WRITEs, READs and SENDs `n` messages, 16 in flight.
fn requester(
    backend: Box<dyn Backend>,
    (to_peer, from_peer): (Sender<Info>, Receiver<Info>),
    ready: Receiver<()>,
    done: Sender<()>,
) -> io::Result<Outcome> {
    let mut s = Side::new(backend, 1)?;
    for (q, &(_, size, n)) in PLANS.iter().enumerate() {
        for i in 0..n {
            let at = i * u64::from(size);
            s.buf.write(area(q, 0) + at, &pattern(q, 0, i, size));
            s.buf.write(area(q, 2) + at, &pattern(q, 2, i, size));
        }
    }
    let peer = s.connect(&to_peer, &from_peer)?;
    // The responder's receives are posted.
    ready.recv_timeout(Duration::from_secs(10)).map_err(err)?;
    let mut outstanding = 0;
    for (q, &(_, size, n)) in PLANS.iter().enumerate() {
        for i in 0..n {
            let at = i * u64::from(size);
            let remote = |op| Remote {
                addr: BASE + area(q, op) + at,
                rkey: peer.rkey,
            };
            for wr in [
                SendWr::new(i, SendOp::Write(remote(0)), s.sge(area(q, 0) + at, size)),
                SendWr::new(i, SendOp::Read(remote(1)), s.sge(area(q, 1) + at, size)),
                SendWr::new(i, SendOp::Send, s.sge(area(q, 2) + at, size)),
            ] {
                if outstanding == 16 {
                    s.next()?;
                    outstanding -= 1;
                }
                let now = s.driver.now();
                s.driver.engine.post_send(now, s.qpns[q], wr).map_err(err)?;
                outstanding += 1;
            }
        }
    }
    while outstanding > 0 {
        s.next()?;
        outstanding -= 1;
    }
    done.send(()).map_err(err)?;
    s.driver.linger(Duration::from_millis(200))?;
    Ok(s.outcome())
}

/// Runs the requester on side 0 with `a` and the responder on side 1 with `b`, and checks
/// every byte that moved.
fn transfer(pair: &VethPair, a: Kind, b: Kind, opts: BackendOptions) -> (Outcome, Outcome) {
    let (to_b, from_a) = channel();
    let (to_a, from_b) = channel();
    let (ready_tx, ready_rx) = channel();
    let (done_tx, done_rx) = channel();
    let (addr_a, addr_b) = (pair.addr(0), pair.addr(1));
    let resp = pair.spawn(1, move || {
        responder(open(b, addr_b, opts)?, (to_a, from_a), ready_tx, done_rx)
    });
    let req = pair.spawn(0, move || {
        requester(open(a, addr_a, opts)?, (to_b, from_b), ready_rx, done_tx)
    });
    let req = req.join().expect("requester thread").and_then(|r| r);
    let resp = resp.join().expect("responder thread").and_then(|r| r);
    let (req, resp) = (req.expect("requester"), resp.expect("responder"));
    for (q, &(_, size, n)) in PLANS.iter().enumerate() {
        for i in 0..n {
            let at = i * u64::from(size);
            let mut got = vec![0u8; size as usize];
            resp.buf.read(area(q, 0) + at, &mut got);
            assert!(
                got == pattern(q, 0, i, size),
                "WRITE {q}/{i} did not arrive intact"
            );
            req.buf.read(area(q, 1) + at, &mut got);
            assert!(
                got == pattern(q, 1, i, size),
                "READ {q}/{i} did not come back intact"
            );
            resp.buf.read(area(q, 2) + at, &mut got);
            assert!(
                got == pattern(q, 2, i, size),
                "SEND {q}/{i} did not arrive intact"
            );
        }
    }
    for o in [&req, &resp] {
        assert_eq!(o.engine.drop_icrc, 0, "{o:?}");
        assert!(
            o.backend.rx_packets > 0 && o.backend.tx_packets > 0,
            "{o:?}"
        );
    }
    (req, resp)
}

#[test]
fn afpacket_moves_verified_writes_reads_and_sends_and_the_capture_checks() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("ap", 1, 9000).expect("veth pair");
    let file = std::env::temp_dir().join(format!("h2-afpacket-{}.pcap", std::process::id()));
    let capture = pair.capture(0, &file).expect("tcpdump");
    let (req, resp) = transfer(&pair, Kind::AfPacket, Kind::AfPacket, rocex_peers());
    capture.stop().expect("tcpdump stops");
    for o in [&req, &resp] {
        // Every received frame was checked against its real headers.
        assert_eq!(o.backend.icrc_foreign_id, 0, "{o:?}");
        assert_eq!(o.backend.tx_dropped, 0, "{o:?}");
    }
    let frames = rocex_dump::capture::read(&file).expect("capture reads");
    let _ = std::fs::remove_file(&file);
    let ports = rocex_dump::Ports::default();
    let mut tally = rocex_dump::Tally::default();
    for (i, f) in frames.iter().enumerate() {
        let a = rocex_dump::analyze(i as u64 + 1, f.ts, &f.data, &ports);
        // The kernel holds port 4791 but answers nothing (no ICMP port unreachable).
        assert_ne!(a.summary.proto.as_deref(), Some("ICMP"), "{:?}", a.summary);
        // ARP and the kernel's IPv6 chatter are on the link too; every RoCE frame must pass.
        assert!(
            !matches!(a.verdict, rocex_dump::Verdict::Bad(_)),
            "frame {}: {:?} {:?}",
            i + 1,
            a.verdict,
            a.summary
        );
        tally.add(&a.verdict);
    }
    let sent = req.backend.tx_packets + resp.backend.tx_packets;
    assert_eq!(tally.roce, sent, "{tally}");
}

#[test]
fn uring_moves_verified_writes_reads_and_sends() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("ur", 11, 9000).expect("veth pair");
    let (req, resp) = transfer(&pair, Kind::Uring, Kind::Uring, rocex_peers());
    for o in [&req, &resp] {
        // rocex peers send identification 0: every ICRC was checked.
        assert_eq!(o.backend.icrc_foreign_id, 0, "{o:?}");
    }
}

#[test]
fn uring_checks_the_gso_segments_of_a_udp_peer() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("ug", 71, 9000).expect("veth pair");
    // udp (GSO on) sends the WRITEs and SENDs, then the READ responses.
    let (udp, uring) = transfer(&pair, Kind::Udp, Kind::Uring, rocex_peers());
    let (uring2, udp2) = transfer(&pair, Kind::Uring, Kind::Udp, rocex_peers());
    for (o, peer) in [(&uring, &udp), (&uring2, &udp2)] {
        // Segments 1.. of each GSO send carry IDs other than 0, and still check.
        assert!(
            peer.backend.tx_batches < peer.backend.tx_packets,
            "{peer:?}"
        );
        assert_eq!(o.backend.icrc_foreign_id, 0, "{o:?}");
        assert_eq!(o.engine.drop_icrc, 0, "{o:?}");
    }
}

#[test]
fn afpacket_and_udp_interoperate() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("mix", 21, 9000).expect("veth pair");
    transfer(&pair, Kind::AfPacket, Kind::Udp, rocex_peers());
    transfer(&pair, Kind::Udp, Kind::AfPacket, rocex_peers());
}

/// The MAC address of `dev` in namespace `ns`.
fn mac_of(ns: &str, dev: &str) -> [u8; 6] {
    let out = std::process::Command::new("ip")
        .args(["-n", ns, "link", "show", dev])
        .output()
        .expect("ip link show");
    let text = String::from_utf8_lossy(&out.stdout);
    let word = text
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .expect("an Ethernet address");
    let mut mac = [0u8; 6];
    for (b, h) in mac.iter_mut().zip(word.split(':')) {
        *b = u8::from_str_radix(h, 16).expect("hex");
    }
    mac
}

/// Sends `frame` as it is on interface `dev` of the calling thread's namespace.
fn send_raw(dev: &str, frame: &[u8]) -> io::Result<()> {
    let name = std::ffi::CString::new(dev).map_err(err)?;
    // SAFETY: if_nametoindex reads a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain socket(2); closed below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain data; all zeroes is valid.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_ifindex = ifindex as i32;
    to.sll_halen = 6;
    to.sll_addr[..6].copy_from_slice(&frame[..6]);
    // SAFETY: `frame` and `to` live for the call, their sizes passed.
    let r = unsafe {
        libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&to as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    let e = io::Error::last_os_error();
    // SAFETY: closes the socket opened above, once.
    unsafe { libc::close(fd) };
    if r < 0 { Err(e) } else { Ok(()) }
}

#[test]
fn afpacket_drops_a_frame_with_a_bad_icrc() {
    use rocex_wire::{BthRepr, FrameRepr, Opcode, PacketRepr, Psn};
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("bad", 31, 1500).expect("veth pair");
    let (addr_a, addr_b) = (pair.addr(0), pair.addr(1));
    let (mac_a, mac_b) = (
        mac_of(&pair.ns(0), &pair.dev(0)),
        mac_of(&pair.ns(1), &pair.dev(1)),
    );
    const PSN: u32 = 1000;
    let (qpn_tx, qpn_rx) = channel();
    let receiver = pair.spawn(1, move || -> io::Result<(Outcome, Vec<u8>)> {
        let mut s = Side::new(open(Kind::AfPacket, addr_b, rocex_peers())?, 3)?;
        let to = (addr_a, 0x11, PSN);
        connect_qp(&mut s.driver.engine, s.qpns[0], 0, to, Mtu::M1024, ACCESS)?;
        s.post_recv(s.qpns[0], 1, 0, 64)?;
        qpn_tx.send(s.qpns[0]).map_err(err)?;
        let wc = s.next()?;
        let mut got = vec![0u8; wc.byte_len as usize];
        s.buf.read(0, &mut got);
        Ok((s.outcome(), got))
    });
    let qpn = qpn_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("receiver ready");
    let frame = |payload: &[u8]| {
        let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, qpn, Psn::new(PSN));
        bth.ack_req = true;
        let packet = PacketRepr {
            payload,
            ..PacketRepr::new(bth)
        };
        let ips = |a: IpAddr| match a {
            IpAddr::V4(v) => v.octets(),
            IpAddr::V6(_) => unreachable!("IPv4 pair"),
        };
        let repr = FrameRepr::ipv4((mac_a, mac_b), (ips(addr_a), ips(addr_b)), 0xc123, packet)
            .expect("frame");
        let mut out = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut out).expect("emit");
        out.truncate(n);
        out
    };
    let mut bad = frame(b"this SEND carries a bad ICRC");
    let last = bad.len() - 1;
    bad[last] ^= 0x5a;
    let good = frame(b"this SEND is whole");
    let dev = pair.dev(0);
    pair.spawn(0, move || {
        send_raw(&dev, &bad)?;
        send_raw(&dev, &good)
    })
    .join()
    .expect("sender thread")
    .and_then(|r| r)
    .expect("frames sent");
    let (outcome, got) = receiver
        .join()
        .expect("receiver thread")
        .and_then(|r| r)
        .expect("the good SEND arrives");
    assert_eq!(got, b"this SEND is whole");
    assert_eq!(outcome.engine.drop_icrc, 1, "{outcome:?}");
    assert_eq!(outcome.engine.rcvd_pkts, 1, "{outcome:?}");
}

#[test]
fn afpacket_tags_and_marks_as_configured() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("tag", 51, 9000).expect("veth pair");
    let file = std::env::temp_dir().join(format!("h2-tagged-{}.pcap", std::process::id()));
    let capture = pair.capture(0, &file).expect("tcpdump");
    let opts = BackendOptions {
        vlan: Some(100),
        dscp: 26,
        ecn: 2,
        ..rocex_peers()
    };
    transfer(&pair, Kind::AfPacket, Kind::AfPacket, opts);
    capture.stop().expect("tcpdump stops");
    let frames = rocex_dump::capture::read(&file).expect("capture reads");
    let _ = std::fs::remove_file(&file);
    let ports = rocex_dump::Ports::default();
    let mut roce = 0;
    for (i, f) in frames.iter().enumerate() {
        let a = rocex_dump::analyze(i as u64 + 1, f.ts, &f.data, &ports);
        if !a.summary.roce {
            continue;
        }
        roce += 1;
        assert_eq!(a.verdict, rocex_dump::Verdict::Ok, "{:?}", a.summary);
        assert_eq!(a.summary.vlan, Some(100), "{:?}", a.summary);
        // The IPv4 TOS byte after the Ethernet header and the tag: DSCP and ECN.
        assert_eq!(f.data[14 + 4 + 1], 26 << 2 | 2, "{:?}", a.summary);
    }
    assert!(roce > 0);
}

#[test]
fn afpacket_counts_a_destination_that_does_not_answer() {
    if !common::have_root() {
        return;
    }
    let pair = VethPair::new("nr", 61, 1500).expect("veth pair");
    let local = pair.addr(0);
    let counters = pair
        .spawn(0, move || -> io::Result<BackendCounters> {
            let mut port = AfPacketPort::open(local, rocex_peers())?;
            let nobody = IpAddr::from([198, 18, 202, 99]);
            // Asked once (no answer), then remembered as unreachable for a while.
            for _ in 0..2 {
                port.send(nobody, 0xc000, 0, &[0u8; 32])?;
            }
            port.flush()?;
            Ok(port.counters())
        })
        .join()
        .expect("thread")
        .and_then(|r| r)
        .expect("port");
    assert_eq!(counters.tx_dropped, 2, "{counters:?}");
    assert_eq!(counters.tx_packets, 0, "{counters:?}");
}

/// Not a check but a measurement, run by hand: 64 KiB WRITE throughput (16 in flight) and
/// the round trip of an 8-byte WRITE (request and ACK) between two afpacket ports
/// (`cargo test --release -p rocex-io --test netns -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement, run by hand"]
fn afpacket_write_throughput_and_round_trip() {
    if !common::have_root() {
        return;
    }
    const WRITES: u64 = 4000;
    const ROUND_TRIPS: usize = 2000;
    let pair = VethPair::new("spd", 81, 9000).expect("veth pair");
    let (to_b, from_a) = channel();
    let (to_a, from_b) = channel();
    let (done_tx, done_rx) = channel::<()>();
    let (addr_a, addr_b) = (pair.addr(0), pair.addr(1));
    let resp = pair.spawn(1, move || -> io::Result<()> {
        let mut s = Side::new(open(Kind::AfPacket, addr_b, rocex_peers())?, 2)?;
        s.connect(&to_a, &from_a)?;
        let cq = s.cq;
        while matches!(done_rx.try_recv(), Err(TryRecvError::Empty)) {
            s.driver
                .run_until(Duration::from_millis(20), |e| e.poll_cq(cq))?;
        }
        Ok(())
    });
    let req = pair.spawn(0, move || -> io::Result<()> {
        let mut s = Side::new(open(Kind::AfPacket, addr_a, rocex_peers())?, 1)?;
        let peer = s.connect(&to_b, &from_b)?;
        let remote = Remote {
            addr: BASE,
            rkey: peer.rkey,
        };
        let (q, size) = (s.qpns[0], PLANS[0].1);
        let post = |s: &mut Side, i: u64, len: u32| {
            let now = s.driver.now();
            let wr = SendWr::new(i, SendOp::Write(remote), s.sge(0, len));
            s.driver.engine.post_send(now, q, wr).map_err(err)
        };
        let start = std::time::Instant::now();
        let mut outstanding = 0;
        for i in 0..WRITES {
            if outstanding == 16 {
                s.next()?;
                outstanding -= 1;
            }
            post(&mut s, i, size)?;
            outstanding += 1;
        }
        for _ in 0..outstanding {
            s.next()?;
        }
        let gbps = (WRITES * u64::from(size) * 8) as f64 / start.elapsed().as_secs_f64() / 1e9;
        let mut rtt = Vec::with_capacity(ROUND_TRIPS);
        for i in 0..ROUND_TRIPS {
            let t = std::time::Instant::now();
            post(&mut s, i as u64, 8)?;
            s.next()?;
            rtt.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let _ = done_tx.send(());
        rtt.sort_by(f64::total_cmp);
        eprintln!(
            "afpacket: 64 KiB WRITE {gbps:.2} Gb/s; 8-byte WRITE round trip median {:.1} us, p99 {:.1} us",
            rtt[ROUND_TRIPS / 2],
            rtt[ROUND_TRIPS * 99 / 100]
        );
        Ok(())
    });
    req.join()
        .expect("requester thread")
        .and_then(|r| r)
        .expect("requester");
    resp.join()
        .expect("responder thread")
        .and_then(|r| r)
        .expect("responder");
}
