//! `rocex ucmatose`: librdmacm's cmatose over rdma_cm, its default run with one
//! connection. Both sides post `count` receives before connecting; once connected the
//! server SENDs `count` messages of `size` bytes and waits for as many back, then
//! disconnects; the client receives its `count` messages, SENDs `count` replies and waits
//! for the disconnect. Either side can be the stock tool.

use std::io;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant as WallClock};

use rocex_cm::conn::{Conn, Event, State};
use rocex_proto::verbs::{QpCap, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use rocex_proto::{Access, Keys, VecRegion};

use super::{CmDevice, Limits, local_for, parse_ip};
use crate::device::{Post, verbs_err};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The server's address; without it, be the server.
    #[arg(short = 's')]
    server: Option<String>,
    /// Address to bind to.
    #[arg(short = 'b')]
    bind: Option<String>,
    /// Connections (only 1 is supported).
    #[arg(short = 'c', default_value_t = 1)]
    connections: u32,
    /// Messages each way.
    #[arg(short = 'C', default_value_t = 10)]
    count: u32,
    /// Message size.
    #[arg(short = 'S', default_value_t = 100)]
    size: u32,
    /// rdma_cm port.
    #[arg(short = 'p', default_value_t = 7471)]
    port: u16,
    /// Path MTU the client asks for (256 to 4096).
    #[arg(long, default_value_t = 1024)]
    mtu: u32,
}

const BASE: u64 = 0x3000_0000;

pub(crate) fn run(a: &Args) -> ExitCode {
    println!(
        "cmatose: starting {}",
        if a.server.is_some() {
            "client"
        } else {
            "server"
        }
    );
    let r = if a.connections != 1 {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "only one connection (-c 1) is supported",
        ))
    } else if a.count == 0 || a.size == 0 {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "-C and -S must be positive",
        ))
    } else {
        cmatose(a)
    };
    println!("test complete");
    match r {
        Ok(()) => {
            println!("return status 0");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocex ucmatose: {e}");
            println!("return status -1");
            ExitCode::FAILURE
        }
    }
}

struct Node {
    dev: CmDevice,
    cq: u32,
    keys: Keys,
}

impl Node {
    fn make_qp(dev: &mut CmDevice, cq: u32, lkey: u32, a: &Args) -> io::Result<u32> {
        let cap = QpCap {
            max_send_wr: a.count,
            max_recv_wr: a.count,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let qpn = dev.create_rc_qp(cq, cap)?;
        for _ in 0..a.count {
            let wr = RecvWr::new(
                1,
                [Sge {
                    addr: BASE,
                    length: a.size,
                    lkey,
                }],
            );
            dev.driver.post_recv(qpn, wr)?;
        }
        Ok(qpn)
    }

    fn post_sends(&mut self, qpn: u32, a: &Args) -> io::Result<()> {
        for _ in 0..a.count {
            let wr = SendWr::new(
                2,
                SendOp::Send,
                [Sge {
                    addr: BASE,
                    length: a.size,
                    lkey: self.keys.lkey,
                }],
            );
            self.dev.driver.post_send(qpn, wr)?;
        }
        Ok(())
    }

    /// Waits until `want` completions of each kind (sends, receives) have arrived.
    fn complete(&mut self, conn: &mut Conn, sends: u32, recvs: u32) -> io::Result<()> {
        let (mut s, mut r) = (0, 0);
        let mut last = WallClock::now();
        while s < sends || r < recvs {
            while let Some(wc) = self.dev.driver.engine.poll_cq(self.cq) {
                last = WallClock::now();
                if wc.status != WcStatus::Success {
                    return Err(io::Error::other(format!(
                        "completion failed: {:?} ({:?})",
                        wc.status, wc.opcode
                    )));
                }
                if wc.opcode == WcOpcode::Recv {
                    conn.comm_established();
                    r += 1;
                } else {
                    s += 1;
                }
            }
            while let Some(ev) = conn.poll_event() {
                if matches!(ev, Event::Rejected(_) | Event::TimedOut) {
                    return Err(io::Error::other("the connection failed"));
                }
            }
            if last.elapsed() > Duration::from_secs(60) {
                return Err(io::Error::other(format!(
                    "no progress for 60 s ({s} of {sends} sends, {r} of {recvs} receives)"
                )));
            }
            self.dev.pump(conn, Duration::from_millis(5))?;
        }
        Ok(())
    }
}

fn cmatose(a: &Args) -> io::Result<()> {
    let server = a.server.as_deref().map(parse_ip).transpose()?;
    let local = match (&a.bind, server) {
        (Some(b), _) => parse_ip(b)?,
        (None, Some(s)) => local_for(s)?,
        (None, None) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a server needs -b ADDRESS",
            ));
        }
    };
    let mut dev = CmDevice::open(local)?;
    let mem = Arc::new(VecRegion::new(a.size as usize));
    let keys = dev
        .driver
        .engine
        .reg_mr(dev.pd, BASE, u64::from(a.size), Access::LOCAL_WRITE, mem)
        .map_err(verbs_err)?;
    let cq = dev
        .driver
        .engine
        .create_cq(2 * a.count as usize + 2)
        .map_err(verbs_err)?;
    // cmatose's: 5 transport retries, no RNR retry.
    let limits = Limits::one_read(a.mtu, 5, 0)?;
    match server {
        Some(server) => {
            println!("cmatose: connecting");
            let qpn = Node::make_qp(&mut dev, cq, keys.lkey, a)?;
            let mut conn = dev.connect(server, a.port, qpn, limits)?;
            let mut n = Node { dev, cq, keys };
            println!("receiving data transfers");
            n.complete(&mut conn, 0, a.count)?;
            println!("sending replies");
            n.post_sends(qpn, a)?;
            n.complete(&mut conn, a.count, 0)?;
            println!("data transfers complete");
            // The server disconnects; answer its DREQ.
            while !matches!(conn.state(), State::TimeWait | State::Closed) {
                n.dev.pump(&mut conn, Duration::from_millis(5))?;
            }
            n.dev.linger(&mut conn, Duration::from_millis(300))
        }
        None => {
            let (mut conn, qpn) =
                dev.accept(a.port, limits, |d| Node::make_qp(d, cq, keys.lkey, a))?;
            let mut n = Node { dev, cq, keys };
            // Established by the RTU, or by the client's first message.
            while conn.state() == State::RepSent {
                n.dev.pump(&mut conn, Duration::from_millis(5))?;
                if conn.poll_event().is_some_and(|e| e != Event::Established) {
                    return Err(io::Error::other("the connection failed"));
                }
            }
            println!("initiating data transfers");
            n.post_sends(qpn, a)?;
            println!("completing sends");
            n.complete(&mut conn, a.count, 0)?;
            println!("receiving data transfers");
            n.complete(&mut conn, 0, a.count)?;
            println!("data transfers complete");
            println!("cmatose: disconnecting");
            n.dev.disconnect(&mut conn)?;
            println!("disconnected");
            n.dev.linger(&mut conn, Duration::from_millis(300))
        }
    }
}
