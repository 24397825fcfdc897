//! The async half (feature `tokio`): the same completion loop as the blocking calls, but
//! sleeping in tokio's reactor. The completion channel's eventfd, the daemon's control
//! socket and the out-of-band TCP connection are registered with [`AsyncFd`]; a waiter
//! also wakes when another caller routed completions ([`State::generation`]), since the
//! completion it waits for may have been among them.

use std::future::poll_fn;
use std::net::TcpListener;
use std::ops::RangeBounds;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::pin;
use std::task::Poll;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::buffer::Buffer;
use crate::connect::{Config, Endpoint, Listener};
use crate::connection::{Atomic, Connection, Prepared, Ticket, Wake};
use crate::device::Device;
use crate::error::Result;
use crate::exchange::{self, HandshakeError};
use crate::state::{Done, State};
use crate::token::RemoteBuffer;

/// A connection's descriptors, registered with the tokio reactor of the first async call.
pub(crate) struct Reactor {
    ev: AsyncFd<OwnedFd>,
    ctl: AsyncFd<OwnedFd>,
    /// The TCP link; none for an rdma_cm connection.
    link: Option<AsyncFd<OwnedFd>>,
}

/// Registers a duplicate of `fd` for readability.
fn register(fd: impl AsFd) -> Result<AsyncFd<OwnedFd>> {
    own(fd.as_fd().try_clone_to_owned()?)
}

/// Registers `fd` for readability.
#[allow(unsafe_code)]
fn own<T: AsRawFd>(fd: T) -> Result<AsyncFd<T>> {
    // SAFETY: `T` is `OwnedFd` or `TcpListener`: it owns its descriptor, which stays open
    // and names the same open file until the `AsyncFd` (its only owner) drops it, and
    // `as_raw_fd` always returns that descriptor. Nothing here reaches `get_mut`.
    let r = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
    r.map_err(|e| crate::Error::Io(e.into()))
}

impl Reactor {
    fn new(conn: &Connection) -> Result<Self> {
        let [ev, ctl] = conn.channel.wait_fds();
        Ok(Self {
            ev: register(ev)?,
            ctl: register(ctl)?,
            link: conn.link.watch().map(register).transpose()?,
        })
    }

    /// Sleeps until a descriptor is readable or another caller made progress.
    async fn wait(&self, conn: &Connection) -> Result<Wake> {
        let (seen, closed) = {
            let st = conn.st.borrow();
            (st.generation, st.closed)
        };
        let mut ev = pin!(self.ev.readable());
        let mut ctl = pin!(self.ctl.readable());
        let mut link = pin!(async {
            match &self.link {
                Some(l) => l.readable().await,
                None => std::future::pending().await,
            }
        });
        poll_fn(|cx| {
            {
                let mut st = conn.st.borrow_mut();
                if st.generation != seen {
                    return Poll::Ready(Ok(Wake::Progress));
                }
                if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    st.wakers.push(cx.waker().clone());
                }
            }
            let ready = [
                (ev.as_mut().poll(cx), Wake::Channel),
                (ctl.as_mut().poll(cx), Wake::Channel),
                if closed {
                    (Poll::Pending, Wake::Link)
                } else {
                    (link.as_mut().poll(cx), Wake::Link)
                },
            ];
            for (r, wake) in ready {
                if let Poll::Ready(r) = r {
                    return Poll::Ready(r.map(|mut g| {
                        g.clear_ready();
                        wake
                    }));
                }
            }
            Poll::Pending
        })
        .await
        .map_err(Into::into)
    }
}

impl Connection {
    fn reactor(&self) -> Result<&Reactor> {
        if let Some(r) = self.reactor.get() {
            return Ok(r);
        }
        let r = Reactor::new(self)?;
        Ok(self.reactor.get_or_init(|| r))
    }

    /// Runs the completion loop until `check` gives a result, sleeping in the reactor.
    async fn until<T>(&self, mut check: impl FnMut(&mut State) -> Option<Result<T>>) -> Result<T> {
        let reactor = self.reactor()?;
        let mut link = false;
        loop {
            self.progress(link)?;
            link = false;
            if let Some(r) = check(&mut self.st.borrow_mut()) {
                return r;
            }
            if self.arm()? {
                continue;
            }
            match reactor.wait(self).await? {
                Wake::Channel => self.drain_channel()?,
                Wake::Link => link = true,
                Wake::Progress => {}
            }
        }
    }

    async fn run_async(&self, p: &Prepared) -> Result<Done> {
        let id = self
            .until(|st| st.try_post(&p.req, p.keep.as_ref()))
            .await?;
        let t = Ticket::new(self, id);
        let op = p.req.op();
        self.until(|st| st.take(t.id(), op)).await
    }

    /// [`Connection::write`], async.
    pub async fn write_async(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
    ) -> Result<()> {
        let p = self.prepare_write(buf, range, remote, offset, None)?;
        self.run_async(&p).await.map(drop)
    }

    /// [`Connection::write_with_imm`], async.
    pub async fn write_with_imm_async(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
        imm: u32,
    ) -> Result<()> {
        let p = self.prepare_write(buf, range, remote, offset, Some(imm))?;
        self.run_async(&p).await.map(drop)
    }

    /// [`Connection::read`], async.
    pub async fn read_async(
        &self,
        buf: &mut Buffer,
        range: impl RangeBounds<usize>,
        remote: &RemoteBuffer,
        offset: u64,
    ) -> Result<()> {
        let (p, r) = self.prepare_read(buf, range, remote, offset)?;
        self.run_async(&p).await?;
        buf.unstage(&r)
    }

    /// [`Connection::send`], async.
    pub async fn send_async(&self, buf: &Buffer, range: impl RangeBounds<usize>) -> Result<()> {
        let p = self.prepare_send(buf, range, None)?;
        self.run_async(&p).await.map(drop)
    }

    /// [`Connection::send_with_imm`], async.
    pub async fn send_with_imm_async(
        &self,
        buf: &Buffer,
        range: impl RangeBounds<usize>,
        imm: u32,
    ) -> Result<()> {
        let p = self.prepare_send(buf, range, Some(imm))?;
        self.run_async(&p).await.map(drop)
    }

    /// [`Connection::recv`], async.
    pub async fn recv_async(&self, buf: &mut [u8]) -> Result<usize> {
        self.recv_with_imm_async(buf).await.map(|(n, _)| n)
    }

    /// [`Connection::recv_with_imm`], async.
    pub async fn recv_with_imm_async(&self, buf: &mut [u8]) -> Result<(usize, Option<u32>)> {
        self.until(|st| st.take_arrival(buf)).await
    }

    /// [`Connection::fetch_add`], async.
    pub async fn fetch_add_async(
        &self,
        remote: &RemoteBuffer,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        let p = Self::prepare_atomic(remote, offset, Atomic::Add(add))?;
        self.run_async(&p).await.map(|d| d.old)
    }

    /// [`Connection::compare_swap`], async.
    pub async fn compare_swap_async(
        &self,
        remote: &RemoteBuffer,
        offset: u64,
        expect: u64,
        new: u64,
    ) -> Result<u64> {
        let p = Self::prepare_atomic(remote, offset, Atomic::Swap { expect, new })?;
        self.run_async(&p).await.map(|d| d.old)
    }

    /// [`Connection::connect`], async.
    pub async fn connect_async(
        device: &Device,
        addr: impl tokio::net::ToSocketAddrs,
    ) -> Result<Self> {
        Self::connect_async_with(device, addr, Config::default()).await
    }

    /// [`Connection::connect_with`], async.
    pub async fn connect_async_with(
        device: &Device,
        addr: impl tokio::net::ToSocketAddrs,
        config: Config,
    ) -> Result<Self> {
        let t = config.handshake_timeout;
        let mut s = tokio::time::timeout(t, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| HandshakeError::Timeout)??;
        let mut ep = Endpoint::new(device, &config)?;
        let peer = exchange::nonblocking::dial(&mut s, ep.ours, t, |p| ep.bring_up(p)).await?;
        ep.finish(peer, s.into_std()?)
    }
}

impl Listener {
    /// [`Listener::accept`], async.
    pub async fn accept_async(&self) -> Result<Connection> {
        let (device, tcp, config) = self.parts();
        tcp.set_nonblocking(true)?;
        let listener: AsyncFd<TcpListener> = own(tcp.try_clone()?)?;
        let link = loop {
            let mut g = listener.readable().await?;
            if let Ok(r) = g.try_io(|l| l.get_ref().accept()) {
                break r?.0;
            }
        };
        link.set_nonblocking(true)?;
        let mut s = tokio::net::TcpStream::from_std(link)?;
        let mut ep = Endpoint::new(device, config)?;
        let t = config.handshake_timeout;
        let peer = exchange::nonblocking::answer(&mut s, ep.ours, t, |p| ep.bring_up(p)).await?;
        ep.finish(peer, s.into_std()?)
    }
}
