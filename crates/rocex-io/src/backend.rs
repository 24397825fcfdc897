//! The packet I/O interface every backend offers, and how one is chosen.
//!
//! A backend moves RoCE v2 UDP payloads (BTH through ICRC) between the engine and the
//! network. It owns whatever lies below the BTH (sockets, rings, Ethernet and IP headers)
//! and therefore knows which IPv4 identification a packet leaves with and whether it can
//! check a received packet's ICRC, which covers that header.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::str::FromStr;

use rocex_proto::{Ecn, IcrcStatus, Instant};

/// The largest packet (BTH through ICRC) a backend takes: a UDP datagram's payload.
pub const MAX_PACKET: usize = 65_536;

/// Where a received datagram came from and what the backend knows of its ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    /// Source address and UDP source port.
    pub src: SocketAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// `Valid` or `Invalid`: every backend checks every ICRC, against the real IP header
    /// (afpacket) or by solving for the IPv4 identification a UDP socket hides (udp,
    /// uring; `rocex_wire::icrc::SocketCheck`).
    pub icrc: IcrcStatus,
    /// The IP header's TOS (IPv6: traffic class) byte, DSCP and ECN (udp: the
    /// `IP_TOS`/`IPV6_TCLASS` control message; afpacket: the header itself; uring: not
    /// seen, 0).
    pub tos: u8,
}

impl RxMeta {
    /// The ECN field of [`Self::tos`]: CE where a router found congestion.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_tos(self.tos)
    }
}

/// What a backend has counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendCounters {
    /// Datagrams handed to the engine.
    pub rx_packets: u64,
    /// Datagrams the network took.
    pub tx_packets: u64,
    /// System calls (or ring submissions) that sent them.
    pub tx_batches: u64,
    /// System calls (or ring completions) that received them.
    pub rx_batches: u64,
    /// Received datagrams whose ICRC checks only under an IPv4 identification rocex's
    /// senders do not use (a peer such as kernel rxe); dropped when
    /// [`BackendOptions::peers_are_rocex`]. Always 0 where the header is seen (afpacket).
    pub icrc_foreign_id: u64,
    /// Sends dropped because the kernel's queue was full (the transport retransmits).
    pub tx_dropped: u64,
    /// Received frames that were not RoCE v2 for this address, or were malformed.
    pub rx_ignored: u64,
    /// Datagrams the kernel dropped at the socket before rocex could read them: its
    /// receive queue was full (lost; the transport resends them), or its filter refused
    /// them (a direct slot's socket: another slot's packets). UDP and uring backends
    /// (`SO_MEMINFO`), read by [`Driver::backend_counters`](crate::Driver::backend_counters)
    /// ([`Backend::kernel_dropped`]).
    pub rx_kernel_dropped: u64,
}

/// Options every backend takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendOptions {
    /// Every peer is rocex, whose IPv4 identifications are 0 and 1..63 (GSO segments): a
    /// UDP socket then accepts only those, which catches a random corruption with
    /// probability 1 - 2^-26 rather than 1 - 2^-16 (`docs/security.md`).
    pub peers_are_rocex: bool,
    /// Send one datagram per packet: no UDP GSO (what a per-frame benchmark wants).
    pub no_gso: bool,
    /// Receive one datagram per packet: no UDP GRO.
    pub no_gro: bool,
    /// 802.1Q VLAN ID (0..4096) the afpacket backend tags its frames with and requires on
    /// received ones; `None`: untagged.
    pub vlan: Option<u16>,
    /// DSCP (0..64) of the IP header of a packet sent whose traffic class has none.
    pub dscp: u8,
    /// ECN codepoint (0..4) of the IP header of a packet sent whose traffic class has none.
    pub ecn: u8,
}

impl BackendOptions {
    /// The TOS (IPv4) or traffic class (IPv6) byte a packet with traffic class `tclass`
    /// (`Transmit::tclass`) leaves with: its DSCP and its ECN field, each where it is not
    /// 0, else the port's [`Self::dscp`] and [`Self::ecn`].
    pub fn tos(&self, tclass: u8) -> u8 {
        let dscp = match tclass >> 2 {
            0 => self.dscp & 0x3f,
            d => d,
        };
        let ecn = match tclass & 3 {
            0 => self.ecn & 3,
            e => e,
        };
        dscp << 2 | ecn
    }
}

/// Packet I/O for one local address.
///
/// `send` queues and `flush` sends what is queued; a backend may send early when its
/// batch fills. Nothing blocks: waiting is done with [`Backend::fd`] in poll(2).
pub trait Backend: fmt::Debug + Send {
    /// The backend's name, as `--backend` takes it.
    fn kind(&self) -> BackendKind;
    /// The address RoCE is served on.
    fn local(&self) -> IpAddr;
    /// The UDP source port every packet leaves from when the backend cannot choose one
    /// per QP (a socket is bound to 4791); `None` lets the engine use rxe's per-QP port.
    fn fixed_source_port(&self) -> Option<u16>;
    /// Receives the datagrams waiting now, at most one batch, handing each payload (BTH
    /// through ICRC) to `f`. Returns how many it handed over.
    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize>;
    /// Queues `payload` (BTH through ICRC, the ICRC computed for IPv4 identification 0)
    /// for `dest:4791` from UDP port `src_port`, with the IP TOS
    /// [`BackendOptions::tos`] gives traffic class `tclass`.
    fn send(&mut self, dest: IpAddr, src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()>;
    /// Room in the send queue for the next packet, at least [`MAX_PACKET`] bytes, where
    /// the backend can take a packet in place: the caller writes it there and
    /// [`Backend::commit`]s it, which saves the copy [`Backend::send`] makes. `None`: use
    /// `send`.
    fn room(&mut self) -> Option<&mut [u8]> {
        None
    }
    /// Queues the `len`-byte packet written into [`Backend::room`], as [`Backend::send`]
    /// would queue it.
    fn commit(&mut self, dest: IpAddr, src_port: u16, tclass: u8, len: usize) -> io::Result<()> {
        let _ = (dest, src_port, tclass, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "commit: this backend lends no room",
        ))
    }
    /// Sends everything queued.
    fn flush(&mut self) -> io::Result<()>;
    /// Readable when datagrams wait.
    fn fd(&self) -> BorrowedFd<'_>;
    /// The engine's time is `now` (the caller's clock, as it gives its engine): what fault
    /// injection's delays run on ([`crate::Injected`]); nothing else reads it.
    fn tick(&mut self, now: Instant) {
        let _ = now;
    }
    /// When a held packet is due (fault injection's delays), on the engine's clock, if any.
    fn next_due(&self) -> Option<Instant> {
        None
    }
    /// What the backend has counted (no system call: a driver's turn may ask), but
    /// [`kernel_dropped`](Self::kernel_dropped), which reads 0 here.
    fn counters(&self) -> BackendCounters;
    /// Datagrams the kernel dropped at the backend's socket
    /// ([`BackendCounters::rx_kernel_dropped`]): a system call, for reports, not turns.
    fn kernel_dropped(&self) -> u64 {
        0
    }
    /// Whether a busy poller's first packet of a turn (its answer) should leave in a send
    /// of its own, ahead of the ACKs built after it. It pays where a send returns as soon
    /// as the peer's socket has the packet (UDP: 9.5 against 11.5 us round trips on a
    /// veth pair); where the send also carries the packet through the local stack after
    /// the peer has it (a packet socket), the second system call costs more than it
    /// saves. Measured, not derived: see docs/performance.md.
    fn answer_alone(&self) -> bool {
        false
    }
    /// What fault injection has done, when the backend injects faults
    /// ([`crate::Injected`]).
    fn fault_counters(&self) -> Option<crate::FaultCounters> {
        None
    }
}

/// A boxed backend is a backend, so that wrappers take `Box<dyn Backend>` too.
impl<B: Backend + ?Sized> Backend for Box<B> {
    fn kind(&self) -> BackendKind {
        (**self).kind()
    }
    fn local(&self) -> IpAddr {
        (**self).local()
    }
    fn fixed_source_port(&self) -> Option<u16> {
        (**self).fixed_source_port()
    }
    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
        (**self).recv(f)
    }
    fn send(&mut self, dest: IpAddr, src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()> {
        (**self).send(dest, src_port, tclass, payload)
    }
    fn room(&mut self) -> Option<&mut [u8]> {
        (**self).room()
    }
    fn commit(&mut self, dest: IpAddr, src_port: u16, tclass: u8, len: usize) -> io::Result<()> {
        (**self).commit(dest, src_port, tclass, len)
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
    fn fd(&self) -> BorrowedFd<'_> {
        (**self).fd()
    }
    fn tick(&mut self, now: Instant) {
        (**self).tick(now)
    }
    fn next_due(&self) -> Option<Instant> {
        (**self).next_due()
    }
    fn counters(&self) -> BackendCounters {
        (**self).counters()
    }
    fn kernel_dropped(&self) -> u64 {
        (**self).kernel_dropped()
    }
    fn answer_alone(&self) -> bool {
        (**self).answer_alone()
    }
    fn fault_counters(&self) -> Option<crate::FaultCounters> {
        (**self).fault_counters()
    }
}

/// The backends `--backend` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// A UDP socket on port 4791, batched, with UDP GSO and GRO (no privileges).
    Udp,
    /// Whole Ethernet frames through PACKET_MMAP rings (CAP_NET_RAW).
    AfPacket,
    /// A UDP socket driven through io_uring.
    Uring,
}

impl BackendKind {
    /// Every backend, in `--backend`'s order.
    pub const ALL: [Self; 3] = [Self::Udp, Self::AfPacket, Self::Uring];

    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::AfPacket => "afpacket",
            Self::Uring => "uring",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend name that is not one of [`BackendKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownBackend(pub String);

impl fmt::Display for UnknownBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown backend {:?}: expected udp, afpacket or uring",
            self.0
        )
    }
}

impl std::error::Error for UnknownBackend {}

impl FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownBackend(s.to_owned()))
    }
}
