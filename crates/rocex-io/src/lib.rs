//! Packet I/O for rocex engines.
//!
//! [`UdpPort`] carries RoCE v2 over an ordinary UDP socket on port 4791 (no privileges);
//! [`Driver`] runs an [`rocex_proto::Engine`] on it: received datagrams in, timers on the
//! wall clock, transmits out. The engine itself does no I/O.

mod backend;
mod driver;
mod inject;
mod udp;

pub use backend::{
    Backend, BackendCounters, BackendKind, BackendOptions, RxMeta, UnknownBackend,
};
pub use driver::Driver;
pub use inject::{FaultCounters, Faults, FaultsError, Injector};
pub use udp::UdpPort;
