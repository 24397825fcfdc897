//! Connecting by address: [`Listener`] and [`Connection::connect`], which set up a QP and
//! its receive pool ([`Endpoint`]), run the out-of-band exchange (`exchange.rs`) and bring
//! the QP to RTS.

use std::hash::{BuildHasher, RandomState};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use rocex_verbs::verbs::{AddressVector, AttrMask, QpAttr, QpCap, QpState, QpType};
use rocex_verbs::{Access, CompChannel, QpInitAttr};
use rustix::event::{PollFd, PollFlags, poll};
use rustix::net::sockopt;

use crate::connection::{Connection, Link};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exchange::{self, Params};
use crate::state::{RecvPool, State};

/// How a connection is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Receive buffers the library keeps posted: messages the peer may send before this
    /// end calls [`Connection::recv`] (more wait: the peer retries, "receiver not ready").
    pub recv_buffers: u32,
    /// Bytes of each receive buffer: the longest message the peer may send.
    pub recv_size: u32,
    /// Operations in flight at once; more wait for room.
    pub max_in_flight: u32,
    /// How long each step of the exchange may take.
    pub handshake_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            recv_buffers: 16,
            recv_size: 64 * 1024,
            max_in_flight: 128,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// The QP's attributes this crate chooses.
mod defaults {
    /// Local ACK timeout: 4.096 µs × 2^15 = 134 ms per try, room for a software device
    /// on a busy host.
    pub(super) const TIMEOUT: u8 = 15;
    /// Retries after a timeout: 6, the most that still ends (7 means "forever" to rxe and
    /// rocex), so a peer that is gone fails an operation after about a second.
    pub(super) const RETRY_CNT: u8 = 6;
    /// Retries after "receiver not ready": forever; a slow receiver is not a dead one.
    pub(super) const RNR_RETRY: u8 = 7;
    /// The RNR NAK timer this end asks a sender to wait: code 12, 0.64 ms (IBTA table 46).
    pub(super) const MIN_RNR_TIMER: u8 = 12;
    /// TCP keepalive on the out-of-band connection: a peer host that vanished without
    /// closing it is noticed after about 5 + 3 × 1 s.
    pub(super) const KEEPALIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(5);
    pub(super) const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
    pub(super) const KEEPALIVE_COUNT: u32 = 3;
}

/// A QP on its way to RTS, with what this end tells the peer.
pub(crate) struct Endpoint {
    st: State,
    channel: CompChannel,
    device: Device,
    pub(crate) ours: Params,
}

impl Endpoint {
    /// A QP in INIT with its receive pool posted, its CQ and channel.
    pub(crate) fn new(device: &Device, config: &Config) -> Result<Self> {
        let dev = &device.inner;
        let limit = config.max_in_flight.max(1);
        let recv = config.recv_buffers.max(1);
        let channel = dev.ctx.create_comp_channel()?;
        let cq = dev.ctx.create_cq(limit + recv, Some(&channel))?;
        let mut qp = dev.pd.create_qp(&QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: &cq,
            recv_cq: &cq,
            cap: QpCap {
                max_send_wr: limit,
                max_recv_wr: recv,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
        })?;
        let init = QpAttr {
            qp_state: QpState::Init,
            qp_access_flags: Access::LOCAL_WRITE
                | Access::REMOTE_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_ATOMIC,
            ..QpAttr::default()
        };
        qp.modify(
            &init,
            AttrMask::STATE | AttrMask::PKEY_INDEX | AttrMask::PORT | AttrMask::ACCESS_FLAGS,
        )?;
        let pool_mr = dev.pd.alloc_mr(
            recv as usize * config.recv_size as usize,
            Access::LOCAL_WRITE,
        )?;
        let pool = RecvPool::new(pool_mr, config.recv_size);
        pool.post_all(&mut qp, recv)?;
        let scratch = dev.pd.alloc_mr(limit as usize * 8, Access::LOCAL_WRITE)?;
        let ours = Params {
            qpn: qp.qpn(),
            psn: RandomState::new().hash_one(std::time::SystemTime::now()) as u32 & 0xff_ffff,
            gid: dev.ctx.query_gid(1, 0)?,
            mtu: dev.mtu,
            rd_atomic: dev.max_rd_atomic,
            recv_size: config.recv_size,
        };
        Ok(Self {
            st: State::new(qp, cq, limit, scratch, pool),
            channel,
            device: device.clone(),
            ours,
        })
    }

    /// INIT → RTR → RTS towards `peer`.
    pub(crate) fn bring_up(&mut self, peer: &Params) -> Result<()> {
        let v6 = Ipv6Addr::from(peer.gid);
        let dest = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        let to_rts = QpAttr {
            ah_attr: Some(AddressVector { dest }),
            path_mtu: self.ours.mtu.min(peer.mtu),
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            max_dest_rd_atomic: self.ours.rd_atomic,
            min_rnr_timer: defaults::MIN_RNR_TIMER,
            sq_psn: self.ours.psn,
            timeout: defaults::TIMEOUT,
            retry_cnt: defaults::RETRY_CNT,
            rnr_retry: defaults::RNR_RETRY,
            max_rd_atomic: self.ours.rd_atomic.min(peer.rd_atomic),
            ..QpAttr::default()
        };
        // INIT was done when the QP was made, with its access flags.
        for (a, mask) in &to_rts.rc_steps()[1..] {
            self.st.qp.modify(a, *mask)?;
        }
        Ok(())
    }

    /// The connected endpoint; `link` (the out-of-band connection) stays open as the
    /// peer's sign of life.
    pub(crate) fn finish(self, peer: Params, link: TcpStream) -> Result<Connection> {
        link.set_nonblocking(true)?;
        link.set_nodelay(true)?;
        keepalive(&link)?;
        Ok(self.into_connection(peer, Link::Tcp(link)))
    }

    /// The QP, for the daemon's CM to connect.
    pub(crate) fn qp(&self) -> &rocex_verbs::Qp {
        &self.st.qp
    }

    /// The connected endpoint over `link`.
    pub(crate) fn into_connection(self, peer: Params, link: Link) -> Connection {
        Connection {
            #[cfg(feature = "tokio")]
            reactor: std::cell::OnceCell::new(),
            st: std::cell::RefCell::new(self.st),
            channel: self.channel,
            link,
            device: self.device,
            peer,
        }
    }
}

/// Accepts connections on a TCP address, each to a new QP of its device.
#[derive(Debug)]
pub struct Listener {
    device: Device,
    tcp: TcpListener,
    config: Config,
}

impl Listener {
    /// Listens on `addr` (a TCP address such as `"198.18.0.1:7471"`; port 0 picks one).
    pub fn bind(device: &Device, addr: impl ToSocketAddrs) -> Result<Self> {
        Self::bind_with(device, addr, Config::default())
    }

    /// [`Listener::bind`] with `config` for every accepted connection.
    pub fn bind_with(device: &Device, addr: impl ToSocketAddrs, config: Config) -> Result<Self> {
        Ok(Self {
            device: device.clone(),
            tcp: TcpListener::bind(addr)?,
            config,
        })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.tcp.local_addr()?)
    }

    /// Waits for the next peer and connects to it.
    pub fn accept(&self) -> Result<Connection> {
        let link = loop {
            let mut fds = [PollFd::new(&self.tcp, PollFlags::IN)];
            match poll(&mut fds, None) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(Error::Io(e.into())),
            }
            match self.tcp.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            }
        };
        link.set_nonblocking(false)?;
        link.set_read_timeout(Some(self.config.handshake_timeout))?;
        link.set_write_timeout(Some(self.config.handshake_timeout))?;
        let mut ep = Endpoint::new(&self.device, &self.config)?;
        let mut carrier = &link;
        let peer = exchange::answer(&mut carrier, ep.ours, |p| ep.bring_up(p))?;
        ep.finish(peer, link)
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn parts(&self) -> (&Device, &TcpListener, &Config) {
        (&self.device, &self.tcp, &self.config)
    }
}

impl Connection {
    /// Connects to the [`Listener`] at `addr`.
    pub fn connect(device: &Device, addr: impl ToSocketAddrs) -> Result<Self> {
        Self::connect_with(device, addr, Config::default())
    }

    /// [`Connection::connect`] with `config`.
    pub fn connect_with(device: &Device, addr: impl ToSocketAddrs, config: Config) -> Result<Self> {
        let link = connect_tcp(addr, config.handshake_timeout)?;
        link.set_read_timeout(Some(config.handshake_timeout))?;
        link.set_write_timeout(Some(config.handshake_timeout))?;
        let mut ep = Endpoint::new(device, &config)?;
        let mut carrier = &link;
        let peer = exchange::dial(&mut carrier, ep.ours, |p| ep.bring_up(p))?;
        ep.finish(peer, link)
    }
}

fn keepalive(link: &TcpStream) -> std::io::Result<()> {
    sockopt::set_socket_keepalive(link, true)?;
    sockopt::set_tcp_keepidle(link, defaults::KEEPALIVE_IDLE)?;
    sockopt::set_tcp_keepintvl(link, defaults::KEEPALIVE_INTERVAL)?;
    sockopt::set_tcp_keepcnt(link, defaults::KEEPALIVE_COUNT)?;
    Ok(())
}

/// The first address of `addr` that accepts, each tried for at most `timeout`.
fn connect_tcp(addr: impl ToSocketAddrs, timeout: Duration) -> Result<TcpStream> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address"))
        .into())
}
