//! [`Connection`]: a connected RC QP and its operations, blocking (here) and async
//! (`nonblocking.rs`).
//!
//! Both kinds share one loop: drain the CQ and route each completion by `wr_id`
//! ([`Connection::progress`]), see whether the caller's condition holds, otherwise arm the
//! CQ and sleep on the completion channel's eventfd, the daemon's control socket (which
//! wakes when the daemon dies) and the out-of-band TCP connection (which wakes when the
//! peer closes it). A connection made through rdma_cm has no such link: the peer's DREQ
//! moves the QP to ERROR, which flushes every operation.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::ops::RangeBounds;
use std::rc::Rc;
use std::time::Duration;

use rocex_verbs::CompChannel;
use rocex_verbs::Mr;
use rocex_verbs::verbs::Remote;
use rustix::event::{PollFd, PollFlags, poll};

use crate::buffer::Buffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::exchange::Params;
use crate::state::{Done, Request, State};
use crate::token::RemoteBuffer;

/// The longest message RDMA carries: 2^31 bytes.
const MAX_MESSAGE: u64 = 1 << 31;

/// Polls of the CQ before a blocking waiter arms it and sleeps: a completion usually
/// follows a post within microseconds, far less than a wakeup through the eventfd costs.
const SPINS: u32 = 200;

/// A reliable connection to one peer.
///
/// Every operation takes `&self`: any number may be in flight at once, from async tasks
/// of one thread (share the connection with `Rc`) or mixed with blocking calls; each
/// completion reaches its caller by its `wr_id`.
///
/// The connection follows RC semantics: a failed operation (the peer refused access, or
/// stopped answering) breaks it, and every later operation fails with
/// [`Error::Flushed`]. Checks this library can make before posting (ranges, alignment,
/// message sizes) fail without harm.
///
/// An async operation whose future is dropped is not stopped: it runs to completion on
/// the device, its result is discarded, and the registration it uses is kept until then.
pub struct Connection {
    /// Duplicates of the descriptors below registered with tokio, made by the first
    /// async call.
    #[cfg(feature = "tokio")]
    pub(crate) reactor: std::cell::OnceCell<crate::nonblocking::Reactor>,
    pub(crate) st: std::cell::RefCell<State>,
    pub(crate) channel: CompChannel,
    pub(crate) link: Link,
    pub(crate) device: Device,
    pub(crate) peer: Params,
}

/// How the connection was made, and how the peer's end is noticed.
#[derive(Debug)]
pub(crate) enum Link {
    /// The out-of-band TCP connection, kept open as the peer's sign of life
    /// (non-blocking; with keepalive).
    Tcp(TcpStream),
    /// An rdma_cm connection of the daemon: disconnected (DREQ) when dropped.
    Cm {
        /// The daemon's connection id.
        id: u32,
        /// The peer's address and rdma_cm port.
        peer: SocketAddr,
    },
}

impl Link {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Self::Tcp(s) => s.peer_addr(),
            Self::Cm { peer, .. } => Ok(*peer),
        }
    }

    /// The TCP link while the connection is open: the descriptor to watch.
    pub(crate) fn watch(&self) -> Option<&TcpStream> {
        match self {
            Self::Tcp(s) => Some(s),
            Self::Cm { .. } => None,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Link::Cm { id, .. } = self.link {
            // The peer hears of it by DREQ; a daemon that is gone took the QP with it.
            let _ = self.device.inner.ctx.cm_disconnect(id);
        }
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("qpn", &self.st.borrow().qp.qpn())
            .field("peer_qpn", &self.peer.qpn)
            .field("peer", &self.link.peer_addr().ok())
            .finish()
    }
}

/// An operation ready to post: the request and the registration it reads or fills.
/// An atomic operation's operands.
pub(crate) enum Atomic {
    /// FETCH_ADD.
    Add(u64),
    /// CMP_SWAP.
    Swap { expect: u64, new: u64 },
}

pub(crate) struct Prepared {
    pub(crate) req: Request,
    pub(crate) keep: Option<Rc<Mr>>,
}

/// Marks an operation abandoned if its caller goes away before it completes.
pub(crate) struct Ticket<'a> {
    conn: &'a Connection,
    id: u64,
}

impl<'a> Ticket<'a> {
    pub(crate) fn new(conn: &'a Connection, id: u64) -> Self {
        Self { conn, id }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Ok(mut st) = self.conn.st.try_borrow_mut() {
            st.abandon(self.id);
        }
    }
}

/// What woke a sleeping waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Another caller routed completions (async waiters only).
    #[cfg(feature = "tokio")]
    Progress,
    /// The completion channel or the control socket is readable.
    Channel,
    /// The out-of-band connection is readable: closed, or data.
    Link,
}

impl Connection {
    /// The device this connection runs on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The longest message [`Connection::send`] may send: the peer's receive buffer size.
    pub fn max_message(&self) -> usize {
        self.peer.recv_size as usize
    }

    /// The peer's address on the out-of-band connection (its rdma_cm address and port for
    /// a connection made through rdma_cm).
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        Ok(self.link.peer_addr()?)
    }

    /// The peer device's address (its RoCE v2 GID): where the RDMA traffic goes, which
    /// need not be the out-of-band connection's address ([`Connection::peer_addr`]).
    pub fn peer_device_addr(&self) -> std::net::IpAddr {
        let v6 = std::net::Ipv6Addr::from(self.peer.gid);
        v6.to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4)
    }

    /// Drains the CQ, routing every completion; when `link` woke the caller, checks
    /// whether the peer closed the out-of-band connection. Wakes async waiters when
    /// anything changed.
    pub(crate) fn progress(&self, link: bool) -> Result<()> {
        let wakers = {
            let mut st = self.st.borrow_mut();
            let mut moved = false;
            loop {
                let wcs = st.cq.poll(64)?;
                if wcs.is_empty() {
                    break;
                }
                moved = true;
                for wc in wcs {
                    st.dispatch(wc);
                }
            }
            if link && !st.closed && self.link_closed() {
                st.close();
                moved = true;
            }
            if !moved {
                return Ok(());
            }
            st.generation += 1;
            std::mem::take(&mut st.wakers)
        };
        wakers.into_iter().for_each(std::task::Waker::wake);
        Ok(())
    }

    /// True when the out-of-band connection reached end of file or failed. The peer
    /// sends nothing after the exchange; anything it does send is ignored.
    fn link_closed(&self) -> bool {
        let Some(mut link) = self.link.watch() else {
            return false;
        };
        let mut b = [0u8; 64];
        loop {
            match link.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return true,
            }
        }
    }

    /// Arms the CQ; true when completions are already waiting (poll again instead).
    pub(crate) fn arm(&self) -> Result<bool> {
        Ok(self.st.borrow_mut().cq.req_notify()?)
    }

    /// Drains the completion channel; fails when the daemon is gone.
    pub(crate) fn drain_channel(&self) -> Result<()> {
        self.channel.wait(Some(Duration::ZERO))?;
        Ok(())
    }

    /// Runs the completion loop until `check` gives a result, sleeping in poll(2).
    fn block<T>(&self, mut check: impl FnMut(&mut State) -> Option<Result<T>>) -> Result<T> {
        let mut link = false;
        let mut spins = 0;
        loop {
            self.progress(link)?;
            link = false;
            if let Some(r) = check(&mut self.st.borrow_mut()) {
                return r;
            }
            spins += 1;
            if spins < SPINS || self.arm()? {
                std::hint::spin_loop();
                continue;
            }
            match self.sleep()? {
                Wake::Channel => self.drain_channel()?,
                Wake::Link => link = true,
                #[cfg(feature = "tokio")]
                Wake::Progress => {}
            }
        }
    }

    /// Sleeps until the completion channel, the control socket or (while open) the
    /// out-of-band connection is readable.
    fn sleep(&self) -> Result<Wake> {
        let [ev, ctl] = self.channel.wait_fds();
        let closed = self.st.borrow().closed;
        let hup = PollFlags::IN | PollFlags::RDHUP;
        let mut fds = vec![PollFd::new(&ev, PollFlags::IN), PollFd::new(&ctl, hup)];
        if let Some(link) = self.link.watch().filter(|_| !closed) {
            fds.push(PollFd::new(link, hup));
        }
        loop {
            match poll(&mut fds, None) {
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::Io(e.into())),
            }
        }
        if fds[..2].iter().any(|f| !f.revents().is_empty()) {
            Ok(Wake::Channel)
        } else {
            Ok(Wake::Link)
        }
    }

    /// Posts `p` (waiting for room) and waits for its completion.
    fn run(&self, p: &Prepared) -> Result<Done> {
        let id = self.block(|st| st.try_post(&p.req, p.keep.as_ref()))?;
        let t = Ticket::new(self, id);
        let op = p.req.op();
        self.block(|st| st.take(t.id(), op))
    }

    /// The device check, the range in `buf` and its SGE.
    fn local(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
    ) -> Result<(std::ops::Range<usize>, Option<rocex_verbs::verbs::Sge>)> {
        if !buf.device.same(&self.device) {
            return Err(Error::WrongDevice);
        }
        let r = buf.range(range)?;
        let len = r.len() as u64;
        if len > MAX_MESSAGE {
            return Err(Error::MessageTooLarge {
                len,
                max: MAX_MESSAGE,
            });
        }
        let sge = (len > 0).then(|| buf.mr.sge(r.start as u64, len as u32));
        Ok((r, sge))
    }

    pub(crate) fn prepare_write(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
        imm: Option<u32>,
    ) -> Result<Prepared> {
        let (r, sge) = self.local(buf, range)?;
        let addr = remote.check(offset, r.len() as u64)?;
        buf.stage(&r)?;
        Ok(Prepared {
            req: Request::Write {
                sge,
                remote: Remote {
                    addr,
                    rkey: remote.rkey(),
                },
                imm,
            },
            keep: Some(buf.mr.clone()),
        })
    }

    pub(crate) fn prepare_read(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
    ) -> Result<(Prepared, std::ops::Range<usize>)> {
        let (r, sge) = self.local(buf, range)?;
        let addr = remote.check(offset, r.len() as u64)?;
        let p = Prepared {
            req: Request::Read {
                sge,
                remote: Remote {
                    addr,
                    rkey: remote.rkey(),
                },
            },
            keep: Some(buf.mr.clone()),
        };
        Ok((p, r))
    }

    pub(crate) fn prepare_send(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        imm: Option<u32>,
    ) -> Result<Prepared> {
        let (r, sge) = self.local(buf, range)?;
        let max = u64::from(self.peer.recv_size);
        if r.len() as u64 > max {
            return Err(Error::MessageTooLarge {
                len: r.len() as u64,
                max,
            });
        }
        buf.stage(&r)?;
        Ok(Prepared {
            req: Request::Send { sge, imm },
            keep: Some(buf.mr.clone()),
        })
    }

    /// The target of an atomic: inside the token and 8-byte aligned.
    pub(crate) fn atomic_target(remote: &RemoteBuffer, offset: u64) -> Result<Remote> {
        let addr = remote.check(offset, 8)?;
        if addr % 8 != 0 {
            return Err(Error::Misaligned { addr });
        }
        Ok(Remote {
            addr,
            rkey: remote.rkey(),
        })
    }

    /// RDMA WRITE of `range` of `buf` to the peer's buffer at `offset`; returns when the
    /// peer acknowledged it.
    pub fn write(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
    ) -> Result<()> {
        self.run(&self.prepare_write(buf, range, remote, offset, None)?)
            .map(drop)
    }

    /// [`Connection::write`] with immediate data: the peer's next receive
    /// ([`Connection::recv_with_imm`]) reports `imm` with length 0 once the data is there.
    pub fn write_with_imm(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
        imm: u32,
    ) -> Result<()> {
        self.run(&self.prepare_write(buf, range, remote, offset, Some(imm))?)
            .map(drop)
    }

    /// RDMA READ of the peer's buffer at `offset` into `range` of `buf`.
    pub fn read(
        &self,
        buf: &mut Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
    ) -> Result<()> {
        let (p, r) = self.prepare_read(buf, range, remote, offset)?;
        self.run(&p)?;
        buf.unstage(&r)
    }

    /// Sends `range` of `buf` as one message to the peer's next [`Connection::recv`].
    /// At most [`Connection::max_message`] bytes.
    pub fn send(&self, buf: &Buffer, range: impl RangeBounds<usize>) -> Result<()> {
        self.run(&self.prepare_send(buf, range, None)?).map(drop)
    }

    /// [`Connection::send`] with immediate data.
    pub fn send_with_imm(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        imm: u32,
    ) -> Result<()> {
        self.run(&self.prepare_send(buf, range, Some(imm))?)
            .map(drop)
    }

    /// Waits for the next message and copies it into the start of `buf`; its length.
    /// A message longer than `buf` stays queued ([`Error::BufferTooSmall`]).
    pub fn recv(&self, buf: &mut [u8]) -> Result<usize> {
        self.recv_with_imm(buf).map(|(n, _)| n)
    }

    /// [`Connection::recv`], with the message's immediate data (SEND or WRITE with
    /// immediate; a WRITE's notification has length 0).
    pub fn recv_with_imm(&self, buf: &mut [u8]) -> Result<(usize, Option<u32>)> {
        self.block(|st| st.take_arrival(buf))
    }

    /// The request of an atomic on the 8 bytes at `offset` of `remote`.
    pub(crate) fn prepare_atomic(
        remote: &RemoteBuffer,
        offset: u64,
        op: Atomic,
    ) -> Result<Prepared> {
        let remote = Self::atomic_target(remote, offset)?;
        let req = match op {
            Atomic::Add(add) => Request::FetchAdd { remote, add },
            Atomic::Swap { expect, new } => Request::CompareSwap {
                remote,
                expect,
                new,
            },
        };
        Ok(Prepared { req, keep: None })
    }

    /// Atomically adds `add` to the 8 bytes at `offset` of the peer's buffer (aligned, in
    /// the peer's byte order); returns the value before.
    pub fn fetch_add(&self, remote: &RemoteBuffer, offset: u64, add: u64) -> Result<u64> {
        self.run(&Self::prepare_atomic(remote, offset, Atomic::Add(add))?)
            .map(|d| d.old)
    }

    /// Atomically replaces the 8 bytes at `offset` of the peer's buffer with `new` if they
    /// equal `expect`; returns the value before (equal to `expect` when it swapped).
    pub fn compare_swap(
        &self,
        remote: &RemoteBuffer,
        offset: u64,
        expect: u64,
        new: u64,
    ) -> Result<u64> {
        self.run(&Self::prepare_atomic(
            remote,
            offset,
            Atomic::Swap { expect, new },
        )?)
        .map(|d| d.old)
    }
}
