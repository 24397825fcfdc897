//! `rocex soak`: many mixed messages over RC QP pairs between two `rocexd`, every one
//! checked: SEND and SEND_WITH_IMM (a per-QP sequence number in the header or the
//! immediate, payload derived from it), WRITE_WITH_IMM (the immediate names the
//! sequence; the written bytes are checked), READ of a known pattern, FETCH_ADD on one
//! counter per responding daemon (the sum must add up and every returned original be
//! distinct) and CMP_SWAP chains (each swap expects the value the previous one stored).
//!
//! The process is the client of both daemons, so QP attributes are exchanged in memory.
//! Lanes alternate direction, so each daemon is requester on half the QPs and responder
//! on the other half. The run fails on any loss, duplicate, corruption, reordering,
//! broken atomic or error completion, and when nothing completes for `--stall` seconds.

mod counters;
mod lane;
mod layout;
mod plan;
mod setup;
mod tally;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use lane::Lane;
use layout::Layout;
use setup::{Link, Side};
use tally::{Atomics, RunInfo, Tally};

use crate::device::mtu_of;
use crate::progress::{Line, Stall};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Control socket of the first rocexd.
    #[arg(long)]
    socket_a: PathBuf,
    /// Control socket of the second rocexd.
    #[arg(long)]
    socket_b: PathBuf,
    /// RC QP pairs (lanes); even lanes send from A to B, odd lanes from B to A.
    #[arg(long, default_value_t = 16)]
    qps: u32,
    /// Messages in all, assigned to the lanes round-robin.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Requests in flight per QP, and receives posted per QP.
    #[arg(long, default_value_t = 32)]
    window: u32,
    /// Path MTU in bytes (256 to 4096).
    #[arg(long, default_value_t = 4096)]
    mtu: u32,
    /// Local ACK timeout exponent: 4.096 us x 2^N (10: 4.2 ms). Short, so that a lost
    /// last packet is resent soon.
    #[arg(long, default_value_t = 10)]
    timeout: u8,
    /// Seed of the message plan (operations, sizes, payloads).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds between progress lines on stderr.
    #[arg(long, default_value_t = 5.0)]
    progress: f64,
    /// Give up when nothing completes for this many seconds.
    #[arg(long, default_value_t = 60)]
    stall: u64,
    /// Print the summary as one JSON object on stdout (the line goes to stderr).
    #[arg(long)]
    json: bool,
    /// Keep every QP and buffer this many seconds after the summary, so that the daemons
    /// can be measured with everything still allocated.
    #[arg(long, default_value_t = 0.0)]
    hold: f64,
}

/// What every lane shares: the plan's seed, the window, the layout and the pattern.
#[derive(Debug)]
pub(crate) struct Env {
    seed: u64,
    window: u32,
    layout: Layout,
    pattern: Vec<u8>,
}

type Fallible<T> = Result<T, Box<dyn std::error::Error>>;

pub(crate) fn run(a: &Args) -> ExitCode {
    match soak(a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rocex soak: {e}");
            ExitCode::from(2)
        }
    }
}

/// Which lane and role a QP number belongs to.
#[derive(Debug, Clone, Copy)]
enum Role {
    Sender(usize),
    Receiver(usize),
}

fn soak(a: &Args) -> Fallible<bool> {
    if a.qps == 0 || a.messages == 0 || !(1..=4096).contains(&a.window) {
        return Err("--qps and --messages must be positive, --window 1 to 4096".into());
    }
    let link = Link {
        mtu: mtu_of(a.mtu)?,
        timeout: a.timeout,
    };
    let env = Env {
        seed: a.seed,
        window: a.window,
        layout: Layout::new(a.qps, a.window),
        pattern: plan::pattern(),
    };
    let stall = Duration::from_secs(a.stall);
    let mut sides = [
        Side::open(&a.socket_a, &env, a.qps)
            .map_err(|e| format!("{}: {e}", a.socket_a.display()))?,
        Side::open(&a.socket_b, &env, a.qps)
            .map_err(|e| format!("{}: {e}", a.socket_b.display()))?,
    ];
    let mut lanes = (0..a.qps)
        .map(|i| {
            let total = a.messages / u64::from(a.qps)
                + u64::from(u64::from(i) < a.messages % u64::from(a.qps));
            setup::lane(&sides, &env, link, i, total)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let roles: HashMap<(usize, u32), Role> = lanes
        .iter()
        .enumerate()
        .flat_map(|(i, l)| {
            [
                ((l.from, l.send_qp.qpn()), Role::Sender(i)),
                ((l.to(), l.recv_qp.qpn()), Role::Receiver(i)),
            ]
        })
        .collect();
    setup::prefault(&mut sides, &mut lanes, &env, stall)?;
    eprintln!(
        "soak: ready: {} QPs, window {}, MTU {}, ACK timeout exponent {} ({:?}), retry_cnt 7, \
         rnr_retry 7, {} messages",
        a.qps,
        a.window,
        a.mtu,
        a.timeout,
        Duration::from_nanos(4096u64 << a.timeout.min(31)),
        a.messages
    );
    let start = Instant::now();
    let mut t = Tally::default();
    let stalled = drive(a, &env, &mut sides, &mut lanes, &roles, &mut t, start)?;
    let elapsed = start.elapsed();
    let missing: u64 = lanes.iter().map(Lane::missing).sum();
    if t.completion_errors == 0 {
        t.lost = missing;
    } else {
        // The run stopped at the error: what was in flight then is not lost.
        t.note(format!(
            "stopped at an error completion, {missing} messages in flight"
        ));
    }
    if stalled {
        t.note(format!("nothing completed for {}s", a.stall));
        for l in lanes.iter().filter(|l| !l.finished()) {
            t.note(l.state());
        }
    }
    let counters = [
        sides[0].mr.read_u64(env.layout.counter() as usize)?,
        sides[1].mr.read_u64(env.layout.counter() as usize)?,
    ];
    let finished = lanes.iter().all(Lane::finished);
    let atomics = Atomics::judge(&mut t, counters, finished);
    let daemons = [sides[0].counters(), sides[1].counters()];
    let ok = finished && t.clean() && atomics.consistent(&t) && t.total() == a.messages;
    let info = RunInfo {
        messages: a.messages,
        qps: a.qps,
        window: a.window,
        mtu: a.mtu,
        timeout: a.timeout,
        seed: a.seed,
        elapsed,
    };
    for n in &t.notes {
        eprintln!("soak: {n}");
    }
    let mut line = tally::line(&t, &atomics, &info, ok);
    for (name, d) in ["a", "b"].iter().zip(&daemons) {
        if !d.is_null() {
            line += &format!(" {name}:[{}]", counters::brief(d));
        }
    }
    if a.json {
        eprintln!("{line}");
        let mut j = tally::json(&t, &atomics, &info, ok);
        j["daemons"] = serde_json::Value::from(daemons.to_vec());
        println!("{j}");
    } else {
        println!("{line}");
    }
    std::thread::sleep(Duration::from_secs_f64(a.hold.max(0.0)));
    drop(lanes);
    Ok(ok)
}

/// Nothing completed for this long is said at once (the run gives up after `--stall`).
const STALL_NOTICE: Duration = Duration::from_secs(5);

/// ` retransmitted=N`: both daemons' retransmissions, as their counters say.
fn retransmitted(sides: &[Side; 2]) -> String {
    let n: u64 = sides
        .iter()
        .map(|s| {
            s.counters()["engine"]["retransmitted_pkts"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    format!(" retransmitted={n}")
}

/// Posts, polls and checks until every lane is finished (false), an error completion
/// ends the run (false), or nothing completes for `--stall` seconds (true).
fn drive(
    a: &Args,
    env: &Env,
    sides: &mut [Side; 2],
    lanes: &mut [Lane],
    roles: &HashMap<(usize, u32), Role>,
    t: &mut Tally,
    start: Instant,
) -> Fallible<bool> {
    let stall = Duration::from_secs(a.stall);
    let every = Duration::from_secs_f64(a.progress.max(0.1));
    let (mut last_done, mut next_report) = (Instant::now(), start + every);
    // On a terminal the progress is one live line; elsewhere a line every `--progress`.
    let mut line = Line::new();
    let mut quiet = Stall::new(STALL_NOTICE.min(stall));
    let mut idle = 0u32;
    loop {
        for lane in lanes.iter_mut() {
            lane.fill(env, [&sides[0].mr, &sides[1].mr])?;
        }
        let mut got = 0;
        for (side, s) in sides.iter_mut().enumerate() {
            let wcs = s.cq.poll(512)?;
            got += wcs.len();
            for wc in &wcs {
                match roles.get(&(side, wc.qp_num)) {
                    Some(Role::Sender(i)) => lanes[*i].on_send(wc, env, &s.mr, t),
                    Some(Role::Receiver(i)) => {
                        let lane = &mut lanes[*i];
                        lane.on_recv(wc, env, &s.mr, t);
                        lane.post_receives(env, &s.mr)?;
                    }
                    None => {
                        t.completion_errors += 1;
                        t.note(format!("side {side}: completion of an unknown QP: {wc:?}"));
                    }
                }
            }
        }
        let now = Instant::now();
        if line.due() {
            let text = format!(
                "{}{}",
                t.progress(a.messages, now - start),
                retransmitted(sides)
            );
            line.draw(&text);
        } else if !line.live() && now >= next_report {
            eprintln!(
                "{}{}",
                t.progress(a.messages, now - start),
                retransmitted(sides)
            );
            next_report = now + every;
        }
        if t.completion_errors > 0 || lanes.iter().all(Lane::finished) {
            return Ok(false);
        }
        if got > 0 {
            last_done = now;
            quiet.progressed();
            idle = 0;
        } else if now - last_done > stall {
            return Ok(true);
        } else {
            if let Some(note) = quiet.check(|d| {
                format!(
                    "soak: nothing completed for {} s ({} of {} done{}); giving up after {} s",
                    d.as_secs(),
                    t.total(),
                    a.messages,
                    retransmitted(sides),
                    a.stall
                )
            }) {
                line.say(&note);
            }
            // Spin briefly (completions are often just behind), then yield the CPU to
            // the daemons.
            idle += 1;
            if idle > 64 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}
