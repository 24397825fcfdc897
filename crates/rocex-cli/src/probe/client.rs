//! The requester: sends the plan, connects, posts each operation in turn, checks each
//! completion (and the data a READ or an atomic brought back), and compares notes with the
//! server at the end. The first error completion ends the run: the QP is in error then.

use std::net::IpAddr;
use std::time::Duration;

use rocex_proto::Region;
use rocex_proto::verbs::{Remote, SendOp, SendWr, Sge, WcStatus};

use super::ctx::{Ctx, pick_psn};
use super::line::{Line, PeerInfo, canonical, tcp_connect};
use super::plan::{Op, Plan};
use super::status::status_str;
use super::{
    ATOMIC_INIT, ATOMIC_WRITE_VALUE, BASE, ClientArgs, IMM_BASE, PROTO_VERSION, Res, fatal,
    pat_server,
};

const ROLE: &str = "client";
/// What each FETCH_ADD adds.
const FETCH_ADD: u64 = 1;

pub(super) fn run(a: &ClientArgs) -> Res<bool> {
    let p = Plan::of_client(a)?;
    let stream = tcp_connect(&a.peer, a.common.port, a.common.wait)?;
    let local = canonical(stream.local_addr()?.ip());
    let mut line = Line::new(stream, Duration::from_secs(a.common.wait))?;
    line.send(&format!("ROCEX-PROBE {PROTO_VERSION}"))?;
    line.send(&format!(
        "PLAN {} {} {} {} {}",
        p.ops_list(),
        p.size,
        p.iters,
        p.mtu,
        p.flags()
    ))?;

    let mut c = Ctx::setup(ROLE, local, &p, false, a.common.inject)?;
    let (rem, inv_rkey) = connect(&mut c, &mut line, local, &p)?;
    let mut run = Run::new(&p, &rem, inv_rkey);
    run.all_ops(&mut c, &p)?;
    // Late completions (flushes after an error).
    while let Some(wc) = c.get_wc(Duration::from_millis(200))? {
        c.print_wc("extra", &wc);
    }
    if let Some(e) = p.expect
        && !run.expect_seen
    {
        say!(ROLE, "expected status {} not seen", status_str(e));
        run.ok = false;
    }
    finish(&mut c, &mut line, run)
}

/// The QP line exchange (the client's first), RTR and RTS, and the server's READY line with
/// the rkey a SEND_WITH_INV invalidates.
fn connect(c: &mut Ctx, line: &mut Line, local: IpAddr, p: &Plan) -> Res<(PeerInfo, u32)> {
    let psn = pick_psn(p, &mut c.driver.engine);
    c.send_qp_line(line, local, psn, c.rkey)?;
    let rem = c.recv_qp_line(line, true)?;
    c.connect(p, &rem, psn)?;
    let l = line.recv(Some(&mut c.driver))?;
    let inv_rkey = match l
        .strip_prefix("READY ")
        .and_then(|h| u32::from_str_radix(h.trim(), 16).ok())
    {
        Some(k) => k,
        None => return fatal(format!("bad READY line: {l}")),
    };
    Ok((rem, inv_rkey))
}

/// Where the operations go, and what the run has seen so far.
struct Run {
    /// The rkey used (flipped with `--bad-rkey`).
    rkey: u32,
    inv_rkey: u32,
    /// The server's WRITE, READ and atomic areas.
    r_write: u64,
    r_read: u64,
    r_atom: u64,
    /// The value the server's atomic word holds now.
    atomic_cur: u64,
    /// The next immediate.
    imm: u32,
    n_ok: u32,
    n_err: u32,
    ok: bool,
    expect_seen: bool,
}

impl Run {
    /// What a COMPARE_SWAP writes: the atomic word's current value plus 0x1000.
    fn swap(&self) -> u64 {
        self.atomic_cur.wrapping_add(0x1000)
    }

    fn new(p: &Plan, rem: &PeerInfo, inv_rkey: u32) -> Self {
        let rkey = if p.bad_rkey {
            rem.rkey ^ 0x00ff_ff00
        } else {
            rem.rkey
        };
        if p.bad_rkey {
            say!(
                ROLE,
                "using bad rkey 0x{rkey:08x} (valid: 0x{:08x})",
                rem.rkey
            );
        }
        let s = p.size;
        Self {
            rkey,
            inv_rkey,
            r_write: rem.vaddr,
            r_read: rem.vaddr + s,
            r_atom: rem.vaddr + 2 * s,
            atomic_cur: ATOMIC_INIT,
            imm: IMM_BASE,
            n_ok: 0,
            n_err: 0,
            ok: true,
            expect_seen: false,
        }
    }

    /// Every operation of the plan, `iters` times each (SEND_WITH_INV once), until the first
    /// that does not complete successfully.
    fn all_ops(&mut self, c: &mut Ctx, p: &Plan) -> Res<()> {
        for (k, &op) in p.ops.iter().enumerate() {
            let iters = if op == Op::SendInv { 1 } else { p.iters };
            for it in 0..iters {
                if !self.one(c, p, op, k, it)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Posts one operation and checks its completion; false when the run must stop.
    fn one(&mut self, c: &mut Ctx, p: &Plan, op: Op, k: usize, it: u32) -> Res<bool> {
        let what = format!("{}#{it}", op.name());
        let wr = self.work_request(c, p, op, k as u64 * 1000 + u64::from(it));
        let now = c.driver.now();
        if let Err(e) = c.driver.engine.post_send(now, c.qpn, wr) {
            return fatal(format!("post {what}: {e}"));
        }
        let Some(wc) = c.get_wc(Duration::from_secs(60))? else {
            say!(ROLE, "CQE {what}: no completion within 60 s");
            self.ok = false;
            return Ok(false);
        };
        c.print_wc(&what, &wc);
        if wc.status != WcStatus::Success {
            self.n_err += 1;
            if p.expect == Some(wc.status as i32) {
                self.expect_seen = true;
                say!(
                    ROLE,
                    "expected status {} seen",
                    status_str(wc.status as i32)
                );
            } else {
                self.ok = false;
            }
            return Ok(false); // the QP is in error now
        }
        self.n_ok += 1;
        if matches!(op, Op::SendImm | Op::WriteImm) {
            self.imm = self.imm.wrapping_add(1);
        }
        self.check(c, p, op, &what);
        Ok(true)
    }

    /// The work request of `op`: its local buffer, and the server's area it targets. A READ's
    /// buffer is cleared first, so that the check sees what the READ brought.
    fn work_request(&self, c: &Ctx, p: &Plan, op: Op, wr_id: u64) -> SendWr {
        let s = p.size;
        let (l_send, l_read, l_atom) = (BASE, BASE + s, BASE + 2 * s);
        let mut sge = Sge {
            addr: l_send,
            length: s as u32,
            lkey: c.lkey,
        };
        let rkey = self.rkey;
        let remote = |addr| Remote { addr, rkey };
        let sop = match op {
            Op::Send => SendOp::Send,
            Op::SendImm => SendOp::SendWithImm(self.imm),
            Op::SendInv => SendOp::SendWithInv(self.inv_rkey),
            Op::Write => SendOp::Write(remote(self.r_write)),
            Op::WriteImm => SendOp::WriteWithImm(remote(self.r_write), self.imm),
            Op::Read => {
                c.region.write(s, &vec![0u8; s as usize]);
                sge.addr = l_read;
                SendOp::Read(remote(self.r_read))
            }
            Op::Cas => {
                sge.addr = l_atom;
                sge.length = 8;
                SendOp::CompareSwap {
                    remote: remote(self.r_atom),
                    compare: self.atomic_cur,
                    swap: self.swap(),
                }
            }
            Op::Faa => {
                sge.addr = l_atom;
                sge.length = 8;
                SendOp::FetchAdd {
                    remote: remote(self.r_atom),
                    add: FETCH_ADD,
                }
            }
            Op::AtomicWrite => SendOp::AtomicWrite {
                remote: remote(self.r_atom + 8),
                value: ATOMIC_WRITE_VALUE,
            },
            Op::Flush => SendOp::Flush {
                remote: remote(self.r_write),
                len: s as u32,
                placement: if p.flush_persistent { 2 } else { 1 },
                selectivity: 0,
            },
        };
        let sges = if matches!(op, Op::AtomicWrite | Op::Flush) {
            Vec::new()
        } else {
            vec![sge]
        };
        SendWr::new(wr_id, sop, sges)
    }

    /// What a successful READ or atomic brought back: the server's pattern, or the atomic
    /// word's previous value (which the operation then changed).
    fn check(&mut self, c: &Ctx, p: &Plan, op: Op, what: &str) {
        let s = p.size;
        if op == Op::Read {
            let got = c.read_mem(s, s);
            if let Some(i) = (0..s).find(|&i| got[i as usize] != pat_server(i % s)) {
                say!(
                    ROLE,
                    "READ data wrong at offset {i}: 0x{:02x}",
                    got[i as usize]
                );
                self.ok = false;
            }
        }
        if matches!(op, Op::Cas | Op::Faa) {
            let got = c.read_u64(2 * s);
            let atomic_cur = self.atomic_cur;
            if got != atomic_cur {
                say!(ROLE, "{what} returned 0x{got:x}, expected 0x{atomic_cur:x}");
                self.ok = false;
            } else {
                say!(ROLE, "{what} returned 0x{got:x}");
            }
            self.atomic_cur = if op == Op::Cas {
                self.swap()
            } else {
                atomic_cur.wrapping_add(FETCH_ADD)
            };
        }
    }
}

/// DONE with the client's tally, the server's RESULT, the verdict of both, and a linger for
/// what the peer may still retransmit.
fn finish(c: &mut Ctx, line: &mut Line, run: Run) -> Res<bool> {
    let Run {
        n_ok,
        n_err,
        atomic_cur,
        mut ok,
        ..
    } = run;
    line.send(&format!("DONE {n_ok} {n_err} {atomic_cur:016x}"))?;
    let l = line.recv(Some(&mut c.driver))?;
    let f: Vec<&str> = l.split_whitespace().collect();
    let (srv_rc, srv_n) = match (f.first(), f.get(1), f.get(2)) {
        (Some(&"RESULT"), Some(rc), Some(n)) => match (rc.parse::<i32>(), n.parse::<i32>()) {
            (Ok(rc), Ok(n)) => (rc, n),
            _ => return fatal(format!("bad RESULT line: {l}")),
        },
        _ => return fatal(format!("bad RESULT line: {l}")),
    };
    if srv_rc != 0 {
        ok = false;
    }
    say!(
        ROLE,
        "client {}: {n_ok} ok, {n_err} errors; server {} ({srv_n} receive completions)",
        if ok { "ok" } else { "FAILED" },
        if srv_rc != 0 { "FAILED" } else { "ok" }
    );
    // Answer what the peer may still retransmit (a lost ACK of ours).
    c.driver.linger(Duration::from_millis(200))?;
    crate::device::report_faults("rocex probe", c.driver.fault_counters());
    Ok(ok)
}
