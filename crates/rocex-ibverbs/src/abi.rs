//! rdma-core's public structures (`<infiniband/verbs.h>`): rocex-ibverbs-abi's, which
//! rocex's librdmacm shares. The layout test (`tests/layout.rs`) compares each offset
//! with the system header's.

pub use rocex_ibverbs_abi::*;
