//! Latency tests. READ and atomic: the client posts one request at a time and times each
//! completion; the server is passive. WRITE and SEND: a ping-pong in which each side
//! answers the other's message (the client opens the SEND test, the server the WRITE
//! test, as perftest does); a WRITE is seen arriving by polling the last byte of the
//! remote area for the sender's counter, as perftest does, and each sample is half a
//! round trip. As in perftest's loops (`run_iter_lat_write`, `run_iter_lat_send`: a TX
//! depth of one, each request signaled), a side polls until its message completes before
//! it looks for the peer's next, so each half round trip includes the peer's ACK.

use std::io;
use std::time::{Duration, Instant};

use super::bw::{
    check_result, check_slot, mismatches, post_recv, post_request, split, start_size, wc_ok,
};
use super::exchange::{KeyMsg, Oob, Verdict};
use super::{Ctx, Op, Outcome, Params, pattern};

const STALL: Duration = Duration::from_secs(30);
/// How long a timed ping-pong waits past its deadline for the peer's message.
const GRACE: Duration = Duration::from_secs(1);

/// Runs the test; with `-a`, every size in turn (the READ client alone, both sides of
/// the ping-pongs, with no exchange between sizes but the SEND test's, as perftest's),
/// `row` called with each size's result.
pub(crate) fn run(
    ctx: &mut Ctx,
    p: &Params,
    oob: &mut Oob,
    mine: &[KeyMsg],
    row: &mut dyn FnMut(&Params, &Outcome),
) -> io::Result<Outcome> {
    if matches!(p.op, Op::Read | Op::Atomic) && !p.client {
        let c = &mut *ctx;
        oob.handshake(mine, &mut || c.pump())?;
        return Ok(Outcome {
            passive: true,
            ..Outcome::default()
        });
    }
    let mut last = None;
    for size in p.sizes() {
        let q = p.with_size(size);
        start_size(ctx, &q, oob, mine)?;
        let out = match p.op {
            Op::Read | Op::Atomic => one_at_a_time(ctx, &q)?,
            Op::Write | Op::Send => ping_pong(ctx, &q)?,
        };
        if p.all {
            row(&q, &out);
        }
        last = Some(out);
    }
    let out = last.ok_or_else(|| io::Error::other("no size to run"))?;
    // perftest's WRITE latency test closes without a last handshake.
    if p.op != Op::Write {
        let c = &mut *ctx;
        oob.handshake(mine, &mut || c.pump())?;
    }
    Ok(out)
}

/// Waits for the next completion, answering the peer meanwhile.
fn next_wc(ctx: &mut Ctx) -> io::Result<rocex_proto::verbs::WorkCompletion> {
    let since = Instant::now();
    loop {
        ctx.nic.turn()?;
        if let Some(wc) = ctx.nic.poll_cq()? {
            wc_ok(&wc)?;
            return Ok(wc);
        }
        if since.elapsed() > STALL {
            return Err(io::Error::other(format!(
                "no completion for {} s",
                STALL.as_secs()
            )));
        }
        ctx.nic.wait(Duration::from_millis(1))?;
    }
}

fn one_at_a_time(ctx: &mut Ctx, p: &Params) -> io::Result<Outcome> {
    let check = p.verify && p.peer_rocex;
    let mut lat = Vec::with_capacity(p.iters as usize);
    let mut errors = 0;
    let start = Instant::now();
    let deadline = p.duration.map(|d| start + d);
    let mut seq = 0u64;
    while deadline.map_or(seq < p.iters, |d| Instant::now() < d) {
        let t = Instant::now();
        post_request(ctx, p, 0, seq, true)?;
        let wc = next_wc(ctx)?;
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        let (_, s) = split(wc.wr_id);
        if check {
            errors += check_result(ctx, p, 0, s)?;
        }
        seq += 1;
    }
    Ok(outcome(seq, start, lat, check, errors))
}

/// Has the peer's message number `n` arrived? Reaps our own send completions on the way:
/// `sent` is raised to the last of our messages seen completed.
fn arrived(
    ctx: &mut Ctx,
    p: &Params,
    n: u64,
    check: bool,
    errors: &mut u64,
    sent: &mut u64,
) -> io::Result<bool> {
    match p.op {
        Op::Write => {
            while let Some(wc) = ctx.nic.poll_cq()? {
                wc_ok(&wc)?;
                *sent = (*sent).max(split(wc.wr_id).1);
            }
            let last = ctx.remote_area(0) + u64::from(p.size) - 1;
            let mut b = [0u8; 1];
            ctx.read_mem(0, last, &mut b)?;
            if b[0] != n as u8 {
                return Ok(false);
            }
            if check && p.size > 1 {
                let mut got = vec![0u8; p.size as usize - 1];
                ctx.read_mem(0, ctx.remote_area(0), &mut got)?;
                *errors += mismatches(&got);
            }
            Ok(true)
        }
        _ => {
            let mut seen = false;
            while let Some(wc) = ctx.nic.poll_cq()? {
                wc_ok(&wc)?;
                if wc.opcode != rocex_proto::verbs::WcOpcode::Recv {
                    *sent = (*sent).max(split(wc.wr_id).1);
                } else {
                    let (q, k) = split(wc.wr_id);
                    if wc.byte_len != p.size {
                        *errors += 1;
                    }
                    if check {
                        *errors += check_slot(ctx, q, k as u32, p.size as usize)?;
                    }
                    post_recv(ctx, p, q, k as u32)?;
                    seen = true;
                }
            }
            Ok(seen)
        }
    }
}

fn ping_pong(ctx: &mut Ctx, p: &Params) -> io::Result<Outcome> {
    let check = p.verify && p.peer_rocex;
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let mut errors = 0;
    // A timed run (`--duration`) goes on until its deadline; the peer keeps its own, so
    // a side that waits for a message past its deadline stops too.
    let iters = if p.duration.is_some() {
        u64::MAX
    } else {
        p.iters
    };
    let mut lat = Vec::with_capacity(iters.min(1 << 20) as usize);
    let (mut sent_at, mut seen_at): (Option<Instant>, Option<Instant>) = (None, None);
    let mut sent = 0u64;
    // The peer's next message, taken while this side waited for its own to complete.
    let mut early = false;
    let start = Instant::now();
    let deadline = p.duration.map(|d| start + d);
    let over = |grace: Duration| deadline.is_some_and(|d| Instant::now() >= d + grace);
    while (scnt < iters || rcnt < iters) && !over(Duration::ZERO) {
        // Who opens is perftest's choice, and both ends must agree: in the WRITE test a
        // second message would overwrite the counter before the peer saw the first.
        let opener = if p.op == Op::Write {
            !p.client
        } else {
            p.client
        };
        if rcnt < iters && !(scnt < 1 && opener) {
            let since = Instant::now();
            // Looked for after every receive: a busy-polling NIC holds the ACK for the
            // message until the next call, so that the answer goes out with it, first.
            let mut spins = 0u32;
            loop {
                if early || arrived(ctx, p, rcnt + 1, check, &mut errors, &mut sent)? {
                    early = false;
                    break;
                }
                // The clock only now and then: a busy poll spins in a microsecond.
                spins = spins.wrapping_add(1);
                if spins % 1024 == 0 && over(GRACE) {
                    break;
                }
                if spins % 1024 == 0 && since.elapsed() > STALL {
                    return Err(io::Error::other(format!(
                        "message {} did not arrive within {} s",
                        rcnt + 1,
                        STALL.as_secs()
                    )));
                }
                ctx.nic.wait(Duration::from_millis(1))?;
            }
            if over(GRACE) {
                break;
            }
            rcnt += 1;
            // One clock reading a round, as perftest takes one cycle count: it ends the
            // round just seen and starts the next.
            let t = Instant::now();
            if let Some(sent) = sent_at.take() {
                lat.push(t.duration_since(sent).as_secs_f64() * 1e6 / 2.0);
            }
            seen_at = Some(t);
        }
        if scnt < iters {
            scnt += 1;
            if p.op == Op::Write {
                // The last byte carries the counter the peer polls for.
                ctx.write_mem(0, ctx.local(0) + u64::from(p.size) - 1, &[scnt as u8])?;
            }
            sent_at = Some(seen_at.take().unwrap_or_else(Instant::now));
            post_request(ctx, p, 0, scnt, true)?;
            ctx.nic.turn()?;
            // The peer's next message may come first: a SEND's is taken here.
            let next = Some((rcnt + 1, check));
            early |= until_sent(ctx, p, scnt, next, &mut errors, &mut sent, |_| over(GRACE))?;
        }
    }
    if p.op == Op::Write {
        // The counter byte back to the pattern, so that a larger size (`-a`) sends the
        // pattern there; once our last WRITE has completed, for it carries the counter.
        // A timed run's peer may have stopped answering already: a moment is enough.
        until_sent(ctx, p, scnt, None, &mut errors, &mut sent, |since| {
            p.duration.is_some() && since.elapsed() > GRACE
        })?;
        let last = u64::from(p.size) - 1;
        ctx.write_mem(0, ctx.local(0) + last, &[pattern(last)])?;
    }
    let iters = if p.duration.is_some() { rcnt } else { scnt };
    Ok(outcome(iters, start, lat, check, errors))
}

/// Polls until this side's message `scnt` has completed (`sent` reaches it), unless
/// `give_up` (given when the wait began) says to stop first, looking meanwhile for the
/// peer's message `next` (and checking it, with its flag); whether that came.
fn until_sent(
    ctx: &mut Ctx,
    p: &Params,
    scnt: u64,
    next: Option<(u64, bool)>,
    errors: &mut u64,
    sent: &mut u64,
    give_up: impl Fn(Instant) -> bool,
) -> io::Result<bool> {
    let (n, check) = next.unwrap_or((0, false));
    let since = Instant::now();
    let mut came = false;
    while *sent < scnt && !give_up(since) {
        came |= arrived(ctx, p, n, check, errors, sent)? && next.is_some();
        if since.elapsed() > STALL {
            return Err(io::Error::other(format!(
                "message {scnt} did not complete within {} s",
                STALL.as_secs()
            )));
        }
        if *sent < scnt {
            ctx.nic.wait(Duration::from_millis(1))?;
        }
    }
    Ok(came)
}

/// A latency test's result: `iters` since `start`, each one's time in `lat_us`, and
/// `errors` in what was `checked`.
fn outcome(iters: u64, start: Instant, lat_us: Vec<f64>, checked: bool, errors: u64) -> Outcome {
    Outcome {
        iters,
        seconds: start.elapsed().as_secs_f64(),
        peak_mbs: 0.0,
        lat_us,
        verdict: Verdict { checked, errors },
        passive: false,
    }
}
