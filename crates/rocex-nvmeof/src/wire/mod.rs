//! The wire layouts of NVMe over Fabrics on the RDMA transport: zero-copy views of the
//! command and response capsules, the keyed SGL descriptor, the rdma_cm private data and
//! the Connect data, and parsers of the Identify structures. `docs/nvmeof.md` tabulates
//! every field with where it is defined.

pub mod cm;
pub mod connect;
pub mod cqe;
pub mod identify;
pub mod sqe;

pub use cm::{CmRej, CmRep, CmReq};
pub use connect::ConnectData;
pub use cqe::{Cqe, Status};
pub use identify::{Controller, Namespace};
pub use sqe::{KeyedSgl, Sqe};
