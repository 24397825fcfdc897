/*! RoCE v2 on the wire, without I/O.

This crate turns bytes into RoCE v2 packets and back, exactly as the InfiniBand
Architecture Specification (IBTA Vol. 1, Release 1.5, chapter 9 and annex A17) and
Linux's Soft-RoCE driver (`rdma_rxe`) define them:

* one module per transport header ([`bth`], [`reth`], [`aeth`], [`atomic_eth`],
  [`atomic_ack_eth`], [`immdt`], [`ieth`], [`deth`], [`feth`], [`cnp`], and rocex's
  selective-repeat [`sreth`] and [`sack`]), each with a
  zero-copy view (`Header<T: AsRef<[u8]>>`) and a validated representation (`Repr`);
* the [`opcode`] table, which drives parsing: it says which extension headers each opcode
  carries, whether it carries payload and where it stands in a message;
* [`Psn`], the 24-bit packet sequence number with wrapping window arithmetic;
* [`icrc`], the invariant CRC as rxe computes it for IPv4 and IPv6;
* [`packet`], a whole transport packet (BTH to ICRC), and [`frame`], a whole Ethernet
  frame, with Ethernet, 802.1Q, IPv4, IPv6 and UDP handled by `etherparse`.

# Guarantees
* No `unsafe`, no allocation on the parse and emit paths, no panic on any input: every
  view has `check_len`, after which its accessors do not panic, and every parser returns
  an [`Error`] that names the header and the byte offset that failed.
* Emitting a parsed packet reproduces its bytes exactly, reserved bits included.
*/
#![forbid(unsafe_code)]

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cnp;
pub mod deth;
pub mod ecn;
mod error;
pub mod feth;
mod field;
pub mod frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod opcode;
pub mod packet;
mod psn;
pub mod reth;
pub mod sack;
pub mod sreth;

pub use aeth::{NakCode, Repr as AethRepr, Syndrome};
pub use atomic_ack_eth::Repr as AtomicAckEthRepr;
pub use atomic_eth::Repr as AtomicEthRepr;
pub use bth::Repr as BthRepr;
pub use cnp::Repr as CnpRepr;
pub use deth::Repr as DethRepr;
pub use ecn::Ecn;
pub use error::{Error, ErrorKind, Layer};
pub use feth::Repr as FethRepr;
pub use frame::{FrameRepr, IpRepr, LinkRepr, ROCE_V2_PORT, udp_source_port};
pub use icrc::IcrcForm;
pub use ieth::Repr as IethRepr;
pub use immdt::Repr as ImmDtRepr;
pub use opcode::{Ext, ExtSet, Opcode, OpcodeInfo, Operation, Position, Service};
pub use packet::PacketRepr;
pub use psn::Psn;
pub use reth::Repr as RethRepr;
pub use sack::Repr as SackRepr;
pub use sreth::Repr as SrEthRepr;

/// Result of wire parsing and emission.
pub type Result<T> = core::result::Result<T, Error>;
