//! Two direct contexts in this process, timed: a poll that takes a request's completion
//! waits for the peer's answer when the peer is quick, and ever more rarely when it is
//! not; once answered it holds the answer's ACK for the program's next post, and ever
//! more rarely when the program comes back late; a passive responder's progress thread keeps turning while requests follow each
//! other. These depend on the threads getting their cores, so they run one at a time, in
//! a binary of their own (cargo runs test binaries one after another).

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use rocex_testkit::pattern;
use rocex_verbs::verbs::{Remote, SendOp, SendWr, WcStatus};

/// Held by each test here for its whole run.
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn a_poll_lingers_for_the_answer_of_a_peer_that_watches_its_memory() {
    let _alone = alone();
    // ib_write_lat's loop on both ends: wait for the peer's bytes on memory, write them
    // back, poll until that WRITE completes. B runs in a thread of its own (a context
    // stays in the thread that opened it), and answers 30 us after A's WRITE landed, long
    // after the ACK that completes A's WRITE (A's polls see the ACK alone) and within the
    // longest window: the answer is in A's memory when A's poll returns only if the poll
    // waited for it, for an answer of 16 packets to its end.
    // On a loaded machine A's thread may be off its core while both come; so a set of
    // rounds in which no linger was needed is tried again, a few times.
    for (len, ips) in [
        (1, ("127.0.19.17", "127.0.19.18")),
        (16 * 1024, ("127.0.19.21", "127.0.19.22")),
    ] {
        let lingered = (0..3).any(|_| ping_pong(len, ips));
        assert!(lingered, "{len} B: no poll waited for an answer and got it");
    }
}

/// A's and B's rounds of `len` bytes; whether a poll of A's waited for an answer that came
/// and found it whole on return. Every answer lands, byte for byte, either way.
fn ping_pong(len: usize, (ip_a, ip_b): (&'static str, &'static str)) -> bool {
    const ROUNDS: u16 = 1000;
    const THINK: Duration = Duration::from_micros(30);
    let (mut a, to_b, peer) = with_peer((ip_a, ip_b), move |mut b, to_a| {
        for r in 1..=ROUNDS {
            spin_for(&b.mr, len, r as u8);
            let think = Instant::now() + THINK;
            while Instant::now() < think {
                std::thread::yield_now();
            }
            write_bytes(&mut b, to_a, len, r as u8, r.into());
        }
    });
    let mut landed_at_return = 0;
    for r in 1..=ROUNDS {
        write_bytes(&mut a, to_b, len, r as u8, r.into());
        landed_at_return += u32::from(landed(&a.mr, len, r as u8));
        spin_for(&a.mr, len, r as u8);
    }
    peer.join().unwrap();
    let count = |name| direct_counter(&a.ctx, name);
    let (answered, held) = (count("linger_answered"), count("linger_held"));
    eprintln!(
        "{len} B: A's lingers: {answered} answered ({held} holding the ACK, {} came back \
         late), {} in vain; {landed_at_return} of {ROUNDS} answers whole when the poll \
         returned",
        count("linger_held_late"),
        count("linger_in_vain")
    );
    // Without lingering the answer lands only when A's progress thread wakes for it. A
    // comes back at once to post its next WRITE: answered lingers hold the ACK for it.
    answered > 0 && landed_at_return > 0 && held > 0
}

#[test]
fn a_program_that_comes_back_late_after_an_answer_holds_its_ack_ever_more_rarely() {
    let _alone = alone();
    // B answers each WRITE of A's at once; A waits 300 us after each round before its next
    // WRITE. Each answered linger that held the ACK for A's next post finds it came late
    // (B's WRITE completed only then), and the next 1, 3, 7, ... answered lingers send it
    // at once instead.
    const ROUNDS: u8 = 20;
    let ips = ("127.0.19.25", "127.0.19.26");
    let (mut a, to_b, peer) = with_peer(ips, |mut b, to_a| {
        for r in 1..=ROUNDS {
            spin_for(&b.mr, 1, r);
            write_bytes(&mut b, to_a, 1, r, r.into());
        }
    });
    for r in 1..=ROUNDS {
        write_bytes(&mut a, to_b, 1, r, r.into());
        spin_for(&a.mr, 1, r);
        std::thread::sleep(Duration::from_micros(300));
    }
    peer.join().unwrap();
    let count = |name| direct_counter(&a.ctx, name);
    let (answered, held, late) = (
        count("linger_answered"),
        count("linger_held"),
        count("linger_held_late"),
    );
    eprintln!("A's lingers: {answered} answered, {held} held the ACK, {late} came back late");
    // Every hold comes back late, so the answered lingers that hold are the 1st, 3rd, 7th,
    // 15th ... (those the peer answers late or not at all do not count); the last hold
    // may still wait for the program's next post when the test ends.
    assert!(answered >= 1, "no linger was answered");
    assert_eq!(held, u64::from((answered + 1).ilog2()), "holds back off");
    assert!(
        late <= held && late + 1 >= held,
        "every hold came back late"
    );
}

/// A at `ip_a`, connected to B at `ip_b`, which runs `peer` in a thread of its own (a
/// context stays in the thread that opened it) with where A's memory is; A, B's memory
/// and B's thread.
fn with_peer(
    (ip_a, ip_b): (&'static str, &'static str),
    peer: impl FnOnce(End, Remote) + Send + 'static,
) -> (End, Remote, std::thread::JoinHandle<()>) {
    let a = end(open(ip_a, 1));
    let to_a = (a.qp.qpn(), a.mr.remote(0));
    let (tx, rx) = std::sync::mpsc::channel();
    let b = std::thread::spawn(move || {
        let b = end(open(ip_b, 2));
        let peer_a = (ip_a.parse().unwrap(), to_a.0, 0x1000);
        to_rts(&b.qp, 0x2000, peer_a, |x| x);
        tx.send((b.qp.qpn(), b.mr.remote(0))).unwrap();
        peer(b, to_a.1);
    });
    let (qpn_b, to_b) = rx.recv().unwrap();
    to_rts(&a.qp, 0x1000, (ip_b.parse().unwrap(), qpn_b, 0x2000), |x| x);
    (a, to_b, b)
}

#[test]
fn a_poll_whose_peer_never_answers_lingers_ever_more_rarely() {
    let _alone = alone();
    let (mut a, b) = pair("127.0.19.19", "127.0.19.20");
    let to_b = b.mr.remote(0);
    for r in 1..=20u8 {
        write_bytes(&mut a, to_b, 1, r, r.into());
    }
    // Chances 1, 3, 7 and 15 wait in vain; 1, 3 and 7 chances after them are skipped, and
    // the 5 after the fourth.
    let count = |name| direct_counter(&a.ctx, name);
    assert_eq!(count("linger_answered"), 0);
    assert_eq!(count("linger_in_vain"), 4);
    assert_eq!(count("linger_skipped"), 16);
}

#[test]
fn a_passive_responder_answers_reads_that_follow_each_other_without_sleeping() {
    let _alone = alone();
    // ib_read_lat: A reads from B one READ at a time; B's application calls nothing. Each
    // request comes a round trip after the last response, and B's progress thread, which
    // keeps turning for a while after a packet, takes it without a wake-up from epoll.
    let (mut a, b) = pair("127.0.19.23", "127.0.19.24");
    let data = pattern(9, 64);
    b.mr.write(0, &data).unwrap();
    // Up to three sets of 200: a set in which A's thread and B's progress thread shared a
    // core is one in which B's spin never overlapped A's next request.
    let mut id = 0u64;
    for _ in 0..3 {
        for _ in 0..200 {
            let op = SendOp::Read(b.mr.remote(0));
            a.qp.post_send(&[SendWr::new(id, op, [a.mr.sge(0, 64)])])
                .unwrap();
            // A spins on its CQ, as ib_read_lat does, to ask again at once.
            let end = Instant::now() + LIMIT;
            let wc = loop {
                if let Some(wc) = a.cq.poll(1).unwrap().pop() {
                    break wc;
                }
                assert!(Instant::now() < end, "the READ never completed");
            };
            assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Success));
            id += 1;
        }
        let mut got = vec![0; 64];
        a.mr.read(0, &mut got).unwrap();
        assert!(got == data);
        if direct_counter(&b.ctx, "spin_received") > 0 {
            break;
        }
    }
    let spun = direct_counter(&b.ctx, "spin_received");
    eprintln!("B's progress thread took packets in {spun} turns of its spin ({id} READs)");
    assert!(spun > 0);
}
