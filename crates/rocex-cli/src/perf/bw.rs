//! Bandwidth tests. The client keeps `tx_depth` requests in flight per QP; the server of a
//! one-sided test only waits for the client's "done" handshake (its engine answers the
//! requests meanwhile), the server of a SEND test receives and reposts.

use std::io;
use std::time::{Duration, Instant};

use rocex_proto::verbs::{RecvWr, SendData, SendOp, SendWr, WcStatus, WorkCompletion};

use super::exchange::{BwReport, KeyMsg, Oob, Verdict};
use super::report::{Progress, Sampler, bw_unit};
use super::{ATOMIC_START, AtomicType, Ctx, Op, Outcome, Params, Test, in_flight, pattern};
use crate::progress::Stall;

/// wr_id = QP index << 40 | sequence number.
const QP_SHIFT: u32 = 40;
/// No completion for this long means the peer is gone.
const STALL: Duration = Duration::from_secs(30);
/// How long a timed run waits past its `--duration` for the requests in flight.
const GRACE: Duration = Duration::from_secs(1);
/// No completion for this long is said on stderr, once, while the run keeps waiting.
pub(crate) const NOTICE: Duration = Duration::from_secs(5);

pub(crate) fn split(wr_id: u64) -> (usize, u64) {
    ((wr_id >> QP_SHIFT) as usize, wr_id & ((1 << QP_SHIFT) - 1))
}

pub(crate) fn wc_ok(wc: &WorkCompletion) -> io::Result<()> {
    if wc.status == WcStatus::Success {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "completion with status {:?} (wr_id {:#x}, {:?})",
            wc.status, wc.wr_id, wc.opcode
        )))
    }
}

/// Posts receive slot `k` of QP `qp`, unless the peer's `p.iters` messages of this size
/// all have one (a receive left over would crowd the next size's out of the queue).
pub(crate) fn post_recv(ctx: &mut Ctx, p: &Params, qp: usize, k: u32) -> io::Result<()> {
    if p.duration.is_none() && ctx.recvs[qp] >= p.iters {
        return Ok(());
    }
    ctx.recvs[qp] += 1;
    let sge = ctx.sge(qp, ctx.slot(qp, k), ctx.size);
    ctx.nic.post_recv(
        qp,
        RecvWr::new(((qp as u64) << QP_SHIFT) | u64::from(k), [sge]),
    )
}

/// Posts a receive into every slot of every QP (SEND tests), before the handshake that
/// lets the peer send, as perftest does, so that the first SEND finds one.
pub(crate) fn post_all_recvs(ctx: &mut Ctx, p: &Params) -> io::Result<()> {
    ctx.recvs.fill(0);
    for qp in 0..ctx.qps.len() {
        for k in 0..ctx.slots.min(p.rx_depth) {
            post_recv(ctx, p, qp, k)?;
        }
    }
    Ok(())
}

/// With `-a`, a SEND test's start of a size as perftest's: the receiver posts its
/// receives, then a handshake lets the sender go.
pub(crate) fn start_size(
    ctx: &mut Ctx,
    p: &Params,
    oob: &mut Oob,
    mine: &[KeyMsg],
) -> io::Result<()> {
    ctx.set_size(p.size);
    if !(p.all && p.op == Op::Send) {
        return Ok(());
    }
    if !p.client || p.test == Test::Lat {
        post_all_recvs(ctx, p)?;
    }
    let c = &mut *ctx;
    oob.handshake(mine, &mut || c.pump())?;
    Ok(())
}

/// Checks a received or READ message in slot `k` against the pattern, then clears the
/// slot so that a message that never lands there cannot pass on stale bytes.
pub(crate) fn check_slot(ctx: &Ctx, qp: usize, k: u32, len: usize) -> io::Result<u64> {
    let addr = ctx.slot(qp, k);
    let mut got = vec![0u8; len];
    ctx.read_mem(qp, addr, &mut got)?;
    ctx.write_mem(qp, addr, &vec![0u8; len])?;
    Ok(mismatches(&got))
}

/// Bytes of `got` that differ from the pattern.
pub(crate) fn mismatches(got: &[u8]) -> u64 {
    got.iter()
        .enumerate()
        .filter(|(i, b)| **b != pattern(*i as u64))
        .count() as u64
}

/// Posts request `seq` of QP `qp`, asking for its completion if `signaled`.
pub(crate) fn post_request(
    ctx: &mut Ctx,
    p: &Params,
    qp: usize,
    seq: u64,
    signaled: bool,
) -> io::Result<()> {
    let remote = ctx.peer_remote(qp);
    let slot = ctx.slot(qp, (seq % u64::from(ctx.slots)) as u32);
    let (op, sge) = match p.op {
        Op::Write => (SendOp::Write(remote), ctx.sge(qp, ctx.local(qp), p.size)),
        Op::Send => (SendOp::Send, ctx.sge(qp, ctx.local(qp), p.size)),
        Op::Read => (SendOp::Read(remote), ctx.sge(qp, slot, p.size)),
        Op::Atomic => {
            let op = match p.atomic {
                AtomicType::Faa => SendOp::FetchAdd { remote, add: 1 },
                AtomicType::Cas => SendOp::CompareSwap {
                    remote,
                    compare: ATOMIC_START.wrapping_add(seq),
                    swap: ATOMIC_START.wrapping_add(seq + 1),
                },
            };
            (op, ctx.sge(qp, slot, 8))
        }
    };
    let mut wr = SendWr::new(((qp as u64) << QP_SHIFT) | seq, op, [sge]);
    wr.flags.signaled = signaled;
    if matches!(p.op, Op::Write | Op::Send) && p.size <= p.inline {
        let mut data = vec![0u8; p.size as usize];
        ctx.read_mem(qp, ctx.local(qp), &mut data)?;
        wr.data = SendData::Inline(data);
    }
    ctx.nic.post_send(qp, wr)
}

/// Checks what request `seq` brought back: READ data, or an atomic's original value, which
/// is `ATOMIC_START + seq` because the responder runs one QP's atomics in order.
pub(crate) fn check_result(ctx: &Ctx, p: &Params, qp: usize, seq: u64) -> io::Result<u64> {
    let k = (seq % u64::from(ctx.slots)) as u32;
    match p.op {
        Op::Read => check_slot(ctx, qp, k, p.size as usize),
        Op::Atomic => {
            let mut w = [0u8; 8];
            ctx.read_mem(qp, ctx.slot(qp, k), &mut w)?;
            Ok(u64::from(
                u64::from_ne_bytes(w) != ATOMIC_START.wrapping_add(seq),
            ))
        }
        Op::Write | Op::Send => Ok(0),
    }
}

/// Runs the test: every size in turn, measured by the client and received by the server
/// of a SEND test (with `-a`, each size's row), then perftest's end of the run: a
/// handshake and, for the one-sided tests, the client's last report and a last handshake
/// (`-a` changes only the client's side of the exchange). The server of a one-sided test
/// only waits for the end.
pub(crate) fn run(
    ctx: &mut Ctx,
    p: &Params,
    oob: &mut Oob,
    mine: &[KeyMsg],
    progress: &mut Progress,
    row: &mut dyn FnMut(&Params, &Outcome),
) -> io::Result<Outcome> {
    if !p.client && p.op != Op::Send {
        return passive_server(ctx, p, oob, mine);
    }
    let mut last = None;
    for size in p.sizes() {
        let q = p.with_size(size);
        progress.resize(size);
        start_size(ctx, &q, oob, mine)?;
        let (out, report) = if p.client {
            measure(ctx, &q, progress)?
        } else {
            (receive(ctx, &q, progress)?, BwReport::default())
        };
        if p.all {
            progress.finish();
            row(&q, &out);
            end_size(ctx, &q, oob, mine)?;
        }
        last = Some((out, report));
    }
    let (out, report) = last.ok_or_else(|| io::Error::other("no size to run"))?;
    let c = &mut *ctx;
    oob.handshake(mine, &mut || c.pump())?;
    if p.client && p.op != Op::Send {
        oob.bw_reports(&report, &mut || c.pump())?;
        oob.handshake(mine, &mut || c.pump())?;
    }
    Ok(out)
}

/// One size: `p.iters` requests per QP (or `p.duration`), timed.
fn measure(ctx: &mut Ctx, p: &Params, progress: &mut Progress) -> io::Result<(Outcome, BwReport)> {
    let nq = ctx.qps.len();
    // READ and atomic results need a slot each while in flight.
    let depth = if matches!(p.op, Op::Read | Op::Atomic) {
        p.tx_depth.min(ctx.slots)
    } else {
        p.tx_depth
    } as u64;
    let target = if p.duration.is_some() {
        u64::MAX
    } else {
        p.iters
    };
    // Over all QPs, at most this many in flight (it binds only when QPs outnumber it);
    // posting starts at the QP after the last one posted to, so that every QP has its turn.
    // Totals are kept as counts: a pass over thousands of QPs per completion would cost
    // more than the completion.
    // One completion in `cq_mod` requests; when the run stops, each QP's last request is
    // signaled so that every request is seen done.
    let cq_mod = u64::from(p.cq_mod).min(depth);
    let window = in_flight(p.size).max(depth);
    let (mut flying, mut posted_all, mut done_all) = (0, 0, 0);
    let mut first = 0;
    let mut posted = vec![0u64; nq];
    let mut done = vec![0u64; nq];
    // Requests before this one have a signaled request at or after them.
    let mut covered = vec![0u64; nq];
    let mut t_post = vec![vec![Instant::now(); depth as usize]; nq];
    let mut sampler = Sampler::new(u64::from(p.size), depth * nq as u64);
    let mut lat = Vec::new();
    let check = p.verify && p.peer_rocex;
    let mut errors = 0;
    let start = Instant::now();
    let deadline = p.duration.map(|d| start + d);
    let mut last = Instant::now();
    let mut stall = Stall::new(NOTICE);
    loop {
        let now = Instant::now();
        let stop = deadline.is_some_and(|d| now >= d);
        for q in (first..nq).chain(0..first) {
            if !stop && flying >= window {
                break;
            }
            let more = |posted: u64, covered: u64| {
                if stop {
                    covered < posted
                } else {
                    posted < target
                }
            };
            while (stop || flying < window)
                && posted[q] - done[q] < depth
                && more(posted[q], covered[q])
            {
                let seq = posted[q];
                let signaled = stop || (seq + 1) % cq_mod == 0 || seq + 1 == target;
                post_request(ctx, p, q, seq, signaled)?;
                if signaled {
                    covered[q] = seq + 1;
                }
                t_post[q][(seq % depth) as usize] = Instant::now();
                posted[q] += 1;
                posted_all += 1;
                flying += 1;
                first = (q + 1) % nq;
            }
        }
        ctx.nic.turn()?;
        let mut n = 0;
        while let Some(wc) = ctx.nic.poll_cq()? {
            wc_ok(&wc)?;
            let (q, seq) = split(wc.wr_id);
            if q >= nq || seq < done[q] || seq >= posted[q] {
                return Err(io::Error::other(format!(
                    "completion for a request not in flight (wr_id {:#x})",
                    wc.wr_id
                )));
            }
            let now = Instant::now();
            if lat.len() < 1 << 20 {
                lat.push(
                    now.duration_since(t_post[q][(seq % depth) as usize])
                        .as_secs_f64()
                        * 1e6,
                );
            }
            // In order on an RC QP: this completion retires every request up to `seq`.
            if check {
                for s in done[q]..=seq {
                    errors += check_result(ctx, p, q, s)?;
                }
            }
            let retired = seq + 1 - done[q];
            done[q] = seq + 1;
            done_all += retired;
            flying -= retired;
            n += 1;
            sampler.tick(now, retired);
        }
        if n > 0 {
            last = Instant::now();
            stall.progressed();
        } else if last.elapsed() > STALL {
            return Err(io::Error::other(format!(
                "no completion for {} s ({} of {} done{})",
                STALL.as_secs(),
                done_all,
                posted_all,
                retransmitted(ctx)
            )));
        } else {
            let note = stall.check(|idle| {
                format!(
                    "rocex perf: no completion for {} s ({done_all} of {posted_all} done{}); giving up after {} s",
                    idle.as_secs(),
                    retransmitted(ctx),
                    STALL.as_secs()
                )
            });
            if let Some(note) = note {
                progress.say(&note);
            }
        }
        let all_posted = stop || posted_all >= target.saturating_mul(nq as u64);
        if all_posted && flying == 0 {
            break;
        }
        // A timed run ends on time: what is still in flight a moment after the deadline
        // (a lossy link) is left to the engine and not counted, as perftest stops.
        if deadline.is_some_and(|d| now >= d + GRACE) {
            progress.say(&format!(
                "rocex perf: --duration over; {flying} requests still in flight after {} s more are not counted",
                GRACE.as_secs_f64()
            ));
            break;
        }
        progress.update(start, done_all, p.iters * nq as u64, || {
            ctx.nic.retransmitted()
        });
        if n == 0 {
            let idle = ctx.nic.idle_wait();
            ctx.nic.wait(idle)?;
        }
    }
    let seconds = sampler.elapsed(start);
    let total: u64 = done.iter().sum();
    let per_qp = total / nq as u64;
    let bytes = total * u64::from(p.size);
    let mib = 1024.0 * 1024.0;
    // The report travels in the unit this side reports in, as perftest's does.
    let report = BwReport {
        size: u64::from(p.size),
        iters: per_qp,
        bw_peak: bw_unit(p, sampler.peak_mbs()),
        bw_avg: bw_unit(p, bytes as f64 / mib / seconds),
        msg_rate: total as f64 / seconds / 1e6,
    };
    let out = Outcome {
        iters: total,
        seconds,
        peak_mbs: sampler.peak_mbs(),
        lat_us: lat,
        verdict: Verdict {
            checked: check,
            errors,
        },
        passive: false,
    };
    Ok((out, report))
}

/// `, N retransmitted` for the engine in this process.
fn retransmitted(ctx: &Ctx) -> String {
    ctx.nic
        .counters()
        .map(|c| format!(", {} retransmitted", c.retransmitted_pkts))
        .unwrap_or_default()
}

/// The server of a WRITE, READ or atomic test: the engine answers; we wait for "done",
/// then check what a rocex writer left in the remote areas, and take the client's report.
fn passive_server(
    ctx: &mut Ctx,
    p: &Params,
    oob: &mut Oob,
    mine: &[KeyMsg],
) -> io::Result<Outcome> {
    let start = Instant::now();
    {
        let c = &mut *ctx;
        oob.handshake(mine, &mut || c.pump())?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let check = p.verify && p.peer_rocex && p.op == Op::Write;
    let mut errors = 0;
    if check {
        for q in 0..ctx.qps.len() {
            let mut got = vec![0u8; p.size as usize];
            ctx.read_mem(q, ctx.remote_area(q), &mut got)?;
            errors += mismatches(&got);
        }
    }
    let c = &mut *ctx;
    // A passive server has no result of its own: perftest's sends whatever its report
    // holds, and ignores ours.
    let theirs = oob.bw_reports(&BwReport::default(), &mut || c.pump())?;
    oob.handshake(mine, &mut || c.pump())?;
    let mib = 1024.0 * 1024.0;
    let total = theirs.iters * ctx.qps.len() as u64;
    // The client's report is in its unit, which `--report_gbits` on both sides agrees on.
    let to_mbs = bw_unit(p, 1.0);
    let (avg, peak) = (theirs.bw_avg / to_mbs, theirs.bw_peak / to_mbs);
    let seconds = if avg > 0.0 && avg.is_finite() {
        (total * theirs.size) as f64 / mib / avg
    } else {
        seconds
    };
    Ok(Outcome {
        iters: total,
        seconds,
        peak_mbs: if peak.is_finite() { peak } else { 0.0 },
        lat_us: Vec::new(),
        verdict: Verdict {
            checked: check,
            errors,
        },
        passive: true,
    })
}

/// With `-a`, the handshake that ends a SEND test's size.
fn end_size(ctx: &mut Ctx, p: &Params, oob: &mut Oob, mine: &[KeyMsg]) -> io::Result<()> {
    if p.op == Op::Send {
        let c = &mut *ctx;
        oob.handshake(mine, &mut || c.pump())?;
    }
    Ok(())
}

/// `iters` messages per QP, each checked and its slot reposted.
fn receive(ctx: &mut Ctx, p: &Params, progress: &mut Progress) -> io::Result<Outcome> {
    let nq = ctx.qps.len();
    let target = p.iters * nq as u64;
    let check = p.verify && p.peer_rocex;
    let mut got = 0u64;
    let mut errors = 0;
    let mut sampler = Sampler::new(u64::from(p.size), u64::from(p.tx_depth) * nq as u64);
    let mut first: Option<Instant> = None;
    let start = Instant::now();
    let mut last = Instant::now();
    // A timed run receives until its own deadline, as perftest's server does.
    let deadline = p.duration.map(|d| start + d);
    while deadline.map_or(got < target, |d| Instant::now() < d) {
        ctx.nic.turn()?;
        let mut n = 0;
        while let Some(wc) = ctx.nic.poll_cq()? {
            wc_ok(&wc)?;
            let (q, k) = split(wc.wr_id);
            if q >= nq {
                return Err(io::Error::other("completion for an unknown QP"));
            }
            let now = Instant::now();
            first.get_or_insert(now);
            if wc.byte_len != p.size {
                errors += 1;
            }
            if check {
                errors += check_slot(ctx, q, k as u32, p.size as usize)?;
            }
            post_recv(ctx, p, q, k as u32)?;
            got += 1;
            n += 1;
            sampler.tick(now, 1);
        }
        if n > 0 {
            last = Instant::now();
        } else if last.elapsed() > STALL && first.is_some() {
            return Err(io::Error::other(format!(
                "no message for {} s ({got} of {target} received)",
                STALL.as_secs()
            )));
        } else if last.elapsed() > 4 * STALL {
            return Err(io::Error::other("the client sent nothing"));
        }
        progress.update(start, got, target, || ctx.nic.retransmitted());
        if n == 0 {
            ctx.nic.wait(Duration::from_millis(1))?;
        }
    }
    let seconds = sampler.elapsed(first.unwrap_or(start));
    Ok(Outcome {
        iters: got,
        seconds,
        peak_mbs: sampler.peak_mbs(),
        lat_us: Vec::new(),
        verdict: Verdict {
            checked: check,
            errors,
        },
        passive: false,
    })
}
