//! Message buffers the kernel reads and writes while an io_uring operation is in flight:
//! a `msghdr` with its iovec, address and bytes. The port keeps its slots in boxed slices
//! that never grow, so that none of them moves while the kernel points into it.

use std::net::SocketAddr;

use socket2::{SockAddr, SockAddrStorage};

/// One message and its buffer.
pub(super) struct MsgSlot {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: SockAddrStorage,
    buf: Box<[u8]>,
}

impl std::fmt::Debug for MsgSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsgSlot")
            .field("len", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl MsgSlot {
    /// A slot with a buffer of `len` bytes.
    pub(super) fn new(len: usize) -> Self {
        Self {
            // SAFETY: msghdr and iovec are plain data; all zeroes is a valid value.
            hdr: unsafe { std::mem::zeroed() },
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            addr: SockAddrStorage::zeroed(),
            buf: vec![0; len].into_boxed_slice(),
        }
    }

    /// Points the header at this slot's own address and the first `len` bytes of its
    /// buffer. The pointers stay valid while the slot neither moves nor is touched.
    fn point(&mut self, len: usize, addr_len: libc::socklen_t) -> *mut libc::msghdr {
        self.iov.iov_base = self.buf.as_mut_ptr().cast();
        self.iov.iov_len = len;
        self.hdr.msg_name = (&raw mut self.addr).cast();
        self.hdr.msg_namelen = addr_len;
        self.hdr.msg_iov = &raw mut self.iov;
        self.hdr.msg_iovlen = 1;
        self.hdr.msg_control = std::ptr::null_mut();
        self.hdr.msg_controllen = 0;
        self.hdr.msg_flags = 0;
        &raw mut self.hdr
    }

    /// The header for receiving one datagram into the whole buffer.
    pub(super) fn for_recv(&mut self) -> *mut libc::msghdr {
        let len = self.buf.len();
        let addr_len = self.addr.size_of();
        self.point(len, addr_len)
    }

    /// Copies `payload` in and returns the header that sends it to `dest`; `None` when the
    /// payload does not fit.
    pub(super) fn for_send(
        &mut self,
        dest: SocketAddr,
        payload: &[u8],
    ) -> Option<*const libc::msghdr> {
        self.buf.get_mut(..payload.len())?.copy_from_slice(payload);
        let sa = SockAddr::from(dest);
        let addr_len = sa.len();
        self.addr = sa.as_storage();
        Some(self.point(payload.len(), addr_len).cast_const())
    }

    /// The sender of the datagram a completed receive wrote, and its first `len` bytes.
    pub(super) fn received(&mut self, len: usize) -> (Option<SocketAddr>, &[u8]) {
        let storage = std::mem::replace(&mut self.addr, SockAddrStorage::zeroed());
        // SAFETY: the kernel wrote an address of the socket's family into the storage and
        // its length into the header.
        let sa = unsafe { SockAddr::new(storage, self.hdr.msg_namelen) };
        (sa.as_socket(), &self.buf[..len.min(self.buf.len())])
    }
}
