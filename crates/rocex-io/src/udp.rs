//! RoCE v2 over a UDP socket, batched: `recvmmsg`/`sendmmsg`, UDP GRO and UDP GSO.
//!
//! The socket is unconnected and has path-MTU discovery on (`IP_PMTUDISC_DO`), so the
//! kernel sends every datagram with DF and IPv4 identification 0: the IP header the
//! engine assumed when it computed the ICRC (`rocex_wire::icrc::compute_for`). Every
//! datagram leaves from port 4791, which the engine is told (`Config::udp_source_port`),
//! since the ICRC covers the source port.
//!
//! Sending: [`Backend::send`] queues into one buffer and [`Backend::flush`] sends the
//! queue with one `sendmmsg`; packets to one address with one length (the last may be
//! shorter: a message's MIDDLE packets and its LAST), for QPs a steering receiver hands to
//! one socket, travel as one GSO message (`batch`), which the kernel (or the NIC) cuts
//! into datagrams numbered 0, 1, 2, ...
//! Each segment's ICRC is fixed for its ID before the send (`ids`). A kernel that refuses
//! GSO (EIO, EINVAL) is remembered and sent to one datagram at a time.
//!
//! Receiving: one `recvmmsg` fills up to 32 slots (one after a call that found nothing,
//! so that a busy poller's empty polls stay cheap); with GRO the kernel may coalesce a
//! burst of same-size datagrams into one, which is cut again by the segment size it
//! reports. A UDP socket does not show the received IP header, and the ICRC covers its
//! identification: every packet's ICRC is checked by solving for the identification it
//! checks under (`ids`), and a packet for which none does is `Invalid`.

mod batch;
mod holder;
pub(crate) mod ids;
mod socket;
mod sys;

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use rocex_wire::ROCE_V2_PORT;

use crate::{Backend, BackendCounters, BackendKind, BackendOptions, MAX_PACKET, RxMeta};
use batch::{Queued, Run};
pub(crate) use holder::{bind_roce_port, bound_elsewhere, held_elsewhere, socket_inode};
use ids::IdDeltas;
pub(crate) use socket::{configure, kernel_drops, roce_socket, unbound_roce_socket};
use sys::{RxDatagram, TxMsg};

/// Receive slots per `recvmmsg`: 8 GRO bursts (512 KiB) are still in L2 when the ICRC check
/// and the placement read them; 32 measured slower.
const RX_SLOTS: usize = 8;
/// One slot holds the largest datagram (a GRO burst included).
const RX_SLOT: usize = 65_536;
/// The queue is sent when it holds this many bytes.
const TX_FLUSH_BYTES: usize = 1 << 20;

/// A UDP socket bound to `ip:4791`.
pub struct UdpPort {
    sock: UdpSocket,
    local: IpAddr,
    opts: BackendOptions,
    /// GSO is wanted and the kernel has not refused it.
    gso: bool,
    tx: TxQueue,
    rx_bufs: Vec<u8>,
    rx: Vec<RxDatagram>,
    /// The last receive found nothing.
    rx_idle: bool,
    ids: IdDeltas,
    counters: BackendCounters,
}

impl std::fmt::Debug for UdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpPort")
            .field("local", &self.local)
            .field("opts", &self.opts)
            .field("gso", &self.gso)
            .field("queued", &self.tx.packets.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// Packets waiting for [`Backend::flush`], back to back in one buffer: the first
/// `used` bytes of `buf`, which has [`MAX_PACKET`] bytes of room beyond
/// [`TX_FLUSH_BYTES`] so that the engine can build the next packet in place.
struct TxQueue {
    buf: Vec<u8>,
    used: usize,
    packets: Vec<Queued>,
    /// The packets' indices in the order runs take them (`batch::plan`).
    order: Vec<usize>,
    runs: Vec<Run>,
    /// The byte ranges the messages send (`sys::TxMsg`).
    spans: Vec<(usize, usize)>,
    msgs: Vec<TxMsg>,
}

impl TxQueue {
    fn new() -> Self {
        Self {
            buf: vec![0; TX_FLUSH_BYTES + MAX_PACKET],
            used: 0,
            packets: Vec::new(),
            order: Vec::new(),
            runs: Vec::new(),
            spans: Vec::new(),
            msgs: Vec::new(),
        }
    }

    fn room(&mut self) -> &mut [u8] {
        &mut self.buf[self.used..self.used + MAX_PACKET]
    }

    /// Queues the `len` bytes at the start of [`TxQueue::room`]; returns whether the
    /// queue is due to be sent.
    fn push(&mut self, dest: IpAddr, tos: u8, len: usize) -> bool {
        let packet = &self.buf[self.used..self.used + len];
        self.packets.push(Queued {
            dest,
            slot: batch::slot_key(
                rocex_wire::bth::Header::new_checked(packet)
                    .ok()
                    .map(|bth| bth.dest_qp()),
            ),
            at: self.used,
            len,
            tos,
        });
        self.used += len;
        self.used >= TX_FLUSH_BYTES
    }

    fn clear(&mut self) {
        self.used = 0;
        self.packets.clear();
    }
}

impl UdpPort {
    /// Binds `ip:4791` with the default options (GSO and GRO on).
    pub fn bind(ip: IpAddr) -> io::Result<Self> {
        Self::open(ip, BackendOptions::default())
    }

    /// Binds `ip:4791` with `opts`.
    pub fn open(ip: IpAddr, opts: BackendOptions) -> io::Result<Self> {
        Self::from_socket(roce_socket(ip, opts)?.into(), ip, opts)
    }

    /// The port over `sock`, a UDP socket made elsewhere as [`UdpPort::open`] makes its
    /// own and bound to `ip:4791`: one of a [`SteerGroup`](crate::SteerGroup)'s, or one
    /// received from the daemon that owns the group. A socket bound anywhere else is
    /// refused.
    pub fn from_socket(sock: UdpSocket, ip: IpAddr, opts: BackendOptions) -> io::Result<Self> {
        let want = SocketAddr::new(ip, ROCE_V2_PORT);
        let bound = sock.local_addr()?;
        if bound != want {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the socket is bound to {bound}, not {want}"),
            ));
        }
        configure(&sock, ip.is_ipv4(), opts)?;
        Ok(Self {
            sock,
            local: ip,
            opts,
            gso: !opts.no_gso,
            tx: TxQueue::new(),
            rx_bufs: vec![0; RX_SLOTS * RX_SLOT],
            rx: Vec::with_capacity(RX_SLOTS),
            rx_idle: true,
            ids: IdDeltas::default(),
            counters: BackendCounters::default(),
        })
    }

    /// Fixes the ICRCs of a GSO run's segments for the IDs the kernel gives them; XOR
    /// undoes it, so the same call restores a run that has to go out one by one.
    fn fix_run(&mut self, run: Run) {
        let order = &self.tx.order[run.first..run.first + run.count];
        if run.count < 2 || !self.tx.packets[order[0]].dest.is_ipv4() {
            return;
        }
        for (id, &i) in order.iter().enumerate().skip(1) {
            let q = self.tx.packets[i];
            self.ids
                .fix_segment(id, &mut self.tx.buf[q.at..q.at + q.len]);
        }
    }

    /// The message of a run, its packets' bytes added to the span list (one span for
    /// packets that lie side by side).
    fn msg_of(&mut self, run: Run) -> TxMsg {
        let order = &self.tx.order[run.first..run.first + run.count];
        let first = self.tx.packets[order[0]];
        let start = self.tx.spans.len();
        for &i in order {
            let q = self.tx.packets[i];
            match self.tx.spans[start..].last_mut() {
                Some((at, len)) if *at + *len == q.at => *len += q.len,
                _ => self.tx.spans.push((q.at, q.len)),
            }
        }
        TxMsg {
            dest: SocketAddr::new(first.dest, ROCE_V2_PORT),
            spans: start..self.tx.spans.len(),
            segment: (run.count > 1).then_some(run.segment as u16),
            tos: self.tos_cmsg(first.tos),
        }
    }

    /// The TOS a message names in a control message: none when it is the socket's.
    fn tos_cmsg(&self, tos: u8) -> Option<u8> {
        (tos != self.opts.tos(0)).then_some(tos)
    }

    /// Sends the messages `self.tx.msgs` (describing `self.tx.runs`), in as few calls as
    /// the kernel allows.
    fn send_all(&mut self) -> io::Result<()> {
        let mut done = 0;
        while done < self.tx.msgs.len() {
            let (buf, spans) = (&self.tx.buf, &self.tx.spans);
            match sys::sendmmsg(self.sock.as_fd(), buf, spans, &self.tx.msgs[done..]) {
                Ok(n) => {
                    self.counters.tx_batches += 1;
                    for r in &self.tx.runs[done..done + n] {
                        self.counters.tx_packets += r.count as u64;
                    }
                    done += n;
                }
                Err(e) => {
                    let run = self.tx.runs[done];
                    match e.raw_os_error() {
                        // The kernel (or the route's device) cannot do GSO: from now on
                        // one datagram at a time, starting with this run.
                        Some(libc::EIO | libc::EINVAL) if run.count > 1 => {
                            self.gso = false;
                            self.fix_run(run);
                            self.send_one_by_one(run)?;
                        }
                        // Full socket buffer: the rest is lost as a network would lose
                        // it, and the transport retransmits.
                        Some(libc::EAGAIN | libc::ENOBUFS) => {
                            let left: usize = self.tx.runs[done..].iter().map(|r| r.count).sum();
                            self.counters.tx_dropped += left as u64;
                            return Ok(());
                        }
                        // This destination cannot be reached or the datagram exceeds the
                        // path MTU: lose this one and go on.
                        Some(
                            libc::EMSGSIZE
                            | libc::ECONNREFUSED
                            | libc::EHOSTUNREACH
                            | libc::ENETUNREACH
                            | libc::EPERM,
                        ) => self.counters.tx_dropped += run.count as u64,
                        _ if e.kind() == io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                    done += 1;
                }
            }
        }
        Ok(())
    }

    /// Sends a run's packets as plain datagrams (after the kernel refused GSO).
    fn send_one_by_one(&mut self, run: Run) -> io::Result<()> {
        let order = &self.tx.order[run.first..run.first + run.count];
        let spans: Vec<(usize, usize)> = order
            .iter()
            .map(|&i| (self.tx.packets[i].at, self.tx.packets[i].len))
            .collect();
        let msgs: Vec<TxMsg> = order
            .iter()
            .enumerate()
            .map(|(k, &i)| TxMsg {
                dest: SocketAddr::new(self.tx.packets[i].dest, ROCE_V2_PORT),
                spans: k..k + 1,
                segment: None,
                tos: self.tos_cmsg(self.tx.packets[i].tos),
            })
            .collect();
        let mut done = 0;
        while done < msgs.len() {
            match sys::sendmmsg(self.sock.as_fd(), &self.tx.buf, &spans, &msgs[done..]) {
                Ok(n) => {
                    self.counters.tx_batches += 1;
                    self.counters.tx_packets += n as u64;
                    done += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.counters.tx_dropped += (msgs.len() - done) as u64;
                    return Ok(());
                }
                Err(_) => {
                    self.counters.tx_dropped += 1;
                    done += 1;
                }
            }
        }
        Ok(())
    }
}

impl Backend for UdpPort {
    fn kind(&self) -> BackendKind {
        BackendKind::Udp
    }

    fn local(&self) -> IpAddr {
        self.local
    }

    fn fixed_source_port(&self) -> Option<u16> {
        Some(ROCE_V2_PORT)
    }

    fn answer_alone(&self) -> bool {
        true
    }

    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
        let mut rx = std::mem::take(&mut self.rx);
        // An idle socket is probed with one slot (a busy poller calls this in a loop); a
        // datagram found means more may wait, and the next call takes a full batch.
        let (fd, bufs) = (self.sock.as_fd(), &mut self.rx_bufs);
        let got = if self.rx_idle {
            sys::recvmmsg::<1>(fd, bufs, RX_SLOT, &mut rx)
        } else {
            sys::recvmmsg::<RX_SLOTS>(fd, bufs, RX_SLOT, &mut rx)
        };
        self.rx_idle = matches!(got, Ok(0));
        let got = match got {
            Ok(n) => n,
            Err(e) => {
                self.rx = rx;
                return Err(e);
            }
        };
        if got > 0 {
            self.counters.rx_batches += 1;
        }
        let mut handed = 0;
        for (d, slot) in rx.iter().zip(self.rx_bufs.chunks_exact(RX_SLOT)) {
            let Some(src) = d.src.filter(|_| !d.truncated) else {
                self.counters.rx_ignored += 1;
                continue;
            };
            if d.len == 0 {
                self.counters.rx_ignored += 1;
                continue;
            }
            let data = &slot[..d.len];
            let segment = d.segment.unwrap_or(d.len).max(1);
            for payload in data.chunks(segment) {
                let strict = self.opts.peers_are_rocex;
                let icrc = self
                    .ids
                    .status(src, self.local, payload, strict, &mut self.counters);
                self.counters.rx_packets += 1;
                handed += 1;
                f(
                    RxMeta {
                        src,
                        dst: self.local,
                        icrc,
                        tos: d.tos,
                    },
                    payload,
                );
            }
        }
        self.rx = rx;
        Ok(handed)
    }

    fn send(&mut self, dest: IpAddr, src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()> {
        let Some(room) = self.tx.room().get_mut(..payload.len()) else {
            // Over a UDP datagram's size: no socket would take it.
            self.counters.tx_dropped += 1;
            return Ok(());
        };
        room.copy_from_slice(payload);
        self.commit(dest, src_port, tclass, payload.len())
    }

    fn room(&mut self) -> Option<&mut [u8]> {
        Some(self.tx.room())
    }

    fn commit(&mut self, dest: IpAddr, _src_port: u16, tclass: u8, len: usize) -> io::Result<()> {
        if len > MAX_PACKET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("commit: {len} bytes exceed the {MAX_PACKET}-byte room"),
            ));
        }
        if self.tx.push(dest, self.opts.tos(tclass), len) {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.tx.packets.is_empty() {
            return Ok(());
        }
        let mut runs = std::mem::take(&mut self.tx.runs);
        batch::plan(&self.tx.packets, self.gso, &mut self.tx.order, &mut runs);
        self.tx.spans.clear();
        let mut msgs = std::mem::take(&mut self.tx.msgs);
        msgs.clear();
        for &run in &runs {
            self.fix_run(run);
            msgs.push(self.msg_of(run));
        }
        self.tx.runs = runs;
        self.tx.msgs = msgs;
        let r = self.send_all();
        self.tx.clear();
        r
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    fn counters(&self) -> BackendCounters {
        self.counters
    }

    fn kernel_dropped(&self) -> u64 {
        kernel_drops(&self.sock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ids::sealed_packet;
    use rocex_proto::Ecn;
    use rocex_proto::IcrcStatus;
    use socket2::{Domain, Socket, Type};

    const MIDDLE: rocex_wire::Opcode = rocex_wire::Opcode::RC_RDMA_WRITE_MIDDLE;

    /// `n` packets of `len` bytes from `src` to QP 0x11 at `dst`, each with its ID-0 ICRC.
    fn packets(src: IpAddr, dst: IpAddr, n: usize, len: usize) -> Vec<Vec<u8>> {
        packets_to(0x11, src, dst, n, len)
    }

    /// [`packets`] to QP `qpn` (one byte of it).
    fn packets_to(qpn: u8, src: IpAddr, dst: IpAddr, n: usize, len: usize) -> Vec<Vec<u8>> {
        let from = SocketAddr::new(src, ROCE_V2_PORT);
        // The BTH's DestQP is bytes 5..8.
        let fill = |i: usize| {
            move |j: usize| match j {
                5 | 6 => 0,
                7 => qpn,
                _ => (i * 31 + j) as u8,
            }
        };
        (0..n)
            .map(|i| sealed_packet(MIDDLE, len, fill(i), from, dst))
            .collect()
    }

    /// Receives `n` payloads on `port`, with what the backend said of their ICRCs.
    fn receive(port: &mut UdpPort, n: usize) -> Vec<(Vec<u8>, IcrcStatus)> {
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < n {
            assert!(
                std::time::Instant::now() < end,
                "{} of {n} arrived",
                got.len()
            );
            port.recv(&mut |meta, p| got.push((p.to_vec(), meta.icrc)))
                .unwrap();
        }
        got
    }

    /// A sender at 127.0.201.`a` and a receiver at 127.0.201.`b` that knows its peers are
    /// rocex (their GSO segments' identifications).
    fn rocex_pair(a: u8, b: u8) -> (IpAddr, IpAddr, UdpPort, UdpPort) {
        let (a, b) = (
            IpAddr::from([127, 0, 201, a]),
            IpAddr::from([127, 0, 201, b]),
        );
        let opts = BackendOptions {
            peers_are_rocex: true,
            ..BackendOptions::default()
        };
        (
            a,
            b,
            UdpPort::bind(a).unwrap(),
            UdpPort::open(b, opts).unwrap(),
        )
    }

    #[test]
    fn a_run_goes_out_in_one_gso_send_with_each_segment_fixed() {
        let (a, b, mut tx, mut rx) = rocex_pair(5, 6);
        let sent = packets(a, b, 10, 1000);
        for p in &sent {
            tx.send(b, ROCE_V2_PORT, 0, p).unwrap();
        }
        tx.flush().unwrap();
        let c = tx.counters();
        assert_eq!((c.tx_packets, c.tx_batches), (10, 1), "{c:?}");
        let got = receive(&mut rx, 10);
        let mut ids = IdDeltas::default();
        for (i, ((p, status), want)) in got.iter().zip(&sent).enumerate() {
            assert_eq!(*status, IcrcStatus::Valid, "segment {i}");
            let mut fixed = want.clone();
            ids.fix_segment(i, &mut fixed);
            assert_eq!(p, &fixed, "segment {i} carries the ICRC for ID {i}");
        }
    }

    #[test]
    fn interleaved_qps_leave_as_a_run_each_in_one_call_every_icrc_checking() {
        let (a, b, mut tx, mut rx) = rocex_pair(12, 13);
        let (p, q) = (
            packets_to(0x11, a, b, 5, 500),
            packets_to(0x22, a, b, 5, 500),
        );
        for (x, y) in p.iter().zip(&q) {
            tx.send(b, ROCE_V2_PORT, 0, x).unwrap();
            tx.send(b, ROCE_V2_PORT, 0, y).unwrap();
        }
        tx.flush().unwrap();
        let c = tx.counters();
        assert_eq!((c.tx_packets, c.tx_batches), (10, 1), "{c:?}");
        let got = receive(&mut rx, 10);
        assert!(got.iter().all(|(_, s)| *s == IcrcStatus::Valid));
        // Each QP's packets, in order, with their bytes (but the ICRC, fixed per segment).
        for (qpn, sent) in [(0x11, &p), (0x22, &q)] {
            let mine: Vec<_> = got.iter().filter(|(d, _)| d[7] == qpn).collect();
            assert_eq!(mine.len(), 5);
            for ((d, _), want) in mine.iter().zip(sent.iter()) {
                assert_eq!(d[..d.len() - 4], want[..want.len() - 4]);
            }
        }
    }

    #[test]
    fn the_ecn_field_sent_is_the_one_reported() {
        // A sender marking ECT(0) with DSCP 26 (TOS 0x6a), and one whose packets a router
        // marked CE (a raw UDP socket with TOS 0x03); GRO on at the receiver.
        let (a, b, c) = (
            IpAddr::from([127, 0, 201, 7]),
            IpAddr::from([127, 0, 201, 8]),
            IpAddr::from([127, 0, 201, 9]),
        );
        let opts = BackendOptions {
            dscp: 26,
            ecn: 2,
            ..BackendOptions::default()
        };
        let mut tx = UdpPort::open(a, opts).unwrap();
        let mut rx = UdpPort::bind(b).unwrap();
        for p in packets(a, b, 3, 200) {
            tx.send(b, ROCE_V2_PORT, 0, &p).unwrap();
        }
        tx.flush().unwrap();
        let marked = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        marked.set_tos_v4(0x03).unwrap();
        marked.bind(&SocketAddr::new(c, 0).into()).unwrap();
        let ce = &packets(c, b, 1, 200)[0];
        marked
            .send_to(ce, &SocketAddr::new(b, ROCE_V2_PORT).into())
            .unwrap();
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 4 && std::time::Instant::now() < end {
            rx.recv(&mut |meta, _| got.push((meta.src.ip(), meta.ecn())))
                .unwrap();
        }
        got.sort_by_key(|(ip, _)| *ip);
        assert_eq!(
            got,
            [(a, Ecn::Ect0), (a, Ecn::Ect0), (a, Ecn::Ect0), (c, Ecn::Ce)]
        );
        assert!(UdpPort::open(c, BackendOptions { ecn: 4, ..opts }).is_err());
    }

    #[test]
    fn each_datagram_leaves_with_its_own_traffic_class() {
        // Equal-size packets of QPs with traffic classes 0x68 (DSCP 26), 0 and 0x02 (ECT(0)
        // only) and 0x69, on a port whose own DSCP is 10: the kernel reports each TOS sent,
        // the port's DSCP or ECN only where the packet's class has none, and GSO runs
        // split where the TOS changes keep their ICRCs.
        let (a, b) = (
            IpAddr::from([127, 0, 201, 10]),
            IpAddr::from([127, 0, 201, 11]),
        );
        let opts = BackendOptions {
            dscp: 10,
            ..BackendOptions::default()
        };
        let mut tx = UdpPort::open(a, opts).unwrap();
        let no_gro = BackendOptions {
            no_gro: true,
            ..BackendOptions::default()
        };
        let mut rx = UdpPort::open(b, no_gro).unwrap();
        let tclasses = [0x68, 0x68, 0, 0, 0x02, 0x69];
        for (p, &t) in packets(a, b, tclasses.len(), 200).iter().zip(&tclasses) {
            tx.send(b, ROCE_V2_PORT, t, p).unwrap();
        }
        tx.flush().unwrap();
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < tclasses.len() && std::time::Instant::now() < end {
            let mut icrc = Vec::new();
            rx.recv(&mut |meta, _| icrc.push(meta.icrc)).unwrap();
            got.extend(rx.rx.iter().map(|d| d.tos).zip(icrc));
        }
        let valid = IcrcStatus::Valid;
        assert_eq!(
            got,
            [0x68, 0x68, 0x28, 0x28, 0x2a, 0x69].map(|t| (t, valid)),
            "(TOS, ICRC) received"
        );
        assert_eq!(tx.counters().tx_batches, 1, "one sendmmsg");
    }

    #[test]
    fn an_ipv6_datagram_without_a_udp_checksum_is_received_and_checked() {
        let (a, b) = (
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
            IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        );
        let mut rx = UdpPort::bind(b).unwrap();
        // A sender as kernel rxe sends over IPv6: UDP checksum 0, from a port of its own.
        let tx = UdpSocket::bind(SocketAddr::new(a, 0)).unwrap();
        sys::set_int_opt(tx.as_fd(), libc::IPPROTO_UDP, libc::UDP_NO_CHECK6_TX, 1).unwrap();
        let port = tx.local_addr().unwrap().port();
        let p = sealed_packet(MIDDLE, 1040, |j| (j * 7) as u8, SocketAddr::new(a, port), b);
        let mut bad = p.clone();
        bad[600] ^= 0x20;
        for q in [&p, &bad] {
            tx.send_to(q, SocketAddr::new(b, ROCE_V2_PORT)).unwrap();
        }
        let got = receive(&mut rx, 2);
        assert_eq!(got[0], (p, IcrcStatus::Valid));
        assert_eq!(got[1], (bad, IcrcStatus::Invalid));
    }

    #[test]
    fn a_second_port_on_an_address_is_refused_with_its_holder_named() {
        let a = IpAddr::from([127, 0, 201, 9]);
        let first = UdpPort::bind(a).unwrap();
        let e = UdpPort::bind(a).expect_err("two owners of 127.0.201.9:4791");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let msg = e.to_string();
        let me = format!("pid {} (", std::process::id());
        for want in ["UDP 127.0.201.9:4791 is already in use by ", &me] {
            assert!(msg.contains(want), "no {want:?} in {msg:?}");
        }
        // The uring backend binds its socket first, before any io_uring call.
        let e = crate::UringPort::open(a, BackendOptions::default()).unwrap_err();
        assert!(e.to_string().contains(&me), "{e}");
        drop(first);
        UdpPort::bind(a).expect("the address is free once its owner is gone");
    }

    #[test]
    fn a_port_gets_its_8_mib_buffers_past_the_sysctl_caps() {
        // Needs CAP_NET_ADMIN (CI runs as root). The kernel reports twice the size asked
        // (its bookkeeping share); without the FORCE options the size would stop at twice
        // net.core.rmem_max / wmem_max, 416 KiB on a default kernel, 8 MiB on this host.
        let port = UdpPort::bind(IpAddr::from([127, 0, 201, 20])).unwrap();
        let fd = port.fd();
        let sock = socket2::SockRef::from(&fd);
        let (rx, tx) = (
            sock.recv_buffer_size().unwrap(),
            sock.send_buffer_size().unwrap(),
        );
        assert_eq!((rx, tx), (16 << 20, 16 << 20), "SO_RCVBUF, SO_SNDBUF");
    }

    #[test]
    fn datagrams_the_kernel_dropped_at_a_full_queue_are_counted() {
        // 30 000 datagrams of 1000 bytes at a port that reads none (~60 MB of kernel
        // memory against its 16 MiB): every one is either read afterwards or counted.
        let a = IpAddr::from([127, 0, 201, 21]);
        let mut port = UdpPort::bind(a).unwrap();
        let tx = UdpSocket::bind((a, 0)).unwrap();
        const SENT: u64 = 30_000;
        for i in 0..SENT {
            let mut d = [0u8; 1000];
            d[..8].copy_from_slice(&i.to_le_bytes());
            tx.send_to(&d, SocketAddr::new(a, ROCE_V2_PORT)).unwrap();
        }
        let mut read = 0u64;
        while port.recv(&mut |_, _| read += 1).unwrap() > 0 {}
        let dropped = port.kernel_dropped();
        assert!(dropped > 0, "read {read} of {SENT}: the queue never filled");
        assert_eq!(
            read + dropped,
            SENT,
            "read {read}, counted dropped {dropped}"
        );
    }

    #[test]
    fn a_closed_port_can_be_bound_again_at_once() {
        // What SO_REUSEADDR was once set for: a restarted engine takes its address back.
        let a = IpAddr::from([127, 0, 201, 22]);
        for _ in 0..3 {
            drop(UdpPort::bind(a).unwrap());
        }
    }

    #[test]
    fn a_refused_gso_send_goes_out_one_by_one_intact() {
        let (a, b) = (
            IpAddr::from([127, 0, 201, 7]),
            IpAddr::from([127, 0, 201, 8]),
        );
        let mut tx = UdpPort::bind(a).unwrap();
        let mut rx = UdpPort::bind(b).unwrap();
        // Without a UDP checksum the kernel refuses GSO (EINVAL) but sends datagrams.
        sys::set_int_opt(tx.sock.as_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK, 1).unwrap();
        let sent = packets(a, b, 6, 500);
        for p in &sent {
            tx.send(b, ROCE_V2_PORT, 0, p).unwrap();
        }
        tx.flush().unwrap();
        assert!(!tx.gso, "the refusal is remembered");
        assert_eq!(tx.counters().tx_packets, 6);
        let got = receive(&mut rx, 6);
        for ((p, status), want) in got.iter().zip(&sent) {
            assert_eq!(p, want, "sent with its ID-0 ICRC restored");
            assert_eq!(*status, IcrcStatus::Valid);
        }
    }
}
