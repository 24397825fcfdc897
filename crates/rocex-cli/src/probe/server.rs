//! The responder: takes the client's plan, connects, posts the receives (late, to provoke
//! RNR, when asked), binds a memory window for SEND_WITH_INV, and once the client is done
//! checks every receive completion and what the client's WRITEs and atomics left in memory.

use std::time::Duration;

use rocex_proto::Access;
use rocex_proto::verbs::{WcOpcode, WcStatus};

use super::ctx::{Ctx, pick_psn};
use super::line::{Line, canonical, tcp_accept};
use super::plan::{Op, Plan, parse_num, parse_ops};
use super::{
    ATOMIC_AREA, ATOMIC_WRITE_VALUE, BASE, Common, Fatal, IMM_BASE, PROTO_VERSION, Res, fatal,
    pat_client,
};

const ROLE: &str = "server";

pub(super) fn run(a: &Common) -> Res<bool> {
    let stream = tcp_accept(a.port)?;
    let local = canonical(stream.local_addr()?.ip());
    let mut line = Line::new(stream, Duration::from_secs(a.wait))?;
    let p = read_plan(&mut line)?;

    let mut c = Ctx::setup(ROLE, local, &p, true, a.inject)?;
    let psn = pick_psn(&p, &mut c.driver.engine);
    let rem = c.recv_qp_line(&mut line, true)?;
    c.send_qp_line(&mut line, local, psn, c.rkey)?;
    c.connect(&p, &rem, psn)?;

    let nrecv = p.recvs();
    if p.rnr_delay == 0 {
        c.post_recvs(&p, nrecv)?;
    }
    let inv_rkey = if p.has(Op::SendInv) {
        bind_window(&mut c, &p)?
    } else {
        0
    };
    line.send(&format!("READY {inv_rkey:08x}"))?;
    if p.rnr_delay != 0 {
        say!(ROLE, "posting receives after {} ms (RNR)", p.rnr_delay);
        c.driver
            .linger(Duration::from_millis(u64::from(p.rnr_delay)))?;
        c.post_recvs(&p, nrecv)?;
    }

    // Receive completions wait in the CQ while the client runs; DONE says it has finished.
    let l = line.recv(Some(&mut c.driver))?;
    let f: Vec<&str> = l.split_whitespace().collect();
    let atomic_expect = match (f.first(), f.len()) {
        (Some(&"DONE"), 4) if f[1].parse::<u32>().is_ok() && f[2].parse::<u32>().is_ok() => {
            u64::from_str_radix(f[3], 16).map_err(|_| Fatal(format!("bad DONE line: {l}")))?
        }
        _ => return fatal(format!("bad DONE line: {l}")),
    };
    let want = if p.bad_rkey || p.expect.is_some() {
        0
    } else {
        nrecv as usize
    };
    let r = Receives::collect(&mut c, &p, want, inv_rkey)?;
    let why = verdict(&c, &p, &r, want, atomic_expect, inv_rkey);
    let ok = why.is_none();
    let got = r.got;
    say!(
        ROLE,
        "server {}: {got} receive completions{}{}",
        if ok { "ok" } else { "FAILED" },
        if ok { "" } else { ", " },
        why.unwrap_or_default()
    );
    line.send(&format!("RESULT {} {got}", if ok { 0 } else { 1 }))?;
    // The client may still retransmit a request whose ACK was lost.
    c.driver.linger(Duration::from_millis(300))?;
    crate::device::report_faults("rocex probe", c.driver.fault_counters());
    Ok(ok)
}

/// The hello and the PLAN line: the client's operations, size, iterations, MTU and flags.
fn read_plan(line: &mut Line) -> Res<Plan> {
    let l = line.recv(None)?;
    if l.trim() != format!("ROCEX-PROBE {PROTO_VERSION}") {
        return fatal(format!("bad hello: {l}"));
    }
    let l = line.recv(None)?;
    let f: Vec<&str> = l.split_whitespace().collect();
    if f.len() != 6 || f[0] != "PLAN" {
        return fatal(format!("bad PLAN line: {l}"));
    }
    let bad = || Fatal(format!("bad PLAN line: {l}"));
    let mut p = Plan {
        ops: parse_ops(f[1])?,
        size: f[2].parse().map_err(|_| bad())?,
        iters: f[3].parse().map_err(|_| bad())?,
        mtu: f[4].parse().map_err(|_| bad())?,
        uc: false,
        bad_rkey: false,
        rnr_delay: 0,
        min_rnr: 12,
        psn: None,
        expect: None,
        timeout: 17,
        retry: 7,
        rnr_retry: 7,
        flush_persistent: false,
    };
    for t in f[5].split(',') {
        if t == "uc" {
            p.uc = true;
        } else if t == "badrkey" {
            p.bad_rkey = true;
        } else if let Some(v) = t.strip_prefix("rnrdelay=") {
            p.rnr_delay = v.parse().unwrap_or(0);
        } else if let Some(v) = t.strip_prefix("minrnr=") {
            p.min_rnr = v.parse().unwrap_or(12);
        } else if let Some(v) = t.strip_prefix("psn=") {
            p.psn = parse_num(v).ok().map(|v| (v as u32) & 0xff_ffff);
        } else if let Some(v) = t.strip_prefix("expect=") {
            p.expect = v.parse().ok();
        }
    }
    if p.size == 0 || p.size % 8 != 0 {
        return fatal(format!("bad size in PLAN line: {l}"));
    }
    say!(
        ROLE,
        "plan: ops={} size={} iters={} mtu={} flags={}",
        f[1],
        p.size,
        p.iters,
        p.mtu,
        f[5]
    );
    Ok(p)
}

/// A type-2 memory window over the WRITE area, for SEND_WITH_INV; its rkey.
fn bind_window(c: &mut Ctx, p: &Plan) -> Res<u32> {
    let mw = c.driver.engine.alloc_mw(c.pd);
    let mw = match mw {
        Ok(k) => k,
        Err(e) => return fatal(format!("alloc_mw: {e}")),
    };
    let inv_rkey = match c.driver.engine.bind_mw(
        c.pd,
        mw,
        c.lkey,
        BASE,
        p.size,
        Access::REMOTE_WRITE | Access::REMOTE_READ,
    ) {
        Ok(k) => k,
        Err(e) => return fatal(format!("bind_mw: {e}")),
    };
    say!(
        ROLE,
        "CQE bind_mw status=success(0) opcode=BIND_MW byte_len=0 qp=0x{:06x} flags=0x0",
        c.qpn
    );
    say!(ROLE, "memory window rkey 0x{inv_rkey:08x}");
    Ok(inv_rkey)
}

/// What the receive completions showed.
struct Receives {
    got: usize,
    errors: usize,
    /// Immediates came in the order the client sent them.
    imm_ok: bool,
    /// A SEND_WITH_INV invalidated the window.
    inv_seen: bool,
    /// Received messages whose bytes are not the client's pattern.
    data_bad: usize,
}

impl Receives {
    /// Up to `want` receive completions, each printed and checked, then whatever else the CQ
    /// holds (errors after a NAK, flushes).
    fn collect(c: &mut Ctx, p: &Plan, want: usize, inv_rkey: u32) -> Res<Self> {
        let nrecv = p.recvs();
        let mut r = Self {
            got: 0,
            errors: 0,
            imm_ok: true,
            inv_seen: false,
            data_bad: 0,
        };
        let mut imm_next = IMM_BASE;
        while r.got < want {
            let Some(wc) = c.get_wc(Duration::from_secs(5))? else {
                break;
            };
            r.got += 1;
            c.print_wc("recv", &wc);
            if wc.status != WcStatus::Success {
                r.errors += 1;
                continue;
            }
            if let Some(imm) = wc.imm_data {
                if imm != imm_next {
                    r.imm_ok = false;
                }
                imm_next = imm_next.wrapping_add(1);
            }
            if inv_rkey != 0 && wc.imm_data.is_none() && wc.invalidated_rkey == Some(inv_rkey) {
                r.inv_seen = true;
            }
            if wc.opcode == WcOpcode::Recv && (1000..1000 + u64::from(nrecv)).contains(&wc.wr_id) {
                let off = 2 * p.size + ATOMIC_AREA + (wc.wr_id - 1000) * p.size;
                let rb = c.read_mem(off, u64::from(wc.byte_len));
                if rb
                    .iter()
                    .enumerate()
                    .any(|(i, &b)| b != pat_client(i as u64))
                {
                    r.data_bad += 1;
                }
            }
        }
        // Whatever else is there (errors after a NAK, flushes).
        while let Some(wc) = c.get_wc(Duration::from_millis(300))? {
            c.print_wc("extra", &wc);
        }
        Ok(r)
    }
}

/// Why the run failed (the last check that failed), or `None`: the receive completions and,
/// when the run was to succeed, the WRITE area, the received data, the atomic words and the
/// invalidation.
fn verdict(
    c: &Ctx,
    p: &Plan,
    r: &Receives,
    want: usize,
    atomic_expect: u64,
    inv_rkey: u32,
) -> Option<String> {
    let mut why = None;
    if r.got < want {
        why = Some(format!("only {} of {want} receive completions", r.got));
    }
    if r.errors > 0 && want > 0 {
        why = Some(format!("{} receive errors", r.errors));
    }
    if !r.imm_ok {
        why = Some("immediate data out of order".into());
    }
    if !p.bad_rkey && p.expect.is_none() {
        if p.has(Op::Write) || p.has(Op::WriteImm) {
            let w = c.read_mem(0, p.size);
            if let Some(i) = (0..p.size).find(|&i| w[i as usize] != pat_client(i)) {
                why = Some(format!("WRITE data wrong at {i}"));
            }
        }
        if r.data_bad > 0 {
            why = Some(format!("{} received messages with wrong data", r.data_bad));
        }
        let a0 = c.read_u64(2 * p.size);
        let a1 = c.read_u64(2 * p.size + 8);
        if (p.has(Op::Cas) || p.has(Op::Faa)) && a0 != atomic_expect {
            why = Some(format!("atomic word 0x{a0:x} expected 0x{atomic_expect:x}"));
        }
        if p.has(Op::AtomicWrite) && a1 != ATOMIC_WRITE_VALUE {
            why = Some(format!("atomic_write word 0x{a1:x}"));
        }
        if p.has(Op::SendInv) && !r.inv_seen {
            why = Some(format!("no completion invalidating 0x{inv_rkey:08x}"));
        }
    }
    why
}
