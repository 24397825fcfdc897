//! Packet I/O for rocex engines.
//!
//! A [`Backend`] moves RoCE v2 payloads between an engine and the network; [`open`] picks
//! one by [`BackendKind`]. [`UdpPort`] carries RoCE v2 over an ordinary UDP socket on port
//! 4791 (no privileges), batched: `sendmmsg`/`recvmmsg`, UDP GSO on the way out and UDP
//! GRO on the way in, with each GSO segment's ICRC fixed for the IPv4 identification the
//! kernel gives it. [`AfPacketPort`] moves whole Ethernet frames through PACKET_MMAP
//! rings (CAP_NET_RAW) and checks every received ICRC; [`UringPort`] drives a UDP socket
//! through io_uring. [`SteerGroup`] shares one address's UDP port among processes, the
//! kernel steering each datagram to the owner of its destination QP. [`Injected`] wraps
//! any backend with seeded fault injection. [`Driver`] runs an [`rocex_proto::Engine`] on any backend: received datagrams in,
//! timers on the wall clock, transmits out. The engine itself does no I/O.

mod afpacket;
mod backend;
mod driver;
mod inject;
mod link;
mod poll;
mod sockopt;
mod steer;
mod udp;
mod uring;

pub use afpacket::AfPacketPort;
pub use backend::{
    Backend, BackendCounters, BackendKind, BackendOptions, MAX_PACKET, RxMeta, UnknownBackend,
};
pub use driver::{Driver, Hooks};
pub use inject::{Faults, FaultsError, Injected, To};
pub use link::link_mtu;
pub use rocex_faults::FaultCounters;
pub use steer::{Granted, MAX_SLOT_BITS, SteerGroup};
pub use udp::UdpPort;
pub use uring::UringPort;

/// Opens the backend `kind` on `local` with `opts`.
pub fn open(
    kind: BackendKind,
    local: std::net::IpAddr,
    opts: BackendOptions,
) -> std::io::Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Udp => Ok(Box::new(UdpPort::open(local, opts)?)),
        BackendKind::AfPacket => Ok(Box::new(AfPacketPort::open(local, opts)?)),
        BackendKind::Uring => Ok(Box::new(UringPort::open(local, opts)?)),
    }
}
