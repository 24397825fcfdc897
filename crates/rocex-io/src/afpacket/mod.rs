//! RoCE v2 in whole Ethernet frames through PACKET_MMAP rings, on the interface that holds
//! the local address.
//!
//! Needs CAP_NET_RAW. The port writes every header itself: Ethernet (with an 802.1Q tag
//! when [`BackendOptions::vlan`] is set), IPv4 with DF, identification 0, TTL 64 and the
//! configured DSCP and ECN (or IPv6), and UDP to port 4791 from each QP's own source port
//! (rxe's), checksum 0 over IPv4. Destination MACs come from the kernel's neighbour table
//! or an ARP request / neighbour solicitation of its own (`neigh`); a destination that does
//! not answer has its packets dropped and counted.
//!
//! Every received frame is checked whole: IPv4 or IPv6 UDP to the local address and port
//! 4791, not sent by this host, and its ICRC against the headers it arrived with, so
//! [`RxMeta::icrc`] is always `Valid` or `Invalid`, whoever the sender. The kernel sees
//! those datagrams too: a UDP socket bound to port 4791 with a drop-everything filter keeps
//! it from queueing them or answering with ICMP port unreachable.
//!
//! Receiving uses a TPACKET_V2 ring of 72 KiB frames, each readable as soon as the kernel
//! has filled it (a lone ACK does not wait for a timer, as a TPACKET_V3 block would), and
//! large enough for a whole 64 KiB GSO burst from a UDP peer; sending, one `sendmmsg` per
//! [`Backend::flush`] of the frames gathered since (`tx`).

mod filter;
mod frames;
mod link;
mod neigh;
mod ring;
pub(crate) mod sys;
mod tx;

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::{Backend, BackendCounters, BackendKind, BackendOptions, RxMeta, sockopt};
use frames::Headers;
use link::Link;
use neigh::Neighbours;
use ring::Rings;
use tx::TxBatch;

/// A packet socket with mapped rings on the interface of one local address.
#[derive(Debug)]
pub struct AfPacketPort {
    local: IpAddr,
    /// The interface's MTU: the largest IP packet sent.
    mtu: usize,
    sock: OwnedFd,
    rings: Rings,
    tx: TxBatch,
    headers: Headers,
    neighbours: Neighbours,
    /// Where the datagrams of a received GSO burst are rebuilt one by one.
    scratch: Vec<u8>,
    /// Holds UDP port 4791 against the kernel; never read.
    _port_guard: UdpSocket,
    counters: BackendCounters,
}

impl AfPacketPort {
    /// Opens the port for `local`, an address of an interface of the calling thread's
    /// network namespace.
    pub fn open(local: IpAddr, opts: BackendOptions) -> io::Result<Self> {
        let link = Link::holding(local)?;
        let headers = Headers::new(link.mac, local, &opts)?;
        let sock = sys::packet_socket(libc::SOCK_RAW)?;
        let rings = Rings::map(&sock)?;
        // This port's own frames are not received back (the receive path also skips
        // PACKET_OUTGOING, for kernels without the option).
        let _ = sockopt::set(
            &sock,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &(1 as libc::c_int),
        );
        SockRef::from(&sock).attach_filter(&filter::roce_only())?;
        sys::bind(&sock, link.ifindex, sys::ETH_P_ALL)?;
        Ok(Self {
            local,
            mtu: link.mtu as usize,
            _port_guard: hold_port(local)?,
            sock,
            rings,
            tx: TxBatch::new(),
            headers,
            neighbours: Neighbours::new(link, local),
            scratch: Vec::new(),
            counters: BackendCounters::default(),
        })
    }

    fn drop_one(&mut self) {
        self.counters.tx_dropped += 1;
    }
}

/// A UDP socket on `local:4791` that accepts nothing: the kernel neither queues RoCE
/// datagrams nor answers them with ICMP port unreachable. Bound as the other backends bind
/// their sockets, it also keeps a second engine of any backend off the address.
fn hold_port(local: IpAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(SocketAddr::new(local, 0)),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    s.attach_filter(&filter::nothing())?;
    crate::udp::bind_roce_port(&s, local)?;
    Ok(s.into())
}

impl Backend for AfPacketPort {
    fn kind(&self) -> BackendKind {
        BackendKind::AfPacket
    }

    fn local(&self) -> IpAddr {
        self.local
    }

    fn fixed_source_port(&self) -> Option<u16> {
        None
    }

    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
        let (headers, c, scratch) = (&self.headers, &mut self.counters, &mut self.scratch);
        let mut n = 0;
        let got = self.rings.rx_frames(|frame| {
            let (handed, ignored) = headers.receive(&frame, scratch, f);
            n += handed;
            c.rx_ignored += ignored as u64;
        });
        if got > 0 {
            c.rx_batches += 1;
            c.rx_packets += n as u64;
        }
        Ok(n)
    }

    fn send(&mut self, dest: IpAddr, src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()> {
        if self.headers.ip_len(payload.len()) > self.mtu
            || self.headers.frame_len(payload.len()) > tx::MAX_FRAME
        {
            self.drop_one();
            return Ok(());
        }
        let Some(mac) = self.neighbours.lookup(dest)? else {
            self.drop_one();
            return Ok(());
        };
        if self.tx.slot().is_none() {
            self.flush()?;
        }
        let Some(slot) = self.tx.slot() else {
            self.drop_one();
            return Ok(());
        };
        let tos = self.headers.tos(tclass);
        match self
            .headers
            .write(slot, mac, (dest, src_port), tos, payload)
        {
            Ok(len) => {
                self.tx.commit(len);
                self.counters.tx_packets += 1;
            }
            Err(_) => self.drop_one(),
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.tx.len() > 0 {
            self.counters.tx_batches += 1;
            self.counters.tx_dropped += self.tx.send(&self.sock)? as u64;
        }
        Ok(())
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    fn counters(&self) -> BackendCounters {
        self.counters
    }
}
