//! 10 000 mixed messages over a link that loses 10%, duplicates 5%, reorders and corrupts:
//! every message arrives exactly once, in order, with its bytes intact.

mod common;

use std::collections::VecDeque;
use std::time::Duration;

use common::*;
use rocex_proto::verbs::{Mtu, SendOp, WcOpcode, WcStatus};
use rocex_sim::Link;

const MESSAGES: u64 = 10_000;
const WINDOW: usize = 96;
const SLOT: u64 = 8192;
const SLOTS: u64 = 256;

fn len_of(i: u64) -> usize {
    (pattern(i ^ 0xabc, 2)
        .iter()
        .map(|b| *b as usize)
        .sum::<usize>()
        * 13)
        % 6000
}

#[test]
fn mixed_messages_survive_a_bad_link() {
    let link = Link {
        delay: Duration::from_micros(10),
        jitter: Duration::from_micros(4),
        loss: 0.10,
        duplicate: 0.05,
        reorder: 0.05,
        reorder_by: Duration::from_micros(60),
        corrupt: 0.01,
    };
    let params = Params {
        mtu: Mtu::M1024,
        buf_len: 8 << 20,
        timeout: 8,
        ..Params::default()
    };
    let mut p = Pair::new(0x5eed, link, params);
    let (a, b) = (p.side('a'), p.side('b'));
    let trace = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    if std::env::var_os("ROCEX_TRACE").is_some() {
        let t = trace.clone();
        p.fabric.intercept(move |from, _to, bytes| {
            let (pkt, _) = rocex_wire::PacketRepr::parse(bytes).unwrap();
            t.borrow_mut().push(format!("{from} {}", pkt));
            true
        });
    }
    // B: receive slots at 4 MiB + slot * SLOT; READ sources and the atomic counter below.
    let recv_base = 4 << 20;
    for i in 0..512u64 {
        p.post_recv(&b, i, recv_base + (i % SLOTS) * SLOT, SLOT as u32);
    }
    let mut next_recv = 512u64;
    let counter_at = 3 << 20;
    let read_src: Vec<u8> = pattern(77, SLOT as usize);
    write_bytes(&b, 2 << 20, &read_src);

    let mut posted = 0u64;
    let mut outstanding: VecDeque<u64> = VecDeque::new();
    let mut sender_done = 0u64;
    let mut expect_recv: VecDeque<u64> = VecDeque::new();
    let mut received = 0u64;
    let mut fetch_origs = Vec::new();
    let deadline = p.now() + Duration::from_secs(600);
    while sender_done < MESSAGES {
        while posted < MESSAGES && outstanding.len() < WINDOW {
            let i = posted;
            let len = len_of(i);
            let slot = (i % SLOTS) * SLOT;
            let (op, sges) = match i % 4 {
                0 => {
                    write_bytes(&a, slot, &pattern(i, len));
                    expect_recv.push_back(i);
                    (
                        SendOp::SendWithImm(i as u32),
                        vec![sge(&a, slot, len as u32)],
                    )
                }
                1 => {
                    write_bytes(&a, slot, &pattern(i, len));
                    expect_recv.push_back(i);
                    (
                        SendOp::WriteWithImm(remote(&b, (1 << 20) + (i % 64) * SLOT), i as u32),
                        vec![sge(&a, slot, len as u32)],
                    )
                }
                2 => (
                    SendOp::Read(remote(&b, 2 << 20)),
                    vec![sge(&a, slot, len as u32)],
                ),
                _ => (
                    SendOp::FetchAdd {
                        remote: remote(&b, counter_at),
                        add: 1,
                    },
                    vec![sge(&a, slot, 8)],
                ),
            };
            p.post_send(&a, wr(i, op, sges));
            outstanding.push_back(i);
            posted += 1;
        }
        assert!(
            p.now() < deadline,
            "stalled at {sender_done} of {MESSAGES}: {:?}",
            p.fabric.node(a.node).counters()
        );
        p.fabric.step();
        while let Some(wc) = p.fabric.node(a.node).poll_cq(a.cq) {
            let i = outstanding
                .pop_front()
                .expect("a completion for a posted request");
            assert_eq!(
                (wc.wr_id, wc.status),
                (i, WcStatus::Success),
                "sender, in order"
            );
            let slot = (i % SLOTS) * SLOT;
            match i % 4 {
                2 => assert!(
                    read_bytes(&a, slot, len_of(i)) == read_src[..len_of(i)],
                    "READ {i} data"
                ),
                3 => fetch_origs.push(u64::from_ne_bytes(
                    read_bytes(&a, slot, 8).try_into().unwrap(),
                )),
                _ => {}
            }
            sender_done += 1;
        }
        while let Some(wc) = p.fabric.node(b.node).poll_cq(b.cq) {
            let i = expect_recv
                .pop_front()
                .expect("a receive for a sent message");
            if wc.imm_data != Some(i as u32) {
                for l in trace.borrow().iter().rev().take(300).rev() {
                    eprintln!("{l}");
                }
            }
            assert_eq!(wc.status, WcStatus::Success);
            assert_eq!(wc.imm_data, Some(i as u32), "receiver, in order, once");
            let len = len_of(i);
            assert_eq!(wc.byte_len as usize, len);
            let data = if i % 4 == 0 {
                assert_eq!(wc.opcode, WcOpcode::Recv);
                read_bytes(&b, recv_base + (wc.wr_id % SLOTS) * SLOT, len)
            } else {
                assert_eq!(wc.opcode, WcOpcode::RecvRdmaWithImm);
                read_bytes(&b, (1 << 20) + (i % 64) * SLOT, len)
            };
            assert_eq!(
                crc32fast::hash(&data),
                crc32fast::hash(&pattern(i, len)),
                "message {i} bytes"
            );
            received += 1;
            p.post_recv(
                &b,
                next_recv,
                recv_base + (next_recv % SLOTS) * SLOT,
                SLOT as u32,
            );
            next_recv += 1;
        }
    }
    p.settle(Duration::from_millis(50));
    assert_eq!(received, MESSAGES / 2);
    assert!(expect_recv.is_empty());
    let counter = u64::from_ne_bytes(read_bytes(&b, counter_at, 8).try_into().unwrap());
    assert_eq!(
        counter,
        MESSAGES / 4,
        "every FETCH_ADD applied exactly once"
    );
    fetch_origs.sort_unstable();
    assert_eq!(
        fetch_origs,
        (0..MESSAGES / 4).collect::<Vec<_>>(),
        "each FETCH_ADD saw a distinct value"
    );
    let (ca, cb) = (
        p.fabric.node(a.node).counters().clone(),
        p.fabric.node(b.node).counters().clone(),
    );
    let stats = p.fabric.stats;
    eprintln!(
        "fabric {stats:?}\nretransmitted A={} B={}, retries A={}, duplicate requests at B={}, icrc drops A={} B={}, virtual time {:?}",
        ca.retransmitted_pkts,
        cb.retransmitted_pkts,
        ca.completer_retry_err,
        cb.duplicate_request,
        ca.drop_icrc,
        cb.drop_icrc,
        p.now()
    );
    assert!(
        stats.lost > 1000 && stats.duplicated > 500 && stats.corrupted > 50,
        "the link did impair: {stats:?}"
    );
    assert!(ca.retransmitted_pkts > 0 && cb.duplicate_request > 0);
    // Every corrupted packet that arrived was dropped by its ICRC (the data checks above
    // would catch one that was not).
    assert!(ca.drop_icrc + cb.drop_icrc > 0);
}
