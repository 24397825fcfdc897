//! Unit tests: layout, ring arithmetic, validation errors, memfd mapping, threads, a hostile
//! writer and a second process, a file each; the work requests and slots they share here.

mod descriptors;
mod hostile;
mod layout;
mod os;
mod ring;

use crate::desc::{family, opcode, send_flags};
use crate::layout::ring_off;
use crate::validate::{Payload, check_send_header, validate_send};
use crate::*;
use core::mem::size_of;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use rocex_verbs_types::{
    QpType, RecvWr, Remote, SendData, SendFlags, SendOp, SendWr, Sge, UdDest, WcOpcode, WcStatus,
    WorkCompletion,
};
use zerocopy::{FromZeros, IntoBytes};

const RC: SqLimits = SqLimits {
    qp_type: QpType::Rc,
    max_sge: 4,
    max_inline: 64,
};

fn sq_spec(slots: u32) -> RingSpec {
    RingSpec::new(RingKind::Sq, slots, 256).unwrap()
}

fn sge(i: u64) -> Sge {
    Sge {
        addr: 0x1000 * i,
        length: 8,
        lkey: i as u32 + 7,
    }
}

fn every_op() -> Vec<SendWr> {
    let r = Remote {
        addr: 0x8000,
        rkey: 0x1234,
    };
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm(5),
        SendOp::SendWithInv(6),
        SendOp::Write(r),
        SendOp::WriteWithImm(r, 9),
        SendOp::Read(r),
        SendOp::CompareSwap {
            remote: r,
            compare: 1,
            swap: 2,
        },
        SendOp::FetchAdd { remote: r, add: 3 },
        SendOp::AtomicWrite {
            remote: r,
            value: 4,
        },
        SendOp::Flush {
            remote: r,
            len: 100,
            placement: 1,
            selectivity: 0,
        },
    ];
    ops.iter()
        .enumerate()
        .map(|(i, &op)| {
            let n = if matches!(op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }) {
                1
            } else {
                (i % 5) as u64
            };
            let mut wr = SendWr::new(i as u64, op, (0..n).map(sge));
            wr.flags.fence = i % 2 == 0;
            wr.flags.solicited = i % 3 == 0;
            wr
        })
        .collect()
}

fn slot_of(wr: &SendWr) -> Vec<u8> {
    let mut slot = vec![0u8; 256];
    encode_send(wr, &mut slot).unwrap();
    slot
}

fn desc_of(wr: &SendWr) -> (SendDesc, Vec<u8>) {
    let slot = slot_of(wr);
    let d = zerocopy::FromBytes::read_from_prefix(&slot[..]).unwrap().0;
    (d, slot)
}

fn err_of(slot: &[u8], limits: &SqLimits) -> DescError {
    match validate_send(slot, limits) {
        Err(ReadError::Desc { error, .. }) => error,
        other => panic!("expected a descriptor error, got {other:?}"),
    }
}

fn with(d: &SendDesc, slot: &[u8], f: impl FnOnce(&mut SendDesc)) -> Vec<u8> {
    let mut d = *d;
    f(&mut d);
    let mut s = slot.to_vec();
    s[..size_of::<SendDesc>()].copy_from_slice(d.as_bytes());
    s
}
