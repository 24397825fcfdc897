//! [`Nic`] on an engine in this process, on rocex-io's UDP port at the exchange's address
//! (what the rxe interop runs use: no daemon needed).

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rocex_io::{Driver, FaultCounters};
use rocex_proto::verbs::{AttrMask, Mtu, QpAttr, QpCap, QpType, RecvWr, SendWr, WorkCompletion};
use rocex_proto::{Access, Counters, PdId, Region, VecRegion};

use super::nic::{MrKeys, Nic};
use crate::device::{self, PortArgs, Post, verbs_err};

/// Where MR `i` is registered: far apart so that the regions never overlap.
const fn base_of(i: usize) -> u64 {
    0x1000_0000_0000 + ((i as u64) << 36)
}

pub(crate) struct LocalNic {
    driver: Driver,
    local: IpAddr,
    pd: PdId,
    /// The CQs in creation order: each QP uses the last made before it.
    cqs: Vec<u32>,
    /// The CQ the next poll starts at, so that none is left behind.
    next_cq: usize,
    mrs: Vec<(u64, Arc<VecRegion>)>,
    qps: Vec<u32>,
    busy_poll: bool,
}

impl LocalNic {
    /// An engine on `local`'s RoCE port; `busy_poll` makes waits spin (latency tests);
    /// `inject` faults what it sends.
    pub(crate) fn open(
        local: IpAddr,
        busy_poll: bool,
        port: &PortArgs,
        inject: Option<rocex_io::Faults>,
    ) -> io::Result<Self> {
        let mut driver = crate::device::open_driver(local, port, inject)?;
        let pd = driver.engine.alloc_pd();
        driver.busy_poll(busy_poll);
        Ok(Self {
            driver,
            local,
            pd,
            cqs: Vec::new(),
            next_cq: 0,
            mrs: Vec::new(),
            qps: Vec::new(),
            busy_poll,
        })
    }

    fn qpn(&self, qp: usize) -> io::Result<u32> {
        self.qps
            .get(qp)
            .copied()
            .ok_or_else(|| io::Error::other(format!("no QP {qp}")))
    }

    fn mr(&self, mr: usize) -> io::Result<&VecRegion> {
        self.mrs
            .get(mr)
            .map(|(_, r)| &**r)
            .ok_or_else(|| io::Error::other(format!("no MR {mr}")))
    }
}

/// Whether `[offset, offset + n)` lies in a region of `len` bytes.
fn in_bounds(offset: u64, n: usize, len: u64) -> io::Result<()> {
    if offset.checked_add(n as u64).is_none_or(|e| e > len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "access outside the memory region",
        ));
    }
    Ok(())
}

impl Nic for LocalNic {
    fn gid(&self) -> [u8; 16] {
        crate::oob::gid_of(self.local)
    }

    fn port_mtu(&self) -> Mtu {
        Mtu::M4096
    }

    fn random_psn(&mut self) -> u32 {
        self.driver.engine.random_psn()
    }

    fn reg_mr(&mut self, len: u64) -> io::Result<MrKeys> {
        let region = Arc::new(VecRegion::new(len as usize));
        let addr = base_of(self.mrs.len());
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_ATOMIC;
        let keys = self
            .driver
            .engine
            .reg_mr(self.pd, addr, len, access, region.clone())
            .map_err(verbs_err)?;
        self.mrs.push((addr, region));
        Ok(MrKeys {
            addr,
            lkey: keys.lkey,
            rkey: keys.rkey,
        })
    }

    fn read(&self, mr: usize, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let r = self.mr(mr)?;
        in_bounds(offset, buf.len(), r.len())?;
        r.read(offset, buf);
        Ok(())
    }

    fn write(&self, mr: usize, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = self.mr(mr)?;
        in_bounds(offset, data.len(), r.len())?;
        r.write(offset, data);
        Ok(())
    }

    fn create_cq(&mut self, cqe: u32) -> io::Result<()> {
        let cq = self
            .driver
            .engine
            .create_cq(cqe as usize)
            .map_err(verbs_err)?;
        self.cqs.push(cq);
        Ok(())
    }

    fn create_qp(&mut self, cap: QpCap) -> io::Result<u32> {
        let cq = *self
            .cqs
            .last()
            .ok_or_else(|| io::Error::other("a QP needs a CQ first"))?;
        let qpn = device::create_qp(&mut self.driver.engine, QpType::Rc, self.pd, cq, cap)?;
        self.qps.push(qpn);
        Ok(qpn)
    }

    fn modify_qp(&mut self, qp: usize, attr: &QpAttr, mask: AttrMask) -> io::Result<()> {
        let qpn = self.qpn(qp)?;
        self.driver
            .engine
            .modify_qp(qpn, attr, mask)
            .map_err(verbs_err)
    }

    fn post_send(&mut self, qp: usize, wr: SendWr) -> io::Result<()> {
        let qpn = self.qpn(qp)?;
        self.driver.post_send(qpn, wr)
    }

    fn post_recv(&mut self, qp: usize, wr: RecvWr) -> io::Result<()> {
        let qpn = self.qpn(qp)?;
        self.driver.post_recv(qpn, wr)
    }

    fn poll_cq(&mut self) -> io::Result<Option<WorkCompletion>> {
        for _ in 0..self.cqs.len() {
            let cq = self.cqs[self.next_cq];
            if let Some(wc) = self.driver.engine.poll_cq(cq) {
                return Ok(Some(wc));
            }
            self.next_cq = (self.next_cq + 1) % self.cqs.len();
        }
        Ok(None)
    }

    /// Busy-polling, a step: the ACK for what arrives waits for the test's answer.
    fn turn(&mut self) -> io::Result<()> {
        if self.busy_poll {
            self.driver.step().map(drop)
        } else {
            self.driver.turn().map(drop)
        }
    }

    fn wait(&mut self, max: Duration) -> io::Result<()> {
        self.driver.wait(max)
    }

    /// None: the client spins, as perftest polls its CQ, and every pass is a turn of
    /// its engine. Sleeping until a datagram arrives puts a wakeup in front of each ACK
    /// the client waits for, which cost a third of the 64-byte message rate.
    fn idle_wait(&self) -> Duration {
        Duration::ZERO
    }

    fn linger(&mut self, d: Duration) -> io::Result<()> {
        self.driver.linger(d)
    }

    fn counters(&self) -> Option<Counters> {
        Some(self.driver.engine.counters().clone())
    }

    fn fault_counters(&self) -> Option<FaultCounters> {
        self.driver.fault_counters()
    }

    fn kernel_dropped(&self) -> Option<u64> {
        Some(self.driver.backend_counters().rx_kernel_dropped)
    }
}
