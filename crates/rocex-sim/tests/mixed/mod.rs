//! A stream of mixed messages from side a to side b over a [`Pair`], every one checked:
//! completions in posting order, each receive once and in order with its bytes, WRITE
//! and READ bytes where they belong, every FETCH_ADD applied once with a value of its own.
//! `lossy.rs` and `selective_repeat.rs` run it over their links.
#![allow(dead_code, unreachable_pub)] // each test uses the kinds it needs

use std::collections::VecDeque;
use std::time::Duration;

use rocex_proto::verbs::{SendOp, WcOpcode, WcStatus};

use crate::common::*;

/// One kind of message in the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Send,
    SendWithImm,
    Write,
    WriteWithImm,
    Read,
    FetchAdd,
    /// A COMPARE_SWAP that never matches (the counter only grows past its compare): it
    /// changes nothing, and its original value is checked.
    CompareSwap,
}

/// The messages and where they go.
pub struct Mix {
    /// Message `i` is `kinds[i % kinds.len()]`.
    pub kinds: &'static [Kind],
    /// Message `i`'s length.
    pub len_of: fn(u64) -> usize,
    /// Bytes of a slot (a sender buffer, a receive buffer, a WRITE target).
    pub slot: u64,
    /// Slots the sender and the receive buffers cycle through.
    pub slots: u64,
    /// WRITE targets on b.
    pub targets: u64,
    /// Receives posted up front (one more for each that completes).
    pub recvs: u64,
    /// Messages posted and not yet complete, at most.
    pub window: usize,
}

/// b's receive buffers, its WRITE targets, the READ source and the atomic counter.
const RECV_BASE: u64 = 4 << 20;
const TARGET_BASE: u64 = 1 << 20;
const READ_SRC: u64 = 2 << 20;
const COUNTER: u64 = 3 << 20;

impl Mix {
    fn kind(&self, i: u64) -> Kind {
        self.kinds[(i % self.kinds.len() as u64) as usize]
    }

    fn consumes_recv(&self, i: u64) -> bool {
        matches!(
            self.kind(i),
            Kind::Send | Kind::SendWithImm | Kind::WriteWithImm
        )
    }

    fn target(&self, i: u64) -> u64 {
        TARGET_BASE + (i % self.targets) * self.slot
    }

    /// Sends `messages` messages from a to b and checks each; returns the receives.
    pub fn run(&self, p: &mut Pair, messages: u64) -> u64 {
        let (a, b) = (p.side('a'), p.side('b'));
        for i in 0..self.recvs {
            p.post_recv(
                &b,
                i,
                RECV_BASE + (i % self.slots) * self.slot,
                self.slot as u32,
            );
        }
        let mut next_recv = self.recvs;
        let read_src = pattern(77, self.slot as usize);
        write_bytes(&b, READ_SRC, &read_src);
        let (mut posted, mut done, mut received) = (0u64, 0u64, 0u64);
        let mut outstanding = VecDeque::new();
        let mut expect_recv = VecDeque::new();
        let mut fetched = Vec::new();
        let deadline = p.now() + Duration::from_secs(600);
        while done < messages {
            while posted < messages && outstanding.len() < self.window {
                let i = posted;
                p.post_send(&a, self.request(&a, &b, i));
                if self.consumes_recv(i) {
                    expect_recv.push_back(i);
                }
                outstanding.push_back(i);
                posted += 1;
            }
            assert!(
                p.now() < deadline,
                "stalled at {done} of {messages}: {:?}",
                p.fabric.node(a.node).counters()
            );
            p.fabric.step();
            while let Some(wc) = p.fabric.node(a.node).poll_cq(a.cq) {
                let i = outstanding.pop_front().expect("a posted request");
                assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success), "in order");
                let (slot, len) = ((i % self.slots) * self.slot, (self.len_of)(i));
                match self.kind(i) {
                    Kind::Write => assert_eq!(
                        crc32fast::hash(&read_bytes(&b, self.target(i), len)),
                        crc32fast::hash(&pattern(i, len)),
                        "WRITE {i}"
                    ),
                    Kind::Read => {
                        assert!(read_bytes(&a, slot, len) == read_src[..len], "READ {i}");
                    }
                    Kind::FetchAdd => fetched.push(u64::from_ne_bytes(
                        read_bytes(&a, slot, 8).try_into().unwrap(),
                    )),
                    Kind::CompareSwap => {
                        let orig = u64::from_ne_bytes(read_bytes(&a, slot, 8).try_into().unwrap());
                        assert_eq!(orig, fetched.len() as u64, "CAS {i} saw the counter so far");
                    }
                    _ => {}
                }
                done += 1;
            }
            while let Some(wc) = p.fabric.node(b.node).poll_cq(b.cq) {
                let i = expect_recv
                    .pop_front()
                    .expect("a receive for a sent message");
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                let len = (self.len_of)(i);
                assert_eq!(wc.byte_len as usize, len, "message {i}");
                let (opcode, imm, at) = match self.kind(i) {
                    Kind::Send => (WcOpcode::Recv, None, None),
                    Kind::SendWithImm => (WcOpcode::Recv, Some(i as u32), None),
                    _ => (
                        WcOpcode::RecvRdmaWithImm,
                        Some(i as u32),
                        Some(self.target(i)),
                    ),
                };
                assert_eq!(
                    (wc.opcode, wc.imm_data),
                    (opcode, imm),
                    "{i}: in order, once"
                );
                let at = at.unwrap_or(RECV_BASE + (wc.wr_id % self.slots) * self.slot);
                assert_eq!(
                    crc32fast::hash(&read_bytes(&b, at, len)),
                    crc32fast::hash(&pattern(i, len)),
                    "message {i}"
                );
                received += 1;
                let at = RECV_BASE + (next_recv % self.slots) * self.slot;
                p.post_recv(&b, next_recv, at, self.slot as u32);
                next_recv += 1;
            }
        }
        p.settle(Duration::from_millis(50));
        assert!(
            expect_recv.is_empty(),
            "{} receives missing",
            expect_recv.len()
        );
        let wanted = (0..messages).filter(|&i| self.consumes_recv(i)).count() as u64;
        assert_eq!(received, wanted, "every receive once");
        let counter = u64::from_ne_bytes(read_bytes(&b, COUNTER, 8).try_into().unwrap());
        let adds = (0..messages)
            .filter(|&i| self.kind(i) == Kind::FetchAdd)
            .count() as u64;
        assert_eq!(counter, adds, "every FETCH_ADD applied once");
        fetched.sort_unstable();
        assert_eq!(
            fetched,
            (0..adds).collect::<Vec<_>>(),
            "each FETCH_ADD saw a value of its own"
        );
        received
    }

    /// Message `i`, its data written to a's slot first.
    fn request(&self, a: &Side, b: &Side, i: u64) -> rocex_proto::verbs::SendWr {
        let (slot, len) = ((i % self.slots) * self.slot, (self.len_of)(i));
        let kind = self.kind(i);
        if matches!(
            kind,
            Kind::Send | Kind::SendWithImm | Kind::Write | Kind::WriteWithImm
        ) {
            write_bytes(a, slot, &pattern(i, len));
        }
        let data = vec![sge(a, slot, len as u32)];
        let atomic = vec![sge(a, slot, 8)];
        let (op, sges) = match kind {
            Kind::Send => (SendOp::Send, data),
            Kind::SendWithImm => (SendOp::SendWithImm(i as u32), data),
            Kind::Write => (SendOp::Write(remote(b, self.target(i))), data),
            Kind::WriteWithImm => (
                SendOp::WriteWithImm(remote(b, self.target(i)), i as u32),
                data,
            ),
            Kind::Read => (SendOp::Read(remote(b, READ_SRC)), data),
            Kind::FetchAdd => (
                SendOp::FetchAdd {
                    remote: remote(b, COUNTER),
                    add: 1,
                },
                atomic,
            ),
            Kind::CompareSwap => (
                SendOp::CompareSwap {
                    remote: remote(b, COUNTER),
                    compare: u64::MAX,
                    swap: 0,
                },
                atomic,
            ),
        };
        wr(i, op, sges)
    }
}
