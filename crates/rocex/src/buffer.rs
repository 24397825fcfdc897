//! [`Buffer`]: a registered buffer, and the [`Rights`] a peer gets to it.
//!
//! The device's copy of a buffer lives in a memfd the daemon maps, and the daemon may
//! write it at any moment, so handing out `&[u8]` over it would be a data race in Rust's
//! model. A `Buffer` therefore pairs the registered memory with the application's own
//! bytes (what it derefs to) and copies between them where an operation needs it:
//! local sources are copied in when an operation starts, local destinations copied out
//! when it completes. Only the peer's own one-sided operations on a shared buffer reach
//! the registered copy directly; [`Buffer::refresh`] and [`Buffer::flush`] move those
//! bytes.

use std::fmt;
use std::ops::{BitOr, Bound, Deref, DerefMut, Range, RangeBounds};
use std::rc::Rc;

use rocex_verbs::{Access, Mr};

use crate::device::Device;
use crate::error::{Error, Result, Side};
use crate::token::RemoteBuffer;

/// What a peer may do to a shared buffer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rights(u8);

impl Rights {
    /// Nothing.
    pub const NONE: Self = Self(0);
    /// RDMA READ.
    pub const READ: Self = Self(1);
    /// RDMA WRITE.
    pub const WRITE: Self = Self(2);
    /// Atomics (fetch-and-add, compare-and-swap).
    pub const ATOMIC: Self = Self(4);
    /// Every right.
    pub const ALL: Self = Self(7);

    /// True when every right of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// The registration flags: local write always (operations land in the buffer), plus
    /// the remote rights.
    fn access(self) -> Access {
        let mut a = Access::LOCAL_WRITE;
        for (r, x) in [
            (Self::READ, Access::REMOTE_READ),
            (Self::WRITE, Access::REMOTE_WRITE),
            (Self::ATOMIC, Access::REMOTE_ATOMIC),
        ] {
            if self.contains(r) {
                a |= x;
            }
        }
        a
    }
}

impl BitOr for Rights {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for Rights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = [
            (Self::READ, "READ"),
            (Self::WRITE, "WRITE"),
            (Self::ATOMIC, "ATOMIC"),
        ]
        .into_iter()
        .filter(|(r, _)| self.contains(*r))
        .map(|(_, n)| n)
        .collect();
        if names.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&names.join(" | "))
        }
    }
}

/// A buffer registered with a device: bytes the application reads and writes directly
/// (it derefs to `[u8]`), usable as the local side of every operation of a
/// [`Connection`](crate::Connection) of the same device.
pub struct Buffer {
    data: Vec<u8>,
    /// Shared with operations in flight, so the registration outlives a cancelled one.
    pub(crate) mr: Rc<Mr>,
    rights: Rights,
    pub(crate) device: Device,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("len", &self.data.len())
            .field("rights", &self.rights)
            .finish()
    }
}

impl Buffer {
    pub(crate) fn new(device: Device, len: usize) -> Result<Self> {
        let mr = device.inner.pd.alloc_mr(len, Rights::NONE.access())?;
        Ok(Self {
            data: vec![0; len],
            mr: Rc::new(mr),
            rights: Rights::NONE,
            device,
        })
    }

    /// Lets the peer reach the whole buffer with `rights`, and returns the token to give
    /// it. The buffer's current bytes become what the peer sees ([`Buffer::flush`]).
    ///
    /// A buffer has one set of rights at a time: sharing with other rights than before
    /// registers it anew, which revokes every token handed out earlier.
    pub fn share(&mut self, rights: Rights) -> Result<RemoteBuffer> {
        if rights != self.rights {
            self.register(rights)?;
        }
        self.flush()?;
        Ok(RemoteBuffer::new(
            self.mr.addr(),
            self.mr.rkey(),
            self.data.len() as u64,
        ))
    }

    /// Revokes every token of this buffer: the peer can no longer reach it.
    pub fn revoke(&mut self) -> Result<()> {
        if self.rights != Rights::NONE {
            self.register(Rights::NONE)?;
        }
        Ok(())
    }

    /// The rights peers have now.
    pub fn rights(&self) -> Rights {
        self.rights
    }

    /// Copies what the peer wrote (RDMA WRITE, atomics) into the buffer's bytes.
    pub fn refresh(&mut self) -> Result<()> {
        Ok(self.mr.read(0, &mut self.data)?)
    }

    /// Makes the buffer's bytes what the peer reads from now on.
    pub fn flush(&self) -> Result<()> {
        Ok(self.mr.write(0, &self.data)?)
    }

    fn register(&mut self, rights: Rights) -> Result<()> {
        let mr = self
            .device
            .inner
            .pd
            .alloc_mr(self.data.len(), rights.access())?;
        self.mr = Rc::new(mr);
        self.rights = rights;
        Ok(())
    }

    /// `range` of the buffer as a checked `Range`.
    pub(crate) fn range(&self, range: impl RangeBounds<usize>) -> Result<Range<usize>> {
        let len = self.data.len();
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(len),
        };
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= len => Ok(s..e),
            _ => Err(Error::OutOfRange {
                side: Side::Local,
                offset: start.unwrap_or(usize::MAX) as u64,
                len: end.unwrap_or(usize::MAX).saturating_sub(start.unwrap_or(0)) as u64,
                size: len as u64,
            }),
        }
    }

    /// Copies `r` of the application's bytes into the registered copy (an operation's
    /// source).
    pub(crate) fn stage(&self, r: &Range<usize>) -> Result<()> {
        Ok(self.mr.write(r.start, &self.data[r.clone()])?)
    }

    /// Copies `r` of the registered copy into the application's bytes (an operation's
    /// destination, once it completed).
    pub(crate) fn unstage(&mut self, r: &Range<usize>) -> Result<()> {
        Ok(self.mr.read(r.start, &mut self.data[r.clone()])?)
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}
