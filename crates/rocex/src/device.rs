//! [`Device`]: one open `rocexd`, with the protection domain every buffer and connection
//! of it shares.

use std::fmt;
use std::net::IpAddr;
use std::path::Path;
use std::rc::Rc;

use rocex_verbs::verbs::Mtu;
use rocex_verbs::{Context, Pd};

use crate::buffer::Buffer;
use crate::error::{Error, Result};

/// An open device: a connection to one `rocexd`.
///
/// Cloning is cheap (the clones share the connection). A device and everything made from
/// it belong to one thread (the verbs objects under it are not `Send`); with tokio, use a
/// current-thread runtime or a `LocalSet`.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Rc<Inner>,
}

pub(crate) struct Inner {
    /// Declared before `ctx`: deallocated before the context goes.
    pub(crate) pd: Pd,
    pub(crate) ctx: Context,
    pub(crate) mtu: Mtu,
    pub(crate) max_rd_atomic: u8,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("addr", &self.addr())
            .field("mtu", &self.inner.mtu)
            .finish()
    }
}

/// READs and atomics a connection keeps outstanding at most, whatever the device allows:
/// a few, since each READ answer is a burst of up to a message's packets.
const RD_ATOMIC_MAX: u32 = 4;

impl Device {
    /// Opens the device at `$ROCEX_SOCKET`, else the only `rocexd` running
    /// ([`rocex_verbs::default_socket`]).
    pub fn open() -> Result<Self> {
        Self::open_at(rocex_verbs::default_socket()?)
    }

    /// Opens the device whose daemon listens on the Unix socket `path`, on the daemon path
    /// (`docs/verbs.md`, "Direct mode"): a connection made by rdma_cm learns of the peer's
    /// disconnect from its QP, which rocexd's CM moves to ERROR on the DREQ, where a direct
    /// context's QP moves only once its CM events are polled, which this API does only
    /// while it connects.
    pub fn open_at(path: impl AsRef<Path>) -> Result<Self> {
        let ctx = Context::open_daemon_path(path)?;
        let attr = ctx.query_device()?;
        let mtu = Mtu::from_ibv(attr.mtu).ok_or_else(|| {
            Error::Device(rocex_verbs::Error::Protocol(format!(
                "device MTU code {}",
                attr.mtu
            )))
        })?;
        let pd = ctx.alloc_pd()?;
        Ok(Self {
            inner: Rc::new(Inner {
                pd,
                ctx,
                mtu,
                max_rd_atomic: attr.max_qp_rd_atom.clamp(1, RD_ATOMIC_MAX) as u8,
            }),
        })
    }

    /// A zeroed buffer of `len` bytes, registered for local use. [`Buffer::share`] grants
    /// a peer access to it.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        Buffer::new(self.clone(), len)
    }

    /// The device's IP address (its GID).
    pub fn addr(&self) -> IpAddr {
        self.inner.ctx.gid_addr()
    }

    /// The device's MTU in payload bytes per packet.
    pub fn mtu(&self) -> u32 {
        self.inner.mtu.bytes()
    }

    pub(crate) fn same(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }
}
