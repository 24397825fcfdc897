//! rocex's shared-memory interface between applications and `rocexd`: a versioned ring ABI
//! (`docs/abi.md`), single-producer single-consumer rings with doorbells, and the daemon's
//! validation of every descriptor an application writes.
//!
//! # Layers
//! * [`layout`] and [`desc`]: the `#[repr(C)]` ABI, with compile-time size checks.
//! * [`mem`]: [`ShmView`], a bounds-checked, `Result`-returning view of shared memory as
//!   atomic words; [`HeapMem`] backs it with a heap buffer for tests.
//! * [`ring`]: [`Producer`] and [`Consumer`] over a view: free-running indices, release and
//!   acquire, and the sleep/wakeup protocol with notification suppression.
//! * [`validate`]: the daemon's readers. Every byte of shared memory is hostile: the daemon
//!   keeps its own ring geometry, copies each descriptor once and checks it into the engine's
//!   [`SendWr`](rocex_verbs_types::SendWr) and [`RecvWr`](rocex_verbs_types::RecvWr).
//! * [`doorbell`]: eventfds and adaptive polling.
//! * [`region`]: the memfd mapping and fd passing; with the view's bulk copies, the only
//!   `unsafe` code.
//! * [`control`]: the control-socket messages.
//!
//! # Model checking
//! The ring's publish/consume and its sleep/wakeup protocol are checked with loom:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p rocex-shm --release --lib loom
//! ```
//!
//! Under `cfg(loom)` the atomics come from loom ([`sync`](crate) shim) and the OS-facing
//! modules (`region`, `doorbell`, `board`) are left out.

#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(not(loom))]
pub mod board;
pub mod control;
pub mod desc;
#[cfg(not(loom))]
pub mod doorbell;
pub mod layout;
pub mod mem;
#[cfg(not(loom))]
pub mod region;
pub mod ring;
mod sync;
pub mod validate;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(not(loom))]
pub use board::{Board, BoardEntry};
pub use desc::{Cqe, EncodeError, RecvDesc, SendDesc, SgeDesc, encode_recv, encode_send};
#[cfg(not(loom))]
pub use doorbell::EventFd;
pub use layout::{ABI_VERSION, RegionHeader, RingHeader, RingKind, RingSpec, SpecError};
pub use mem::{HeapMem, MemError, ShmView};
#[cfg(not(loom))]
pub use region::SharedRegion;
pub use ring::{Consumer, Producer, Ring, RingError, SleepCheck, Slot};
pub use validate::{
    CqReader, CqWriter, DescError, PostError, QueueLimits, QueueReader, ReadError, RqLimits,
    RqReader, SqLimits, SqReader, WqWriter,
};
