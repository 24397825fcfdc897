//! Control-channel framing (`docs/abi.md` §6.1) and the message bodies of §6.2.
//!
//! Frames: [`encode_frame`] and [`decode_header`]. Bodies: [`Request`] and [`Response`],
//! each with `encode` and a hostile-input-safe `decode` that checks every length, enum value
//! and reserved byte and returns a [`BodyError`] (never panics). How many file descriptors
//! a message carries is fixed by its kind ([`Request::fds`], [`response_fds`]); a frame with
//! any other number is refused by the receiver.
//!
//! The pieces, each in its own file: `frame` (the 16-byte header), [`kind`] (message
//! numbers), `codec` (the bounds-checked field reader and writer every body goes through),
//! `qp` and `cm` (fields shared by requests and responses), `direct` (the direct data
//! path's grant), `request`, `response` and
//! `stats` (the `Stat` answer, whose counters are named so the daemon may add some without
//! a new ABI version).

mod cm;
mod codec;
mod direct;
mod frame;
pub mod kind;
mod qp;
mod request;
mod response;
mod stats;

pub use cm::{
    CM_PRIVATE_DATA_LEN, CM_REJ_PRIVATE_DATA_LEN, CM_REP_PRIVATE_DATA_LEN,
    CM_SIDR_PRIVATE_DATA_LEN, CM_SIDR_REP_PRIVATE_DATA_LEN, CmConn, CmEvent, CmEventKind,
};
pub use codec::BodyError;
pub use direct::DirectGrant;
pub use frame::{FrameError, FrameHeader, HEADER_LEN, MAX_FRAME, decode_header, encode_frame};
pub use qp::{ATTR_MASK_ALL, QP_ATTR_LEN, qp_state_from_wire, qp_type_from_wire, qp_type_to_wire};
pub use request::{BindMw, Request};
pub use response::{DeviceAttr, QpCreated, Response, response_fds};
pub use stats::{Counters, QpStat, STAT_BUDGET, StatGroup, Stats};

#[cfg(test)]
mod tests;
