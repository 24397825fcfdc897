//! `rocex rping`: librdmacm's rping over rdma_cm. Per ping the client SENDs the address,
//! rkey and size of its source buffer (16 bytes, big-endian); the server READs it, SENDs a
//! go-ahead, receives the client's sink buffer the same way, WRITEs the data back and SENDs
//! another go-ahead. The client disconnects after `count` pings; the server ends with the
//! disconnect. Either side can be the stock tool.

use std::io;
use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rocex_cm::conn::{Conn, Event, State};
use rocex_proto::verbs::{
    QpCap, RecvWr, Remote, SendData, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use rocex_proto::{Access, Keys, Region, VecRegion};

use super::{CmDevice, Limits, local_for, parse_ip};
use crate::device::{Post, verbs_err};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Server side.
    #[arg(short = 's', conflicts_with = "client")]
    server: bool,
    /// Client side.
    #[arg(short = 'c')]
    client: bool,
    /// Address: the server's (client) or the one to listen on (server).
    #[arg(short = 'a')]
    addr: String,
    /// Source address of the client (default: the one that reaches the server).
    #[arg(short = 'I')]
    source: Option<String>,
    /// rdma_cm port.
    #[arg(short = 'p', default_value_t = 7174)]
    port: u16,
    /// Pings (0: until interrupted).
    #[arg(short = 'C', default_value_t = 0)]
    count: u32,
    /// Ping data size.
    #[arg(short = 'S', default_value_t = 64)]
    size: u32,
    /// Print the ping data.
    #[arg(short = 'v')]
    verbose: bool,
    /// Check that the data came back unchanged.
    #[arg(short = 'V')]
    validate: bool,
    /// Path MTU the client asks for (256 to 4096).
    #[arg(long, default_value_t = 1024)]
    mtu: u32,
}

/// Bytes of rping's buffer advertisement: address, rkey, size.
const INFO_LEN: usize = 16;
/// rping's largest buffer.
const MAX_SIZE: u32 = 64 * 1024;
const BASE: u64 = 0x2000_0000;
const RECV_AT: u64 = BASE;
const SINK_AT: u64 = BASE + 0x1000;
const SOURCE_AT: u64 = SINK_AT + MAX_SIZE as u64;
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
const RDMA_WRID: u64 = 3;
/// rping's transport and RNR retries.
const RETRY: u8 = 7;

pub(crate) fn run(a: &Args) -> ExitCode {
    let r = if a.server == a.client {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "give one of -s (server) and -c (client)",
        ))
    } else if a.size < 16 || a.size >= MAX_SIZE {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "invalid size {} (valid range is 16 to {})",
                a.size,
                MAX_SIZE - 1
            ),
        ))
    } else if a.server {
        server(a)
    } else {
        client(a)
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocex rping: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One side's buffers, CQ and QP.
struct Side {
    dev: CmDevice,
    mem: Arc<VecRegion>,
    cq: u32,
    qpn: u32,
    keys: Keys,
}

impl Side {
    fn new(local: IpAddr) -> io::Result<Self> {
        let mut dev = CmDevice::open(local)?;
        let len = SOURCE_AT + u64::from(MAX_SIZE) - BASE;
        let mem = Arc::new(VecRegion::new(len as usize));
        let access = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let keys = dev
            .driver
            .engine
            .reg_mr(dev.pd, BASE, len, access, mem.clone())
            .map_err(verbs_err)?;
        let cq = dev.driver.engine.create_cq(64).map_err(verbs_err)?;
        Ok(Self {
            dev,
            mem,
            cq,
            qpn: 0,
            keys,
        })
    }

    fn qp_cap() -> QpCap {
        QpCap {
            max_send_wr: 16,
            max_recv_wr: 2,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: INFO_LEN as u32,
        }
    }

    fn post_recv(dev: &mut CmDevice, qpn: u32, lkey: u32) -> io::Result<()> {
        let wr = RecvWr::new(
            RECV_WRID,
            [Sge {
                addr: RECV_AT,
                length: INFO_LEN as u32,
                lkey,
            }],
        );
        dev.driver.post_recv(qpn, wr)
    }

    /// SENDs a buffer advertisement (or the server's go-ahead, whose content rping ignores).
    fn send_info(&mut self, addr: u64, size: u32) -> io::Result<()> {
        let mut info = Vec::with_capacity(INFO_LEN);
        info.extend_from_slice(&addr.to_be_bytes());
        info.extend_from_slice(&self.keys.rkey.to_be_bytes());
        info.extend_from_slice(&size.to_be_bytes());
        let mut wr = SendWr::new(SEND_WRID, SendOp::Send, []);
        wr.data = SendData::Inline(info);
        self.dev.driver.post_send(self.qpn, wr)
    }

    fn rdma(&mut self, op: SendOp, local: u64, len: u32) -> io::Result<()> {
        let wr = SendWr::new(
            RDMA_WRID,
            op,
            [Sge {
                addr: local,
                length: len,
                lkey: self.keys.lkey,
            }],
        );
        self.dev.driver.post_send(self.qpn, wr)
    }

    /// Waits for a completion of `want` (a receive is re-posted at once); `None` when the
    /// connection went down first. A failed completion is an error.
    fn wait(&mut self, conn: &mut Conn, want: WcOpcode) -> io::Result<Option<WorkCompletion>> {
        loop {
            while let Some(wc) = self.dev.driver.engine.poll_cq(self.cq) {
                if wc.status != WcStatus::Success {
                    return Err(io::Error::other(format!(
                        "cq completion failed status {:?} (wr_id {})",
                        wc.status, wc.wr_id
                    )));
                }
                if wc.opcode == WcOpcode::Recv {
                    conn.comm_established();
                    Self::post_recv(&mut self.dev, self.qpn, self.keys.lkey)?;
                }
                if wc.opcode == want {
                    return Ok(Some(wc));
                }
            }
            while let Some(ev) = conn.poll_event() {
                match ev {
                    Event::Disconnected | Event::Rejected(_) | Event::TimedOut => return Ok(None),
                    Event::Reply(_) | Event::Established => {}
                }
            }
            if matches!(conn.state(), State::TimeWait | State::Closed) {
                return Ok(None);
            }
            self.dev.pump(conn, Duration::from_millis(5))?;
        }
    }

    /// The buffer advertisement last received.
    fn received_info(&self) -> (u64, u32, u32) {
        let mut r = [0u8; INFO_LEN];
        self.mem.read(RECV_AT - BASE, &mut r);
        let addr = u64::from_be_bytes(r[..8].try_into().expect("eight bytes"));
        let rkey = u32::from_be_bytes(r[8..12].try_into().expect("four bytes"));
        let size = u32::from_be_bytes(r[12..16].try_into().expect("four bytes"));
        (addr, rkey, size)
    }

    /// The NUL-terminated string at `at`.
    fn c_string(&self, at: u64, max: u32) -> String {
        let mut s = vec![0u8; max as usize];
        self.mem.read(at - BASE, &mut s);
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        String::from_utf8_lossy(&s[..end]).into_owned()
    }
}

/// rping's ping data: "rdma-ping-N: " then letters from `start` ('A' to 'z', wrapping),
/// NUL-terminated at `size`.
fn ping_data(ping: u32, start: u8, size: u32) -> Vec<u8> {
    let mut v = format!("rdma-ping-{ping}: ").into_bytes();
    v.truncate(size as usize - 1);
    let mut c = start;
    while v.len() < size as usize {
        v.push(c);
        c = if c >= 122 { 65 } else { c + 1 };
    }
    v[size as usize - 1] = 0;
    v
}

fn client(a: &Args) -> io::Result<()> {
    let server = parse_ip(&a.addr)?;
    let local = match &a.source {
        Some(src) => parse_ip(src)?,
        None => local_for(server)?,
    };
    let mut s = Side::new(local)?;
    s.qpn = s.dev.create_rc_qp(s.cq, Side::qp_cap())?;
    for _ in 0..2 {
        Side::post_recv(&mut s.dev, s.qpn, s.keys.lkey)?;
    }
    let limits = Limits::one_read(a.mtu, RETRY, RETRY)?;
    let mut conn = s.dev.connect(server, a.port, s.qpn, limits)?;
    let mut start = 65u8;
    let mut ping = 0u32;
    while a.count == 0 || ping < a.count {
        let data = ping_data(ping, start, a.size);
        start = if start >= 122 { 65 } else { start + 1 };
        s.mem.write(SOURCE_AT - BASE, &data);
        s.send_info(SOURCE_AT, a.size)?;
        if s.wait(&mut conn, WcOpcode::Recv)?.is_none() {
            return Err(io::Error::other(
                "disconnected while waiting for RDMA_WRITE_ADV",
            ));
        }
        s.send_info(SINK_AT, a.size)?;
        if s.wait(&mut conn, WcOpcode::Recv)?.is_none() {
            return Err(io::Error::other(
                "disconnected while waiting for RDMA_WRITE_COMPLETE",
            ));
        }
        if a.validate {
            let mut back = vec![0u8; a.size as usize];
            s.mem.read(SINK_AT - BASE, &mut back);
            if back != data {
                return Err(io::Error::other("data mismatch!"));
            }
        }
        if a.verbose {
            println!("ping data: {}", s.c_string(SINK_AT, a.size));
        }
        ping += 1;
    }
    s.dev.disconnect(&mut conn)?;
    s.dev.linger(&mut conn, Duration::from_millis(300))
}

fn server(a: &Args) -> io::Result<()> {
    let local = parse_ip(&a.addr)?;
    let mut s = Side::new(local)?;
    let (cq, lkey) = (s.cq, s.keys.lkey);
    let limits = Limits::one_read(a.mtu, RETRY, RETRY)?;
    let (mut conn, qpn) = s.dev.accept(a.port, limits, |dev| {
        let qpn = dev.create_rc_qp(cq, Side::qp_cap())?;
        for _ in 0..2 {
            Side::post_recv(dev, qpn, lkey)?;
        }
        Ok(qpn)
    })?;
    s.qpn = qpn;
    loop {
        // The client's source buffer.
        if s.wait(&mut conn, WcOpcode::Recv)?.is_none() {
            break;
        }
        let (addr, rkey, len) = s.received_info();
        if len > MAX_SIZE {
            return Err(io::Error::other(format!(
                "the client's size {len} is too large"
            )));
        }
        s.rdma(SendOp::Read(Remote { addr, rkey }), SINK_AT, len)?;
        if s.wait(&mut conn, WcOpcode::RdmaRead)?.is_none() {
            break;
        }
        let data = s.c_string(SINK_AT, len);
        if a.verbose {
            println!("server ping data: {data}");
        }
        s.send_info(0, 0)?;
        // The client's sink buffer.
        if s.wait(&mut conn, WcOpcode::Recv)?.is_none() {
            break;
        }
        let (addr, rkey, _) = s.received_info();
        s.rdma(
            SendOp::Write(Remote { addr, rkey }),
            SINK_AT,
            data.len() as u32 + 1,
        )?;
        if s.wait(&mut conn, WcOpcode::RdmaWrite)?.is_none() {
            break;
        }
        s.send_info(0, 0)?;
    }
    // The client disconnected (its DREQ is answered); stay briefly for repeats of it.
    s.dev.linger(&mut conn, Duration::from_millis(300))
}

#[cfg(test)]
mod tests {
    use super::ping_data;

    #[test]
    fn ping_data_is_rpings() {
        let d = ping_data(0, 65, 64);
        assert_eq!(&d[..15], b"rdma-ping-0: AB");
        assert_eq!(d.len(), 64);
        assert_eq!(d[63], 0);
        assert_eq!(d[62], b'A' + 62 - 13);
        let wrap = ping_data(3, 122, 20);
        assert_eq!(&wrap[..16], b"rdma-ping-3: zAB");
    }
}
