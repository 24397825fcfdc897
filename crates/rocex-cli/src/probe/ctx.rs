//! The probe's device: an engine on a backend, one PD, CQ, MR and QP, and the steps both
//! roles take with them (the C probe's `setup()`, the QP line exchange, INIT -> RTR -> RTS,
//! posting receives, waiting for and printing completions).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rocex_io::Driver;
use rocex_proto::verbs::{
    AddressVector, AttrMask, QpAttr, QpCap, QpState, QpType, RecvWr, Sge, WcStatus, WorkCompletion,
};
use rocex_proto::{Access, Engine, PdId, QpInit, Region, VecRegion};

use super::line::{Line, PeerInfo, gid_hex, parse_qp_line};
use super::plan::{Op, Plan, mtu_of};
use super::status::{WC_WITH_IMM, WC_WITH_INV, opcode_str, status_str};
use super::{ATOMIC_AREA, ATOMIC_INIT, BASE, Res, fatal, pat_client, pat_server};
use crate::oob;

/// The device, its QP and its memory.
pub(super) struct Ctx {
    pub(super) role: &'static str,
    pub(super) driver: Driver,
    pub(super) pd: PdId,
    pub(super) cq: u32,
    pub(super) qpn: u32,
    pub(super) region: Arc<VecRegion>,
    pub(super) lkey: u32,
    pub(super) rkey: u32,
    pub(super) len: u64,
}

impl Ctx {
    /// `setup()` of the C probe: memory filled with the side's pattern, MR, CQ, QP in INIT.
    pub(super) fn setup(
        role: &'static str,
        local: IpAddr,
        p: &Plan,
        server: bool,
        inject: Option<rocex_io::Faults>,
    ) -> Res<Self> {
        let mut e = Engine::new(crate::device::config(local));
        let pd = e.alloc_pd();
        let depth = p.ops.len() as u32 * p.iters + 16;
        let cq = e.create_cq((depth * 2 + 16) as usize)?;
        let nrecv = if server { p.recvs() } else { 0 };
        let s = p.size;
        let len = 2 * s + ATOMIC_AREA + u64::from(nrecv) * s;
        let mut mem: Vec<u8> = (0..len)
            .map(|i| {
                if server {
                    pat_server(i % s)
                } else {
                    pat_client(i % s)
                }
            })
            .collect();
        if server {
            mem[..s as usize].fill(0);
            mem[(2 * s + ATOMIC_AREA) as usize..].fill(0);
        } else {
            mem[s as usize..2 * s as usize].fill(0);
        }
        let a = (2 * s) as usize;
        let init = if server { ATOMIC_INIT } else { 0 };
        mem[a..a + 8].copy_from_slice(&init.to_ne_bytes());
        mem[a + 8..a + 16].fill(0);
        let region = Arc::new(VecRegion::new(len as usize));
        region.write(0, &mem);

        let mut access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        if !p.uc {
            access |= Access::REMOTE_ATOMIC;
        }
        if server && p.has(Op::SendInv) {
            access |= Access::MW_BIND;
        }
        if server && p.has(Op::Flush) {
            access |= Access::FLUSH_GLOBAL;
        }
        let keys = match e.reg_mr(pd, BASE, len, access, region.clone()) {
            Ok(k) => k,
            Err(err) => return fatal(format!("reg_mr(access=0x{:x}): {err}", access.bits())),
        };
        let qpn = e.create_qp(QpInit {
            qp_type: if p.uc { QpType::Uc } else { QpType::Rc },
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap {
                max_send_wr: depth,
                max_recv_wr: nrecv + 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        })?;
        let mut qp_access = Access::REMOTE_WRITE | Access::REMOTE_READ;
        if !p.uc {
            qp_access |= Access::REMOTE_ATOMIC;
        }
        // rxe checks FLUSH against the QP's access flags, then the MR's.
        if server && p.has(Op::Flush) {
            qp_access |= Access::FLUSH_GLOBAL | Access::FLUSH_PERSISTENT;
        }
        let at = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            qp_access_flags: qp_access,
            ..QpAttr::default()
        };
        if let Err(err) = e.modify_qp(
            qpn,
            &at,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        ) {
            return fatal(format!("modify INIT: {err}"));
        }
        let driver = crate::device::driver(e, local, inject)?;
        Ok(Self {
            role,
            driver,
            pd,
            cq,
            qpn,
            region,
            lkey: keys.lkey,
            rkey: keys.rkey,
            len,
        })
    }

    pub(super) fn connect(&mut self, p: &Plan, rem: &PeerInfo, my_psn: u32) -> Res<()> {
        let e = &mut self.driver.engine;
        let mut at = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: mtu_of(p.mtu)?,
            dest_qp_num: rem.qpn,
            rq_psn: rem.psn,
            max_dest_rd_atomic: 16,
            min_rnr_timer: p.min_rnr,
            ah_attr: Some(AddressVector {
                dest: oob::ip_of(rem.gid),
            }),
            ..QpAttr::default()
        };
        let mut mask = AttrMask::STATE
            | AttrMask::AV
            | AttrMask::PATH_MTU
            | AttrMask::DEST_QPN
            | AttrMask::RQ_PSN;
        if !p.uc {
            mask = mask | AttrMask::MAX_DEST_RD_ATOMIC | AttrMask::MIN_RNR_TIMER;
        }
        if let Err(err) = e.modify_qp(self.qpn, &at, mask) {
            return fatal(format!("modify RTR: {err}"));
        }
        at.qp_state = QpState::Rts;
        at.sq_psn = my_psn;
        at.timeout = p.timeout;
        at.retry_cnt = p.retry;
        at.rnr_retry = p.rnr_retry;
        at.max_rd_atomic = 16;
        let mut mask = AttrMask::STATE | AttrMask::SQ_PSN;
        if !p.uc {
            mask = mask
                | AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::MAX_QP_RD_ATOMIC;
        }
        if let Err(err) = e.modify_qp(self.qpn, &at, mask) {
            return fatal(format!("modify RTS: {err}"));
        }
        Ok(())
    }

    pub(super) fn send_qp_line(
        &self,
        line: &mut Line,
        local: IpAddr,
        psn: u32,
        rkey: u32,
    ) -> Res<()> {
        let gh = gid_hex(&oob::gid_of(local));
        line.send(&format!(
            "QP {:06x} {:06x} {gh} {rkey:08x} {BASE:016x} {}",
            self.qpn, psn, self.len
        ))?;
        say!(
            self.role,
            "local  QPN 0x{:06x} PSN 0x{psn:06x} GID {gh} (index 1) rkey 0x{rkey:08x}",
            self.qpn
        );
        Ok(())
    }

    pub(super) fn recv_qp_line(&mut self, line: &mut Line, pump: bool) -> Res<PeerInfo> {
        let l = line.recv(if pump { Some(&mut self.driver) } else { None })?;
        let Some(p) = parse_qp_line(&l) else {
            return fatal(format!("bad QP line: {l}"));
        };
        say!(
            self.role,
            "remote QPN 0x{:06x} PSN 0x{:06x} GID {} rkey 0x{:08x} vaddr 0x{:x} len {}",
            p.qpn,
            p.psn,
            gid_hex(&p.gid),
            p.rkey,
            p.vaddr,
            p.len
        );
        Ok(p)
    }

    pub(super) fn post_recvs(&mut self, p: &Plan, n: u32) -> Res<()> {
        for i in 0..n {
            let now = self.driver.now();
            let wr = RecvWr::new(
                1000 + u64::from(i),
                [Sge {
                    addr: BASE + 2 * p.size + ATOMIC_AREA + u64::from(i) * p.size,
                    length: p.size as u32,
                    lkey: self.lkey,
                }],
            );
            if let Err(err) = self.driver.engine.post_recv(now, self.qpn, wr) {
                return fatal(format!("post_recv: {err}"));
            }
        }
        say!(self.role, "posted {n} receives");
        Ok(())
    }

    /// One completion within `timeout`, the engine running meanwhile.
    pub(super) fn get_wc(&mut self, timeout: Duration) -> Res<Option<WorkCompletion>> {
        let cq = self.cq;
        Ok(self.driver.run_until(timeout, |e| e.poll_cq(cq))?)
    }

    pub(super) fn print_wc(&self, what: &str, wc: &WorkCompletion) {
        let mut flags = 0;
        let mut extra = String::new();
        if let Some(imm) = wc.imm_data {
            flags |= WC_WITH_IMM;
            extra = format!(" imm=0x{imm:08x}");
        }
        if let Some(r) = wc.invalidated_rkey {
            flags |= WC_WITH_INV;
            if extra.is_empty() {
                extra = format!(" inv_rkey=0x{r:08x}");
            }
        }
        let ok = wc.status == WcStatus::Success;
        say!(
            self.role,
            "CQE {what} status={}({}) opcode={} byte_len={} qp=0x{:06x} flags=0x{flags:x}{extra}",
            status_str(wc.status as i32),
            wc.status as i32,
            if ok { opcode_str(wc.opcode) } else { "-" },
            wc.byte_len,
            wc.qp_num
        );
    }

    pub(super) fn read_mem(&self, off: u64, len: u64) -> Vec<u8> {
        let mut b = vec![0u8; len as usize];
        self.region.read(off, &mut b);
        b
    }

    pub(super) fn read_u64(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.region.read(off, &mut b);
        u64::from_ne_bytes(b)
    }
}

pub(super) fn pick_psn(p: &Plan, e: &mut Engine) -> u32 {
    match p.psn {
        Some(v) => v & 0xff_ffff,
        None => e.random_psn(),
    }
}
