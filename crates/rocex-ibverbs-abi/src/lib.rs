//! rdma-core's public structures (`<infiniband/verbs.h>`), `#[repr(C)]`: every object
//! rocex's drop-in libibverbs allocates or fills, and the ones its librdmacm reads or
//! fills, so that both libraries share one layout. Field names follow the header so that
//! rocex-ibverbs' layout test (`crates/rocex-ibverbs/tests/layout.rs`) can compare each
//! offset with the system header's. It exports nothing, so it adds no symbol to either
//! library.

#![allow(non_camel_case_types, missing_docs, clippy::use_self)]

mod context;
mod device;
mod list;
mod private;
mod qp;

pub use context::*;
pub use device::*;
pub use list::*;
pub use private::*;
pub use qp::*;
