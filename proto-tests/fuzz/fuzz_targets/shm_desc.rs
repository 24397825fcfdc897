//! SQ and RQ slots written by a hostile client, read as rocexd reads them: arbitrary bytes
//! go into the shared rings (a selector byte, then one slot per tag byte: even for the SQ,
//! odd for the RQ), the daemon's readers validate each descriptor, and what passes is
//! posted to an engine QP in RTS whose PD holds two MRs beside a third MR in another PD
//! (lkeys 0x11, 0x22 and 0x33: keys a fuzzer can find), then run until the engine is idle.
//! Nothing may panic; every descriptor that passes re-encodes to the same request.
#![no_main]

use std::net::IpAddr;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use rocex_proto::verbs::{AddressVector, AttrMask, Mtu, QpAttr, QpCap, QpType};
use rocex_proto::{Access, Config, Engine, Instant, Keys, QpInit, VecRegion};
use rocex_shm::validate::{RqLimits, RqReader, SqLimits, SqReader, validate_send};
use rocex_shm::{HeapMem, Ring, RingKind, RingSpec, encode_send};

const SQ_SLOT: u32 = 256;
const RQ_SLOT: u32 = 64;
const SLOTS: u32 = 8;

/// An engine with the key table and one QP of `qp_type` in RTS towards 198.18.0.2.
fn engine(qp_type: QpType) -> (Engine, u32, u32) {
    let local: IpAddr = [198, 18, 0, 1].into();
    let mut e = Engine::new(Config::new(local, [3; 32]));
    let (pd, other) = (e.alloc_pd(), e.alloc_pd());
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    for (pd, iova, len, access, key) in [
        (pd, 0x1000, 4096, all, 0x11),
        (pd, 0x10_0000, 65536, Access::LOCAL_WRITE, 0x22),
        (other, 0x1000, 4096, all, 0x33),
    ] {
        let keys = Keys { lkey: key, rkey: key << 8 };
        e.reg_mr_with_keys(pd, iova, len, access, Arc::new(VecRegion::new(len as usize)), keys)
            .unwrap();
    }
    let cq = e.create_cq(256).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 8, max_recv_sge: 3, max_inline_data: 128 };
    let qpn = e.create_qp(QpInit { qp_type, pd, send_cq: cq, recv_cq: cq, cap }).unwrap();
    let a = QpAttr {
        qp_access_flags: all,
        qkey: 0x1111,
        ah_attr: Some(AddressVector { dest: [198, 18, 0, 2].into() }),
        path_mtu: Mtu::M1024,
        dest_qp_num: 0x11,
        max_dest_rd_atomic: 4,
        max_rd_atomic: 4,
        timeout: 1,
        retry_cnt: 1,
        rnr_retry: 1,
        ..QpAttr::default()
    };
    // RC's masks are `rc_steps`'; UC's leave out the RC-only attributes, UD's the peer.
    let steps = a.rc_steps();
    let base = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT;
    let conn = AttrMask::AV | AttrMask::PATH_MTU | AttrMask::DEST_QPN | AttrMask::RQ_PSN;
    let masks = match qp_type {
        QpType::Rc => steps.map(|(_, mask)| mask),
        QpType::Uc => [base | AttrMask::ACCESS_FLAGS, AttrMask::STATE | conn, AttrMask::STATE | AttrMask::SQ_PSN],
        QpType::Ud => [base | AttrMask::QKEY, AttrMask::STATE, AttrMask::STATE | AttrMask::SQ_PSN],
    };
    for ((attr, _), mask) in steps.into_iter().zip(masks) {
        e.modify_qp(qpn, &attr, mask).unwrap();
    }
    (e, qpn, cq)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else { return };
    let qp_type = [QpType::Rc, QpType::Uc, QpType::Ud][usize::from(sel % 3)];
    let sq_limits = SqLimits {
        qp_type,
        max_sge: u32::from(sel >> 2 & 7) + 1,
        max_inline: [0, 64, 128, 4096][usize::from(sel >> 5 & 3)],
    };
    let rq_limits = RqLimits { max_sge: u32::from(sel >> 7) * 2 + 1 };
    let sq_spec = RingSpec::new(RingKind::Sq, SLOTS, SQ_SLOT).unwrap();
    let rq_spec = RingSpec::new(RingKind::Rq, SLOTS, RQ_SLOT).unwrap();
    let (sq_mem, rq_mem) = (HeapMem::new(sq_spec.bytes()), HeapMem::new(rq_spec.bytes()));
    let (sq, rq) = (Ring::new(sq_mem.view(), sq_spec).unwrap(), Ring::new(rq_mem.view(), rq_spec).unwrap());
    let (mut sq_p, mut rq_p) = (sq.producer(), rq.producer());
    while let Some((&tag, tail)) = rest.split_first() {
        let (p, size) = if tag % 2 == 0 { (&mut sq_p, SQ_SLOT) } else { (&mut rq_p, RQ_SLOT) };
        let n = tail.len().min(size as usize);
        let mut slot = tail[..n].to_vec();
        slot.resize(slot.len().next_multiple_of(4), 0);
        rest = &tail[n..];
        if p.push(&slot).is_err() {
            break;
        }
    }
    // Nothing sleeps on these rings: whether a consumer wants a wakeup does not matter.
    let _ = sq_p.publish();
    let _ = rq_p.publish();

    let (mut e, qpn, cq) = engine(qp_type);
    let mut now = Instant::ZERO;
    let mut rqr = RqReader::new(rq.consumer(), rq_limits);
    while let Ok(Some(wr)) = rqr.read_recv() {
        let _ = e.post_recv(now, qpn, wr);
    }
    let mut sqr = SqReader::new(sq.consumer(), sq_limits);
    let mut slot = vec![0u8; SQ_SLOT as usize];
    loop {
        match sqr.read_send() {
            Ok(Some(wr)) => {
                slot.fill(0);
                encode_send(&wr, &mut slot).expect("a validated request fits its slot");
                let again = validate_send(&slot, &sq_limits).expect("a re-encoded request validates");
                assert_eq!(again, wr);
                let _ = e.post_send(now, qpn, wr);
            }
            Ok(None) => break,
            Err(rocex_shm::ReadError::Desc { .. }) => {}
            Err(_) => break,
        }
    }
    let mut buf = vec![0u8; 9000];
    for _ in 0..64 {
        now = now + core::time::Duration::from_millis(10);
        e.handle_timeout(now);
        while e.poll_transmit(now, &mut buf).is_some() {}
        while e.poll_cq(cq).is_some() {}
    }
});
