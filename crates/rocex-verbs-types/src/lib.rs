/*! The verbs vocabulary of rocex: QP types, states and attributes, access flags, work
requests and completions, with libibverbs' numbering where libibverbs has one, so that the
shared-memory ABI and the verbs library can pass them through unchanged.

This crate sits below the engine (rocex-proto re-exports it as `rocex_proto::verbs`), so
the client side (rocex-shm, rocex-verbs) speaks the engine's language without linking it.
It holds plain data and the few rules that belong to the data itself (which rights a FLUSH
needs, the modify sequence from RESET to RTS); it does no I/O and has no `unsafe`.
*/
#![forbid(unsafe_code)]

mod access;
mod check;
mod grh;
mod qp;
mod wc;
mod wr;

pub use access::Access;
pub use check::{MAX_MESSAGE, WrError, check_data, check_op, message_len};
pub use grh::{GRH_LEN, grh_source};
pub use qp::{AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpState, QpType};
pub use wc::{WcOpcode, WcStatus, WorkCompletion};
pub use wr::{
    PLACEMENT_GLOBAL_VISIBILITY, PLACEMENT_PERSISTENCE, RecvWr, Remote, SendData, SendFlags,
    SendOp, SendWr, Sge, SgeList, UdDest, flush_access,
};
