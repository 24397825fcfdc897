//! A small NVMe over Fabrics host (initiator) on the RDMA transport, over rocexd.
//!
//! * [`wire`]: the capsules (64-byte SQE, 16-byte CQE), the keyed SGL data block
//!   descriptor, the rdma_cm private data of the RDMA transport binding, the Connect data
//!   and the Identify fields, as zero-copy views with their offsets tested.
//! * [`Queue`]: one queue over one RC connection that rocexd's rdma_cm makes: command
//!   capsules as SENDs, responses on posted receives, data moved by the controller with
//!   RDMA READ and WRITE into the queue's registered memory, `depth` commands in flight.
//! * [`Host`]: the association: admin queue, Fabrics Connect, the controller enabled
//!   through its properties, Identify, I/O queues, and the orderly end.
//!
//! Every wait has a timeout, and every failure is an [`Error`] naming the queue and,
//! where one is involved, the command. `docs/nvmeof.md` describes the protocol and the
//! layouts with their sources.

#![deny(unsafe_code)]

mod error;
mod host;
mod queue;
mod track;
pub mod wire;

pub use error::{Error, Result};
pub use host::{ADMIN_QUEUE_DEPTH, Host, HostConfig};
pub use queue::{Queue, QueueConfig};
pub use track::Done;
