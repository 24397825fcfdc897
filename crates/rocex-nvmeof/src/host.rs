//! A host's association with one controller: the admin queue, the controller brought up
//! through its properties, Identify, I/O queues, and the orderly end (shutdown
//! notification, then each queue's rdma_cm disconnect), in the order the NVMe over
//! Fabrics specification's "Controller Initialization" gives and Linux's host follows
//! (`nvme_rdma_setup_ctrl`, `nvme_enable_ctrl`, `nvme_shutdown_ctrl`).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use rocex_verbs::{Context, Pd};

use crate::error::{Error, Result};
use crate::queue::{Queue, QueueConfig};
use crate::wire::connect::{CNTLID_DYNAMIC, prop};
use crate::wire::identify::IDENTIFY_LEN;
use crate::wire::sqe::cns;
use crate::wire::{ConnectData, Controller, Namespace, Sqe};

pub use crate::wire::cm::ADMIN_QUEUE_DEPTH;

/// Who the host is and what it connects to.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The subsystem's NQN.
    pub subnqn: String,
    /// This host's NQN.
    pub hostnqn: String,
    /// This host's identifier (a UUID).
    pub hostid: [u8; 16],
    /// Entries of the admin queue: [`ADMIN_QUEUE_DEPTH`], the most Linux's target takes
    /// (another value is for testing a target's checks).
    pub admin_depth: u16,
    /// I/O queues to create (qid 1..=n).
    pub io_queues: u16,
    /// Entries of each I/O queue: commands in flight.
    pub io_depth: u16,
    /// The largest transfer of one I/O command, in bytes.
    pub max_io: u32,
    /// How long any one wait may take.
    pub timeout: Duration,
}

/// An association with a controller: its queues and what Identify told.
#[derive(Debug)]
pub struct Host {
    ctx: Context,
    pd: Pd,
    admin: Queue,
    io: Vec<Queue>,
    cntlid: u16,
    cap: u64,
    version: u32,
    controller: Controller,
    timeout: Duration,
}

impl Host {
    /// Connects the admin queue to the target at `addr`:`port`, enables the controller,
    /// identifies it, and connects the I/O queues.
    pub fn connect(ctx: &Context, addr: IpAddr, port: u16, cfg: &HostConfig) -> Result<Self> {
        let pd = ctx.alloc_pd().map_err(|source| Error::Verbs {
            qid: 0,
            what: "allocate a PD",
            source,
        })?;
        let admin_cfg = QueueConfig {
            depth: cfg.admin_depth,
            slot_bytes: IDENTIFY_LEN as u32,
            timeout: cfg.timeout,
        };
        let mut admin = Queue::connect(ctx, &pd, addr, port, 0, admin_cfg)?;
        let cntlid = fabrics_connect(&mut admin, cfg, CNTLID_DYNAMIC)?;
        let (cap, version) = enable(&mut admin, cfg.timeout)?;
        let controller = Controller::parse(&identify(&mut admin, cns::CONTROLLER, 0)?)?;
        let mut host = Self {
            ctx: ctx.clone(),
            pd,
            admin,
            io: Vec::new(),
            cntlid,
            cap,
            version,
            controller,
            timeout: cfg.timeout,
        };
        if let Some(limit) = host.controller.max_transfer(4096) {
            if u64::from(cfg.max_io) > limit {
                return Err(Error::Invalid(format!(
                    "transfers of {} bytes: the controller takes at most {limit} (MDTS {})",
                    cfg.max_io, host.controller.mdts
                )));
            }
        }
        let mqes = u32::from(prop::cap_mqes(host.cap)) + 1;
        if u32::from(cfg.io_depth) > mqes {
            return Err(Error::Invalid(format!(
                "I/O queues of {} entries: the controller takes at most {mqes} (CAP.MQES)",
                cfg.io_depth
            )));
        }
        let io_cfg = QueueConfig {
            depth: cfg.io_depth,
            slot_bytes: cfg.max_io,
            timeout: cfg.timeout,
        };
        for qid in 1..=cfg.io_queues {
            let mut q = Queue::connect(ctx, &host.pd, addr, port, qid, io_cfg)?;
            fabrics_connect(&mut q, cfg, cntlid)?;
            host.io.push(q);
        }
        Ok(host)
    }

    /// The controller ID the admin Connect returned.
    pub fn cntlid(&self) -> u16 {
        self.cntlid
    }
    /// The CAP property.
    pub fn cap(&self) -> u64 {
        self.cap
    }
    /// The VS property.
    pub fn version(&self) -> u32 {
        self.version
    }
    /// The Identify Controller data.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }
    /// The admin queue.
    pub fn admin(&self) -> &Queue {
        &self.admin
    }
    /// I/O queue `i` (qid `i + 1`).
    pub fn io(&mut self, i: usize) -> Option<&mut Queue> {
        self.io.get_mut(i)
    }
    /// The daemon context the queues run on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Identify Controller (CNS 01h).
    pub fn identify_controller(&mut self) -> Result<Controller> {
        let b = identify(&mut self.admin, cns::CONTROLLER, 0)?;
        Ok(Controller::parse(&b)?)
    }

    /// Identify Namespace (CNS 00h) of `nsid`.
    pub fn identify_namespace(&mut self, nsid: u32) -> Result<Namespace> {
        let b = identify(&mut self.admin, cns::NAMESPACE, nsid)?;
        Ok(Namespace::parse(&b)?)
    }

    /// The orderly end: CC.SHN normal shutdown, CSTS.SHST polled until complete, then
    /// every queue's connection ended, I/O queues first. (The fabrics Disconnect command
    /// is optional and Linux's target does not take it: the rdma_cm disconnect is how
    /// its host ends a queue.)
    pub fn disconnect(mut self) -> Result<()> {
        let cc = get(&mut self.admin, prop::CC, false)? as u32;
        set(
            &mut self.admin,
            prop::CC,
            cc & !(3 << 14) | prop::CC_SHN_NORMAL,
        )?;
        wait_csts(
            &mut self.admin,
            "shut down (CSTS.SHST)",
            self.timeout,
            |c| c & prop::CSTS_SHST_MASK == prop::CSTS_SHST_CMPLT,
        )?;
        for q in self.io.drain(..) {
            q.disconnect()?;
        }
        self.admin.disconnect()
    }
}

fn get(admin: &mut Queue, offset: u32, wide: bool) -> Result<u64> {
    Ok(admin.call(Sqe::property_get(offset, wide))?.result)
}

fn set(admin: &mut Queue, offset: u32, value: u32) -> Result<()> {
    admin.call(Sqe::property_set(offset, value)).map(|_| ())
}

/// CAP and VS read; CC written with the NVM command set, 4 KiB pages, round robin and
/// the fabrics entry sizes, then again with EN; CSTS polled until RDY within CAP.TO (at
/// least `timeout`). Returns CAP and VS.
fn enable(admin: &mut Queue, timeout: Duration) -> Result<(u64, u32)> {
    let cap = get(admin, prop::CAP, true)?;
    let version = get(admin, prop::VS, false)? as u32;
    let cc =
        prop::CC_CSS_NVM | prop::CC_MPS_4K | prop::CC_AMS_RR | prop::CC_IOSQES | prop::CC_IOCQES;
    set(admin, prop::CC, cc)?;
    set(admin, prop::CC, cc | prop::CC_EN)?;
    let limit = Duration::from_millis(prop::cap_timeout_ms(cap)).max(timeout);
    wait_csts(admin, "ready (CSTS.RDY)", limit, |csts| {
        csts & prop::CSTS_RDY != 0
    })?;
    Ok((cap, version))
}

/// Polls CSTS until `done` says so, CFS is set or `limit` passes.
fn wait_csts(
    admin: &mut Queue,
    what: &str,
    limit: Duration,
    done: impl Fn(u32) -> bool,
) -> Result<()> {
    let end = Instant::now() + limit;
    loop {
        let csts = get(admin, prop::CSTS, false)? as u32;
        if csts & prop::CSTS_CFS != 0 {
            return Err(Error::Controller(format!(
                "fatal status (CSTS {csts:#x}) while waiting to be {what}"
            )));
        }
        if done(csts) {
            return Ok(());
        }
        if Instant::now() >= end {
            return Err(Error::Controller(format!(
                "not {what} after {limit:?} (CSTS {csts:#x})"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Identify with `cns` for `nsid`: the 4096-byte structure the controller RDMA-WRITEs
/// into a data slot of the admin queue.
fn identify(admin: &mut Queue, cns: u8, nsid: u32) -> Result<Vec<u8>> {
    let cid = admin
        .take_cid()
        .ok_or_else(|| Error::Invalid("admin queue: every command identifier is in use".into()))?;
    let sgl = admin.sgl(cid, IDENTIFY_LEN as u32)?;
    admin.call_with(cid, Sqe::identify(cns, nsid, sgl))?;
    let mut b = vec![0u8; IDENTIFY_LEN];
    admin.get_data(cid, &mut b)?;
    Ok(b)
}

/// The Fabrics Connect command on `q`, its data (host and subsystem NQNs, `cntlid`) in
/// the queue's first data slot; returns the controller ID of the response.
fn fabrics_connect(q: &mut Queue, cfg: &HostConfig, cntlid: u16) -> Result<u16> {
    let data = ConnectData::new(cfg.hostid, cntlid, &cfg.subnqn, &cfg.hostnqn)
        .ok_or_else(|| Error::Invalid("an NQN must be 1 to 223 bytes with no NUL".into()))?;
    let cid = q
        .take_cid()
        .ok_or_else(|| Error::Invalid("no free command identifier".into()))?;
    let bytes = zerocopy::IntoBytes::as_bytes(&data);
    q.put_data(cid, bytes)?;
    let sgl = q.sgl(cid, bytes.len() as u32)?;
    let sqsize = q.depth() - 1;
    let done = q.call_with(cid, Sqe::connect(q.qid(), sqsize, 0, sgl))?;
    Ok(done.result as u16)
}
