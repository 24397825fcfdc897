//! Conformance by replay, the requester's half: does rocex's requester send what kernel
//! rxe sent, given the same work and the same responses?
//!
//! For every RC connection whose requester the capture shows, [`plan`] reads back the
//! work requests and the QP's attributes (printing each inference), and [`drive`] posts
//! the work requests into a fresh `rocex_proto::Engine` as rxe's application did, hands
//! it rxe's captured responses at their captured times, and compares each request packet
//! it sends with the next one rxe sent: opcode, PSN, AckReq, SE, payload length and the
//! extension headers. Retransmissions after a NAK, a timeout or an RNR NAK, and the
//! restart point of a READ after a partial response, are compared as any other packet.

pub mod drive;
pub mod plan;
