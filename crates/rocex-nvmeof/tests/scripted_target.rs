//! The host's queue against a scripted NVMe-oF target on a second `rocexd` (127.0.11.1;
//! the host on 127.0.11.2): what the target's CM receives as the REQ's private data,
//! that keyed SGLs let the target RDMA READ a write's data and RDMA WRITE a read's, and
//! that every bad answer (a malformed or stray response, another queue's SQ ID, an error
//! status, silence, a reject with the binding's status, a shallow accept, a disconnect
//! while a command waits) is a typed error naming the queue, never a panic or a hang.
//! Needs no root.

mod common;

use std::net::IpAddr;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{Daemon, daemon, serial};
use rocex_nvmeof::wire::cm::CmReq;
use rocex_nvmeof::wire::sqe::opcode;
use rocex_nvmeof::wire::{KeyedSgl, Sqe};
use rocex_nvmeof::{Error, Queue, QueueConfig};
use rocex_verbs::verbs::{
    Access, AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, Remote, SendData, SendOp, SendWr,
    WcStatus,
};
use rocex_verbs::{CmEventKind, Context, Cq, Mr, Qp, QpInitAttr};
use zerocopy::FromBytes;

const TARGET: &str = "127.0.11.1";
const HOST: &str = "127.0.11.2";
const PORT: u16 = 14420;
const WAIT: Duration = Duration::from_secs(10);

/// The target's end of one queue.
struct Target {
    ctx: Context,
    qp: Qp,
    cq: Cq,
    recv: Mr,
    data: Mr,
    req: CmReq,
}

/// How the scripted target answers the connect request.
enum Answer {
    Accept { crqsize: u16 },
    Reject { sts: u16 },
}

impl Target {
    /// Listens, takes one connect request and answers it.
    fn serve(sock: &std::path::Path, ready: &mpsc::Sender<()>, answer: Answer) -> Option<Self> {
        let ctx = Context::open(sock).unwrap();
        ctx.cm_listen(PORT).unwrap();
        ready.send(()).unwrap();
        let ev = loop {
            let e = ctx.cm_wait_event(WAIT).unwrap();
            if e.kind == CmEventKind::ConnectRequest {
                break e;
            }
        };
        let req = CmReq::read_from_prefix(&ev.private_data).unwrap().0;
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(64, None).unwrap();
        let mut qp = pd
            .create_qp(&QpInitAttr {
                qp_type: QpType::Rc,
                send_cq: &cq,
                recv_cq: &cq,
                cap: QpCap {
                    max_send_wr: 16,
                    max_recv_wr: 16,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: 64,
                },
            })
            .unwrap();
        let init = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::LOCAL_WRITE,
            ..QpAttr::default()
        };
        let m = AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS;
        qp.modify(&init, m).unwrap();
        let recv = pd.alloc_mr(16 * 64, Access::LOCAL_WRITE).unwrap();
        let data = pd.alloc_mr(1 << 16, Access::LOCAL_WRITE).unwrap();
        let wrs: Vec<RecvWr> = (0..16u64)
            .map(|i| RecvWr::new(i, [recv.sge(i * 64, 64)]))
            .collect();
        qp.post_recv(&wrs).unwrap();
        match answer {
            Answer::Reject { sts } => {
                let rej = [0, 0, sts as u8, (sts >> 8) as u8];
                ctx.cm_reject_with(ev.id, &rej).unwrap();
                return None;
            }
            Answer::Accept { crqsize } => {
                let mut rep = [0u8; 32];
                rep[2..4].copy_from_slice(&crqsize.to_le_bytes());
                ctx.cm_accept_with(ev.id, &qp, &rep).unwrap();
            }
        }
        Some(Self {
            ctx,
            qp,
            cq,
            recv,
            data,
            req,
        })
    }

    /// Waits for the host's disconnect (the DREQ), passing over the `Established`
    /// that came first.
    fn disconnected(&self) {
        loop {
            match self.ctx.cm_wait_event(WAIT).unwrap().kind {
                CmEventKind::Established => {}
                k => return assert_eq!(k, CmEventKind::Disconnected),
            }
        }
    }

    /// The next command capsule.
    fn next(&mut self) -> Sqe {
        loop {
            let wc = self.cq.poll_wait(WAIT).unwrap();
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.opcode != rocex_verbs::verbs::WcOpcode::Recv {
                continue;
            }
            assert_eq!(wc.byte_len, 64, "a command capsule is the 64-byte SQE");
            let mut b = [0u8; 64];
            self.recv.read(wc.wr_id as usize * 64, &mut b).unwrap();
            let wr = RecvWr::new(wc.wr_id, [self.recv.sge(wc.wr_id * 64, 64)]);
            self.qp.post_recv(&[wr]).unwrap();
            return Sqe::read_from_bytes(&b[..]).unwrap();
        }
    }

    fn post(&mut self, wr: SendWr) {
        self.qp.post_send(&[wr]).unwrap();
        loop {
            let wc = self.cq.poll_wait(WAIT).unwrap();
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.wr_id == 99 {
                return;
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let mut wr = SendWr::new(99, SendOp::Send, []);
        wr.data = SendData::Inline(bytes.to_vec());
        self.post(wr);
    }

    /// A response capsule: CID, SQ ID and status (above the phase bit).
    fn respond(&mut self, cid: u16, sq_id: u16, status: u16) {
        let mut b = [0u8; 16];
        b[10..12].copy_from_slice(&sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&cid.to_le_bytes());
        b[14..16].copy_from_slice(&(status << 1).to_le_bytes());
        self.send(&b);
    }

    /// RDMA READ of the host's memory a keyed SGL names.
    fn read_host(&mut self, sgl: &KeyedSgl) -> Vec<u8> {
        assert_eq!(sgl.id, 0x40, "keyed data block, address subtype");
        let len = sgl.length();
        let remote = Remote {
            addr: sgl.addr.get(),
            rkey: sgl.key.get(),
        };
        self.post(SendWr::new(
            99,
            SendOp::Read(remote),
            [self.data.sge(0, len)],
        ));
        let mut out = vec![0u8; len as usize];
        self.data.read(0, &mut out).unwrap();
        out
    }

    /// RDMA WRITE of `bytes` to the host's memory a keyed SGL names.
    fn write_host(&mut self, sgl: &KeyedSgl, bytes: &[u8]) {
        self.data.write(0, bytes).unwrap();
        let remote = Remote {
            addr: sgl.addr.get(),
            rkey: sgl.key.get(),
        };
        let wr = SendWr::new(
            99,
            SendOp::Write(remote),
            [self.data.sge(0, bytes.len() as u32)],
        );
        self.post(wr);
    }
}

fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

fn cfg(timeout: Duration) -> QueueConfig {
    QueueConfig {
        depth: 4,
        slot_bytes: 4096,
        timeout,
    }
}

/// Starts the two daemons and the scripted target; returns the host's context once the
/// target listens.
fn setup(
    script: impl FnOnce(&std::path::Path, &mpsc::Sender<()>) + Send + 'static,
) -> (Daemon, Daemon, Context, JoinHandle<()>) {
    let (t, h) = (daemon(TARGET), daemon(HOST));
    let (tx, rx) = mpsc::channel();
    let sock = t.sock.clone();
    let target = std::thread::spawn(move || script(&sock, &tx));
    rx.recv_timeout(WAIT).expect("the target listens");
    let ctx = Context::open(&h.sock).unwrap();
    (t, h, ctx, target)
}

fn target_ip() -> IpAddr {
    TARGET.parse().unwrap()
}

#[test]
fn private_data_and_keyed_sgl_transfers() {
    let _s = serial();
    let (_t, _h, ctx, target) = setup(|sock, ready| {
        let mut t = Target::serve(sock, ready, Answer::Accept { crqsize: 4 }).unwrap();
        let r = t.req;
        assert_eq!(
            (
                r.recfmt.get(),
                r.qid.get(),
                r.hrqsize.get(),
                r.hsqsize.get()
            ),
            (0, 1, 4, 3),
            "the REQ's private data as the target's CM hands it on"
        );
        let w = t.next();
        assert_eq!(
            (w.opcode, w.nsid.get(), w.cdw[0].get(), w.cdw[2].get()),
            (opcode::WRITE, 1, 8, 0)
        );
        let got = t.read_host(&w.dptr);
        let ok = got == pattern(5, 4096);
        t.respond(w.cid.get(), 1, if ok { 0 } else { 0x04 });
        let r = t.next();
        assert_eq!(r.opcode, opcode::READ);
        t.write_host(&r.dptr, &pattern(9, 4096));
        t.respond(r.cid.get(), 1, 0);
        t.disconnected();
    });
    let pd = ctx.alloc_pd().unwrap();
    let mut q = Queue::connect(&ctx, &pd, target_ip(), PORT, 1, cfg(WAIT)).unwrap();
    assert_eq!(q.controller_depth(), Some(4));
    let cid = q.take_cid().unwrap();
    q.put_data(cid, &pattern(5, 4096)).unwrap();
    let sgl = q.sgl(cid, 4096).unwrap();
    q.submit(cid, Sqe::rw(opcode::WRITE, 1, 8, 1, sgl)).unwrap();
    assert_eq!(
        q.complete().unwrap().cid,
        cid,
        "the target read the write's data intact"
    );
    let cid = q.take_cid().unwrap();
    let sgl = q.sgl(cid, 4096).unwrap();
    q.call_with(cid, Sqe::rw(opcode::READ, 1, 8, 1, sgl))
        .unwrap();
    let mut got = vec![0u8; 4096];
    q.get_data(cid, &mut got).unwrap();
    assert!(
        got == pattern(9, 4096),
        "the target's RDMA WRITE landed in the read's slot"
    );
    q.disconnect().unwrap();
    target.join().expect("target");
}

#[test]
fn bad_responses_are_typed_errors_and_the_queue_goes_on() {
    let _s = serial();
    let (_t, _h, ctx, target) = setup(|sock, ready| {
        let mut t = Target::serve(sock, ready, Answer::Accept { crqsize: 4 }).unwrap();
        let a = t.next().cid.get();
        t.send(&[0u8; 8]); // not a CQE
        t.respond(a, 1, 0);
        let b = t.next().cid.get();
        t.respond(b + 2, 1, 0); // a command not in flight
        t.respond(b, 1, 0);
        let c = t.next().cid.get();
        t.respond(c, 9, 0); // another queue's SQ ID
        let d = t.next().cid.get();
        t.respond(d, 1, 0x02); // invalid field in command
        let _silent = t.next();
        t.disconnected();
    });
    let pd = ctx.alloc_pd().unwrap();
    let mut q =
        Queue::connect(&ctx, &pd, target_ip(), PORT, 1, cfg(Duration::from_secs(1))).unwrap();
    let flush = || Sqe::flush(1);

    let a = q.take_cid().unwrap();
    q.submit(a, flush()).unwrap();
    let e = q.complete().unwrap_err();
    assert!(
        matches!(
            e,
            Error::BadResponse {
                qid: 1,
                cid: None,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(q.complete().unwrap().cid, a);

    let b = q.take_cid().unwrap();
    q.submit(b, flush()).unwrap();
    let e = q.complete().unwrap_err();
    assert!(
        matches!(e, Error::BadResponse { qid: 1, cid: Some(c), .. } if c == b + 2),
        "{e}"
    );
    assert_eq!(q.complete().unwrap().cid, b);

    let c = q.take_cid().unwrap();
    let e = q.call_with(c, flush()).unwrap_err();
    assert!(
        e.to_string().contains("SQ ID 9 in a response on queue 1"),
        "{e}"
    );

    let d = q.take_cid().unwrap();
    let e = q.call_with(d, flush()).unwrap_err();
    assert!(
        matches!(&e, Error::Command { qid: 1, cid, op: "flush", status } if *cid == d && status.sc() == 0x02),
        "{e}"
    );

    let s = q.take_cid().unwrap();
    let e = q.call_with(s, flush()).unwrap_err();
    assert!(
        matches!(e, Error::Timeout { qid: 1, cid: Some(c), .. } if c == s),
        "{e}"
    );
    drop(q);
    target.join().expect("target");
}

#[test]
fn a_reject_names_the_bindings_status_and_a_shallow_accept_is_refused() {
    let _s = serial();
    {
        let (_t, _h, ctx, target) = setup(|sock, ready| {
            assert!(Target::serve(sock, ready, Answer::Reject { sts: 3 }).is_none());
        });
        let pd = ctx.alloc_pd().unwrap();
        let e = Queue::connect(&ctx, &pd, target_ip(), PORT, 1, cfg(WAIT)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Rejected {
                    qid: 1,
                    reason: 28,
                    status: Some(3)
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with("invalid queue ID (NVMe-oF RDMA STS 3)"),
            "{e}"
        );
        target.join().expect("target");
    }
    let (_t, _h, ctx, target) = setup(|sock, ready| {
        let t = Target::serve(sock, ready, Answer::Accept { crqsize: 2 }).unwrap();
        t.disconnected();
    });
    let pd = ctx.alloc_pd().unwrap();
    let e = Queue::connect(&ctx, &pd, target_ip(), PORT, 1, cfg(WAIT)).unwrap_err();
    assert!(matches!(e, Error::BadAccept { qid: 1, .. }), "{e}");
    assert!(
        e.to_string()
            .contains("takes 2 commands at once, the queue has 4 entries"),
        "{e}"
    );
    target.join().expect("target");

    // Nobody listens on the next port: the target's CM itself rejects (reason 8, and its
    // zeros are no binding status).
    let e = Queue::connect(&ctx, &pd, target_ip(), PORT + 1, 0, cfg(WAIT)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Rejected {
                qid: 0,
                reason: 8,
                status: None
            }
        ),
        "{e}"
    );
}

#[test]
fn a_target_that_disconnects_mid_command_ends_the_wait_with_an_error() {
    let _s = serial();
    let (_t, _h, ctx, target) = setup(|sock, ready| {
        let mut t = Target::serve(sock, ready, Answer::Accept { crqsize: 4 }).unwrap();
        let _unanswered = t.next();
        let ev = loop {
            let e = t.ctx.cm_wait_event(WAIT).unwrap();
            if e.kind == CmEventKind::Established {
                break e;
            }
        };
        t.ctx.cm_disconnect(ev.id).unwrap();
        t.disconnected();
    });
    let pd = ctx.alloc_pd().unwrap();
    // A long timeout: the wait ends with the connection (its flushed receives), long
    // before it.
    let mut q = Queue::connect(
        &ctx,
        &pd,
        target_ip(),
        PORT,
        1,
        cfg(Duration::from_secs(60)),
    )
    .unwrap();
    let cid = q.take_cid().unwrap();
    let e = q.call_with(cid, Sqe::flush(1)).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Transport {
                qid: 1,
                status: WcStatus::WrFlushErr,
                ..
            }
        ),
        "{e}"
    );
    drop(q);
    target.join().expect("target");
}
