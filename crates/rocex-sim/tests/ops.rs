//! Every RC operation at several MTUs and sizes, on a perfect link and across a PSN wrap.

mod common;

use std::time::Duration;

use common::*;
use rocex_proto::Access;
use rocex_proto::verbs::{Mtu, QpState, SendOp, WcOpcode, WcStatus};
use rocex_sim::Link;

const SIZES: [usize; 8] = [0, 1, 255, 256, 257, 1000, 4097, 65536];

fn pair(mtu: Mtu, psn: u32) -> Pair {
    let p = Params {
        mtu,
        psn_a: psn,
        psn_b: psn ^ 0x5555,
        ..Params::default()
    };
    Pair::new(1, Link::with_delay(Duration::from_micros(5)), p)
}

/// Runs `case` on a fresh pair (its PSNs from `psn`) and its sides a and b, for every MTU
/// and every size in `SIZES`.
fn every_mtu_and_size(psn: u32, case: impl Fn(&mut Pair, (Side, Side), Mtu, usize)) {
    for mtu in [Mtu::M256, Mtu::M1024, Mtu::M4096] {
        for len in SIZES {
            let mut p = pair(mtu, psn);
            let sides = (p.side('a'), p.side('b'));
            case(&mut p, sides, mtu, len);
        }
    }
}

#[test]
fn write_every_size_and_mtu() {
    every_mtu_and_size(100, |p, (a, b), mtu, len| {
        let data = pattern(len as u64, len);
        write_bytes(&a, 0, &data);
        p.post(&a, 7, SendOp::Write(remote(&b, 4096)), 0, len as u32);
        let wcs = p.completions(&a, 1, Duration::from_secs(1));
        assert_eq!(wcs.len(), 1, "WRITE {len} at {mtu:?}");
        assert_eq!(
            (wcs[0].wr_id, wcs[0].status, wcs[0].opcode),
            (7, WcStatus::Success, WcOpcode::RdmaWrite)
        );
        assert_eq!(read_bytes(&b, 4096, len), data, "WRITE {len} at {mtu:?}");
    });
}

#[test]
fn send_every_size_and_mtu() {
    every_mtu_and_size(0xff_fff0, |p, (a, b), _, len| {
        let data = pattern(len as u64 + 1, len);
        write_bytes(&a, 0, &data);
        p.post_recv(&b, 42, 8192, 1 << 17);
        p.post(&a, 9, SendOp::SendWithImm(0xabcd), 0, len as u32);
        let sent = p.completions(&a, 1, Duration::from_secs(1));
        assert_ok(&sent);
        let got = p.completions(&b, 1, Duration::from_secs(1));
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].wr_id, got[0].status, got[0].opcode),
            (42, WcStatus::Success, WcOpcode::Recv)
        );
        assert_eq!(
            (got[0].byte_len as usize, got[0].imm_data),
            (len, Some(0xabcd))
        );
        assert_eq!(read_bytes(&b, 8192, len), data);
    });
}

#[test]
fn read_every_size_and_mtu() {
    every_mtu_and_size(0xff_ffff, |p, (a, b), mtu, len| {
        let data = pattern(len as u64 + 2, len);
        write_bytes(&b, 100, &data);
        p.post(&a, 3, SendOp::Read(remote(&b, 100)), 0, len as u32);
        let wcs = p.completions(&a, 1, Duration::from_secs(1));
        assert_eq!(wcs.len(), 1, "READ {len} at {mtu:?}");
        assert_eq!(
            (wcs[0].status, wcs[0].opcode, wcs[0].byte_len as usize),
            (WcStatus::Success, WcOpcode::RdmaRead, len)
        );
        assert_eq!(read_bytes(&a, 0, len), data, "READ {len} at {mtu:?}");
    });
}

#[test]
fn write_with_immediate_consumes_a_receive() {
    let mut p = pair(Mtu::M1024, 7);
    let (a, b) = (p.side('a'), p.side('b'));
    write_bytes(&a, 0, &pattern(5, 3000));
    p.post_recv(&b, 1, 0, 16);
    let op = SendOp::WriteWithImm(remote(&b, 1000), 0x1234_5678);
    p.post(&a, 2, op, 0, 3000);
    assert_ok(&p.completions(&a, 1, Duration::from_secs(1)));
    let got = p.completions(&b, 1, Duration::from_secs(1));
    assert_eq!(
        (got[0].opcode, got[0].imm_data, got[0].byte_len),
        (WcOpcode::RecvRdmaWithImm, Some(0x1234_5678), 3000)
    );
    assert_eq!(read_bytes(&b, 1000, 3000), pattern(5, 3000));
}

#[test]
fn atomics_return_the_original_and_apply_once() {
    let mut p = pair(Mtu::M1024, 1);
    let (a, b) = (p.side('a'), p.side('b'));
    write_bytes(&b, 64, &41u64.to_ne_bytes());
    let target = remote(&b, 64);
    let add = SendOp::FetchAdd {
        remote: target,
        add: 1,
    };
    let swap = |swap| SendOp::CompareSwap {
        remote: target,
        compare: 42,
        swap,
    };
    // Each returns the original into its own 8 bytes of a's buffer.
    for (id, op) in [(1, add), (2, swap(7)), (3, swap(9))] {
        p.post(&a, id, op, 8 * (id - 1), 8);
    }
    let wcs = p.completions(&a, 3, Duration::from_secs(1));
    assert_ok(&wcs);
    assert_eq!(
        wcs.iter().map(|w| w.opcode).collect::<Vec<_>>(),
        [WcOpcode::FetchAdd, WcOpcode::CompSwap, WcOpcode::CompSwap]
    );
    let orig = |off| u64::from_ne_bytes(read_bytes(&a, off, 8).try_into().unwrap());
    assert_eq!((orig(0), orig(8), orig(16)), (41, 42, 7));
    assert_eq!(
        u64::from_ne_bytes(read_bytes(&b, 64, 8).try_into().unwrap()),
        7
    );
}

/// Each side's QP allows FLUSH of both placement types; `mr` are its MR's rights.
fn flush_params(mr: Access) -> Params {
    Params {
        access: mr,
        qp_access: Params::default().qp_access | Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT,
        ..Params::default()
    }
}

fn flush(id: u64, to: &Side, len: u32, placement: u8) -> rocex_proto::verbs::SendWr {
    let op = SendOp::Flush {
        remote: remote(to, 0),
        len,
        placement,
        selectivity: 0,
    };
    wr(id, op, vec![])
}

#[test]
fn atomic_write_and_flush() {
    let params = flush_params(Params::default().access | Access::FLUSH_GLOBAL);
    let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(5)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    p.post_send(
        &a,
        wr(
            1,
            SendOp::AtomicWrite {
                remote: remote(&b, 128),
                value: 0x0102_0304_0506_0708,
            },
            vec![],
        ),
    );
    p.post_send(&a, flush(2, &b, 4096, 1));
    let wcs = p.completions(&a, 2, Duration::from_secs(1));
    assert_ok(&wcs);
    assert_eq!(
        (wcs[0].opcode, wcs[1].opcode),
        (WcOpcode::AtomicWrite, WcOpcode::Flush)
    );
    assert_eq!(
        u64::from_ne_bytes(read_bytes(&b, 128, 8).try_into().unwrap()),
        0x0102_0304_0506_0708
    );
}

#[test]
fn flush_without_the_access_right_is_a_remote_access_error() {
    // rxe: FLUSH to a QP that allows it, of a region registered without
    // IBV_ACCESS_FLUSH_GLOBAL, or with the persistent type on non-pmem memory, gets NAK
    // 0x62 and the responder QP errs.
    for placement in [1, 2] {
        let params = flush_params(Params::default().access);
        let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(5)), params);
        let (a, b) = (p.side('a'), p.side('b'));
        p.post_send(&a, flush(1, &b, 64, placement));
        let wcs = p.completions(&a, 1, Duration::from_secs(1));
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr);
        assert_eq!(p.qp_state(&b), QpState::Err);
    }
}

#[test]
fn flush_to_a_qp_without_its_flush_flag_is_an_invalid_request() {
    // rxe `check_qp_attr_access`: the QP's own flags are checked before the rkey's, so
    // a FLUSH whose placement type the QP does not allow gets NAK 0x61 (invalid request)
    // even where the MR would refuse it too, with the FLUSH's PSN and the MSN as it
    // stood; the responder QP errs.
    let mr = Params::default().access | Access::FLUSH_GLOBAL;
    for (qp_flush, placement) in [
        (Access::empty(), 1),
        (Access::FLUSH_PERSISTENT, 1),
        (Access::FLUSH_GLOBAL, 2),
        (Access::FLUSH_GLOBAL, 3),
    ] {
        let params = Params {
            access: mr,
            qp_access: Params::default().qp_access | qp_flush,
            ..Params::default()
        };
        let mut p = Pair::new(1, Link::with_delay(Duration::from_micros(5)), params);
        let (a, b) = (p.side('a'), p.side('b'));
        let answers = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let seen = answers.clone();
        p.fabric.intercept(move |from, _, bytes| {
            if from == b.node {
                let (pkt, _) = rocex_wire::PacketRepr::parse(bytes).unwrap();
                seen.borrow_mut()
                    .push((pkt.bth.psn.value(), pkt.aeth.map(|a| (a.syndrome, a.msn))));
            }
            true
        });
        write_bytes(&a, 0, &pattern(5, 64));
        p.post(&a, 1, SendOp::Write(remote(&b, 0)), 0, 64);
        p.post_send(&a, flush(2, &b, 64, placement));
        let wcs = p.completions(&a, 2, Duration::from_secs(1));
        let what = format!("QP {qp_flush}, placement {placement}");
        assert_eq!(
            (wcs[0].status, wcs[1].status),
            (WcStatus::Success, WcStatus::RemInvReqErr),
            "{what}"
        );
        assert_eq!(p.qp_state(&b), QpState::Err, "{what}");
        // The WRITE took the first PSN and one MSN.
        let flush_psn = params.psn_a + 1;
        let nak = rocex_wire::Syndrome::Nak(rocex_wire::NakCode::InvalidRequest);
        assert!(
            answers.borrow().contains(&(flush_psn, Some((nak, 1)))),
            "{what}: {:?}",
            answers.borrow()
        );
    }
}

#[test]
fn eight_mib_write() {
    let len = 8 << 20;
    let p = Params {
        mtu: Mtu::M4096,
        buf_len: len + 4096,
        ..Params::default()
    };
    let mut p = Pair::new(3, Link::with_delay(Duration::from_micros(5)), p);
    let (a, b) = (p.side('a'), p.side('b'));
    let data = pattern(8, len);
    write_bytes(&a, 0, &data);
    p.post(&a, 1, SendOp::Write(remote(&b, 0)), 0, len as u32);
    assert_ok(&p.completions(&a, 1, Duration::from_secs(10)));
    assert!(read_bytes(&b, 0, len) == data);
}
