//! The responder against memory that misbehaves or asks for more than a range: a READ
//! whose memory vanishes before its responses go out, FLUSH of a whole region (with and
//! without the rights it needs, onto a file that must then hold the bytes), zero-length
//! ranges. Each answer is rxe's (docs/rxe-behaviour.md, items 7, 8, 13 and 14), never
//! made-up data or success.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rocex_mem::{AccessFault, FlushError};
use rocex_proto::verbs::{AddressVector, Mtu, QpAttr, QpCap, QpState, RecvWr, Sge, WcStatus};
use rocex_proto::{Access, Config, Engine, Instant, Keys, Region, VecRegion};
use rocex_wire::feth::{PLT_GLOBAL_VISIBILITY, PLT_PERSISTENCE, SEL_MEMORY_REGION};
use rocex_wire::{
    BthRepr, FethRepr, IethRepr, NakCode, Opcode, PacketRepr, Psn, RethRepr, Syndrome,
};

mod common;
use common::{LOCAL, inject, peer, rc_qp};

const PEER_QPN: u32 = 0x11;
const PSN0: u32 = 0x2000;
const IOVA: u64 = 0x40_0000;
const LEN: u64 = 8192;

/// A region whose memory can be taken away, as a client that unmaps its buffer does.
#[derive(Debug)]
struct Vanishing {
    bytes: VecRegion,
    gone: AtomicBool,
}

impl Vanishing {
    fn fault(&self, offset: u64, len: usize) -> Result<(), AccessFault> {
        if self.gone.load(Ordering::Relaxed) {
            Err(AccessFault {
                offset,
                len: len as u64,
                kind: ErrorKind::NotFound,
            })
        } else {
            Ok(())
        }
    }
}

impl Region for Vanishing {
    fn len(&self) -> u64 {
        self.bytes.len()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) {
        self.bytes.read(offset, buf);
    }
    fn write(&self, offset: u64, data: &[u8]) {
        self.bytes.write(offset, data);
    }
    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.bytes.compare_swap(offset, compare, swap)
    }
    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.bytes.fetch_add(offset, add)
    }
    fn atomic_write(&self, offset: u64, value: u64) {
        self.bytes.atomic_write(offset, value);
    }
    fn flush(&self, offset: u64, len: u64, persistent: bool) -> Result<(), FlushError> {
        self.bytes.flush(offset, len, persistent)
    }
    fn try_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), AccessFault> {
        self.fault(offset, buf.len())?;
        self.bytes.read(offset, buf);
        Ok(())
    }
}

/// A region over a file: persistent, and a flush is `fsync` of the file's data.
#[derive(Debug)]
struct FileBacked {
    file: File,
    len: u64,
    /// Every flush asked of the region: offset, length, persistent.
    flushes: Mutex<Vec<(u64, u64, bool)>>,
    atomics: Mutex<()>,
}

impl FileBacked {
    fn update(&self, offset: u64, f: impl FnOnce(u64) -> u64) -> u64 {
        let _one_at_a_time = self.atomics.lock().unwrap();
        let mut b = [0u8; 8];
        self.read(offset, &mut b);
        let old = u64::from_ne_bytes(b);
        self.write(offset, &f(old).to_ne_bytes());
        old
    }
}

impl Region for FileBacked {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, offset: u64, buf: &mut [u8]) {
        self.file.read_exact_at(buf, offset).unwrap();
    }
    fn write(&self, offset: u64, data: &[u8]) {
        self.file.write_all_at(data, offset).unwrap();
    }
    fn compare_swap(&self, offset: u64, compare: u64, swap: u64) -> u64 {
        self.update(offset, |old| if old == compare { swap } else { old })
    }
    fn fetch_add(&self, offset: u64, add: u64) -> u64 {
        self.update(offset, |old| old.wrapping_add(add))
    }
    fn atomic_write(&self, offset: u64, value: u64) {
        self.update(offset, |_| value);
    }
    fn flush(&self, offset: u64, len: u64, persistent: bool) -> Result<(), FlushError> {
        self.flushes.lock().unwrap().push((offset, len, persistent));
        if persistent {
            self.file
                .sync_data()
                .map_err(|e| FlushError::Io(e.kind()))?;
        }
        Ok(())
    }
    fn persistent(&self) -> bool {
        true
    }
}

/// A packet the responder sent: opcode, PSN, AETH (syndrome, MSN), payload.
type Answer = (Opcode, u32, Option<(Syndrome, u32)>, Vec<u8>);
/// The same without the payload.
type Head = (Opcode, u32, Option<(Syndrome, u32)>);

/// One responder QP (RC, MTU 1024) and the peer the test plays.
struct Resp {
    e: Engine,
    qpn: u32,
    cq: u32,
    pd: rocex_proto::PdId,
    psn: u32,
}

impl Resp {
    fn new() -> Self {
        let mut e = Engine::new(Config::new(LOCAL.into(), [3; 32]));
        let pd = e.alloc_pd();
        let cq = e.create_cq(64).unwrap();
        let qpn = rc_qp(&mut e, pd, cq, QpCap::default());
        let attr = QpAttr {
            qp_access_flags: Access::REMOTE,
            ah_attr: Some(AddressVector { dest: peer().ip() }),
            path_mtu: Mtu::M1024,
            dest_qp_num: PEER_QPN,
            rq_psn: PSN0,
            max_dest_rd_atomic: 4,
            ..QpAttr::default()
        };
        // To RTR: a responder only.
        for (a, mask) in &attr.rc_steps()[..2] {
            e.modify_qp(qpn, a, *mask).unwrap();
        }
        Self {
            e,
            qpn,
            cq,
            pd,
            psn: PSN0,
        }
    }

    fn reg(&mut self, access: Access, region: Arc<dyn Region>) -> Keys {
        let len = region.len();
        self.e.reg_mr(self.pd, IOVA, len, access, region).unwrap()
    }

    /// Sends one request packet with the next PSN.
    fn request(&mut self, op: Opcode, reth: RethRepr, feth: Option<FethRepr>, payload: &[u8]) {
        let mut p = PacketRepr::new(BthRepr::new(op, self.qpn, Psn::new(self.psn)));
        p.reth = Some(reth);
        p.feth = feth;
        p.payload = payload;
        self.send(p);
    }

    /// A READ of `len` bytes at `va` under `rkey`.
    fn read(&mut self, va: u64, rkey: u32, len: u32) {
        let reth = RethRepr {
            va,
            rkey,
            dma_len: len,
        };
        self.request(Opcode::RC_RDMA_READ_REQUEST, reth, None, &[]);
    }

    /// A WRITE_ONLY of `data` to `va` under `rkey`.
    fn write(&mut self, va: u64, rkey: u32, data: &[u8]) {
        let reth = RethRepr {
            va,
            rkey,
            dma_len: data.len() as u32,
        };
        self.request(Opcode::RC_RDMA_WRITE_ONLY, reth, None, data);
    }

    /// A SEND_ONLY_WITH_INVALIDATE naming `rkey`, into a receive posted for it.
    fn send_inv(&mut self, rkey: u32, lkey: u32) {
        let sge = Sge {
            addr: IOVA + 4096,
            length: 512,
            lkey,
        };
        let wr = RecvWr::new(7, [sge]);
        self.e.post_recv(Instant::ZERO, self.qpn, wr).unwrap();
        let op = Opcode::RC_SEND_ONLY_WITH_INVALIDATE;
        let mut p = PacketRepr::new(BthRepr::new(op, self.qpn, Psn::new(self.psn)));
        p.ieth = Some(IethRepr { rkey });
        p.payload = &[0x5a; 16];
        self.send(p);
    }

    fn send(&mut self, mut p: PacketRepr<'_>) {
        p.bth.ack_req = true;
        inject(&mut self.e, Instant::ZERO, p);
        self.psn += 1;
    }

    fn flush(&mut self, rkey: u32, placement: u8, selectivity: u8, va: u64, len: u32) {
        let feth = FethRepr {
            placement,
            selectivity,
            reserved: 0,
        };
        let reth = RethRepr {
            va,
            rkey,
            dma_len: len,
        };
        self.request(Opcode::RC_FLUSH, reth, Some(feth), &[]);
    }

    /// The next packet the engine sends.
    fn next(&mut self) -> Option<Answer> {
        let mut buf = [0u8; 2048];
        let t = self.e.poll_transmit(Instant::ZERO, &mut buf)?;
        let (p, _) = PacketRepr::parse(&buf[..t.len]).unwrap();
        let aeth = p.aeth.map(|a| (a.syndrome, a.msn));
        Some((p.opcode(), p.bth.psn.value(), aeth, p.payload.to_vec()))
    }

    /// The next packet the engine sends, without its payload.
    fn next_head(&mut self) -> Option<Head> {
        self.next().map(|(op, psn, aeth, _)| (op, psn, aeth))
    }

    fn state(&self) -> QpState {
        self.e.query_qp(self.qpn).unwrap().0.qp_state
    }

    /// The next packet is a NAK for an rkey violation at `psn` with `msn`, and the QP is
    /// in error.
    #[track_caller]
    fn assert_nak_access(&mut self, psn: u32, msn: u32) {
        let nak = (Opcode::RC_ACKNOWLEDGE, psn, Some((NAK_ACCESS, msn)));
        assert_eq!(self.next_head(), Some(nak));
        assert_eq!(self.state(), QpState::Err);
    }
}

const NAK_ACCESS: Syndrome = Syndrome::Nak(NakCode::RemoteAccessError);

fn vanishing() -> Arc<Vanishing> {
    let bytes: Vec<u8> = (0..LEN).map(|i| (i * 7 + 0x11) as u8).collect();
    Arc::new(Vanishing {
        bytes: VecRegion::from_bytes(bytes),
        gone: AtomicBool::new(false),
    })
}

#[test]
fn a_read_whose_memory_vanishes_mid_response_ends_in_nak_remote_access() {
    let mut r = Resp::new();
    let mem = vanishing();
    let keys = r.reg(Access::LOCAL_WRITE | Access::REMOTE_READ, mem.clone());
    r.read(IOVA, keys.rkey, 3000);
    let (op, psn, aeth, data) = r.next().unwrap();
    assert_eq!(
        (op, psn, aeth),
        (
            Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            PSN0,
            Some((Syndrome::ACK, 1))
        )
    );
    assert_eq!(data[..4], [0x11, 0x18, 0x1f, 0x26]);
    mem.gone.store(true, Ordering::Relaxed);
    // rxe `read_reply`: the failed copy is an rkey violation, NAKed with the READ's PSN
    // and the MSN the READ already advanced; no zeros go out as data.
    r.assert_nak_access(PSN0, 1);
    assert!(r.next().is_none());
    assert_eq!(r.e.counters().nak_remote_access, 1);
}

#[test]
fn a_read_whose_memory_vanishes_before_its_only_response_sends_no_data() {
    let mut r = Resp::new();
    let mem = vanishing();
    let keys = r.reg(Access::LOCAL_WRITE | Access::REMOTE_READ, mem.clone());
    r.read(IOVA + 8, keys.rkey, 64);
    // A WRITE behind the READ is not answered: rxe finishes the READ first.
    r.write(IOVA, 0xdead_beef, &[]);
    mem.gone.store(true, Ordering::Relaxed);
    r.assert_nak_access(PSN0, 1);
    assert!(r.next().is_none());
}

#[test]
fn a_zero_byte_write_needs_no_valid_rkey() {
    let mut r = Resp::new();
    r.write(u64::MAX, 0xdead_beef, &[]);
    assert_eq!(
        r.next_head(),
        Some((Opcode::RC_ACKNOWLEDGE, PSN0, Some((Syndrome::ACK, 1))))
    );
}

#[test]
fn a_whole_region_flush_checks_the_rkey_rights_first() {
    // rxe `check_rkey`: the MR lookup checks the access the placement type needs, and
    // only then is the range check skipped for a whole-region FLUSH.
    let mut r = Resp::new();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::FLUSH_GLOBAL;
    let keys = r.reg(access, Arc::new(VecRegion::new(LEN as usize)));
    r.flush(keys.rkey, PLT_PERSISTENCE, SEL_MEMORY_REGION, 0, 0);
    r.assert_nak_access(PSN0, 0);
}

#[test]
fn whole_region_and_zero_length_flushes_check_the_rkey() {
    const RANGE: u8 = 0;
    let plain = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let global = plain | Access::FLUSH_GLOBAL;
    // MR rights, whether the rkey is the MR's, selectivity, address; all zero-length.
    let refused = [
        (global, false, SEL_MEMORY_REGION, 0),
        (global, false, RANGE, IOVA),
        (plain, true, SEL_MEMORY_REGION, 0),
        (plain, true, RANGE, IOVA),
        (global, true, RANGE, IOVA + LEN + 1),
    ];
    let accepted = [
        (global, true, SEL_MEMORY_REGION, 0),
        (global, true, RANGE, IOVA + LEN),
    ];
    for (i, (access, valid, selectivity, va)) in refused.into_iter().chain(accepted).enumerate() {
        let mut r = Resp::new();
        let keys = r.reg(access, Arc::new(VecRegion::new(LEN as usize)));
        let rkey = if valid {
            keys.rkey
        } else {
            keys.rkey ^ 0x00ff_ff00
        };
        r.flush(rkey, PLT_GLOBAL_VISIBILITY, selectivity, va, 0);
        let want = if i < refused.len() {
            (Opcode::RC_ACKNOWLEDGE, PSN0, Some((NAK_ACCESS, 0)))
        } else {
            (
                Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                PSN0,
                Some((Syndrome::ACK, 1)),
            )
        };
        let got = r.next_head();
        assert_eq!(got, Some(want), "case {i}");
    }
}

/// A file in the target directory, removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_whole_region_flush_makes_a_file_backed_region_durable() {
    let path = TempFile(std::env::temp_dir().join(format!(
        "rocex-flush-{}-{:?}.bin",
        std::process::id(),
        std::thread::current().id()
    )));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path.0)
        .unwrap();
    file.set_len(LEN).unwrap();
    let region = Arc::new(FileBacked {
        file,
        len: LEN,
        flushes: Mutex::new(Vec::new()),
        atomics: Mutex::new(()),
    });
    let mut r = Resp::new();
    let access = Access::LOCAL_WRITE
        | Access::REMOTE_WRITE
        | Access::FLUSH_GLOBAL
        | Access::FLUSH_PERSISTENT;
    let keys = r.reg(access, region.clone());
    let data: Vec<u8> = (0..600u32).map(|i| (i * 13 + 0x22) as u8).collect();
    r.write(IOVA + 4000, keys.rkey, &data);
    r.flush(keys.rkey, PLT_PERSISTENCE, SEL_MEMORY_REGION, 0, 0);
    let answers: Vec<_> = std::iter::from_fn(|| r.next_head()).collect();
    assert_eq!(
        answers,
        [
            (Opcode::RC_ACKNOWLEDGE, PSN0, Some((Syndrome::ACK, 1))),
            (
                Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                PSN0 + 1,
                Some((Syndrome::ACK, 2))
            )
        ]
    );
    // The whole region was made persistent, and the file holds the bytes.
    assert_eq!(*region.flushes.lock().unwrap(), [(0, LEN, true)]);
    let mut back = vec![0u8; 600];
    File::open(&path.0)
        .unwrap()
        .read_exact_at(&mut back, 4000)
        .unwrap();
    assert_eq!(back, data);
}

#[test]
fn a_duplicate_read_whose_key_is_gone_is_a_remote_access_error() {
    // rxe `rxe_recheck_mr`: a READ replayed for a duplicate looks its rkey up again; a key
    // deregistered since is an rkey violation (NAK 0x62), not a silent drop.
    let mut r = Resp::new();
    let keys = r.reg(
        Access::LOCAL_WRITE | Access::REMOTE_READ,
        Arc::new(VecRegion::new(LEN as usize)),
    );
    r.read(IOVA, keys.rkey, 100);
    assert_eq!(r.next().unwrap().0, Opcode::RC_RDMA_READ_RESPONSE_ONLY);
    r.e.dereg_mr(keys.lkey).unwrap();
    r.psn = PSN0;
    r.read(IOVA, keys.rkey, 100);
    r.assert_nak_access(PSN0, 1);
}

#[test]
fn send_with_invalidate_frees_a_window_and_errs_on_a_region() {
    // rxe `invalidate_rkey`: a window's rkey is invalidated, the message acknowledged with
    // the MSN advanced, and the rkey refused afterwards; a region's rkey cannot be, and the
    // message is still acknowledged, its MSN not counted, the QP then in error
    // (docs/rxe-behaviour.md, items 10 and 11).
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::MW_BIND;
    let mut r = Resp::new();
    let keys = r.reg(access, Arc::new(VecRegion::new(LEN as usize)));
    let mw = r.e.alloc_mw(r.pd).unwrap();
    let w =
        r.e.bind_mw(r.pd, mw, keys.lkey, IOVA, 256, Access::REMOTE_WRITE)
            .unwrap();
    r.send_inv(w, keys.lkey);
    assert_eq!(r.next().unwrap().2, Some((Syndrome::ACK, 1)));
    let wc = r.e.poll_cq(r.cq).unwrap();
    assert_eq!(
        (wc.status, wc.byte_len, wc.invalidated_rkey),
        (WcStatus::Success, 16, Some(w))
    );
    r.write(IOVA, w, &[1; 8]);
    r.assert_nak_access(PSN0 + 1, 1);

    let mut r = Resp::new();
    let keys = r.reg(access, Arc::new(VecRegion::new(LEN as usize)));
    r.send_inv(keys.rkey, keys.lkey);
    assert_eq!(
        r.next_head(),
        Some((Opcode::RC_ACKNOWLEDGE, PSN0, Some((Syndrome::ACK, 0))))
    );
    assert_eq!(r.e.poll_cq(r.cq).unwrap().status, WcStatus::RemInvReqErr);
    assert_eq!(r.state(), QpState::Err);
}
