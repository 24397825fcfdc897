/*! The RoCE v2 transport engine, without I/O.

An [`Engine`] is one RDMA device: protection domains and memory regions (through
`rocex-mem`), completion queues and queue pairs. It owns no socket, clock, thread or
mapping: the caller hands it packets ([`Engine::handle_packet`]), time
([`Engine::handle_timeout`]) and verbs calls (`post_send`, `modify_qp`, ...), and takes out
packets ([`Engine::poll_transmit`]), completions ([`Engine::poll_cq`]), events and the next
deadline ([`Engine::poll_timeout`]). Randomness (QPNs, keys, initial PSNs) comes from a
seed in [`Config`], so a run is reproducible to the last retransmission.

The transport follows the IBTA spec and, where the spec leaves room, Linux rxe, so that
rocex and rxe answer the same request stream with the same packets (`qp` module docs).
*/
#![forbid(unsafe_code)]

mod counters;
mod cq;
mod engine;
mod qp;
pub mod time;
pub mod verbs;

pub use counters::{Counters, QpCounters};
pub use cq::NotifyOn;
pub use engine::{
    Config, Engine, Event, GSI_QPN, IcrcStatus, QpInit, QpStatus, QpnSlot, Transmit, VerbsError,
};
pub use qp::state::TransitionError;
pub use qp::{
    Congestion, DcqcnParamError, DcqcnParams, MAX_PKT_PER_ACK, MAX_UNACKED_PSNS, MAX_WINDOW,
    RateState,
};
pub use rocex_mem::{Access, Keys, MemError, MwBinding, PdId, Region, SubRegion, VecRegion};
pub use rocex_wire::Ecn;
pub use time::Instant;
pub use verbs::{GRH_LEN, grh_source};

pub(crate) use engine::{Ctx, Outgoing};
