//! Message buffers the kernel reads and writes while an io_uring operation is in flight:
//! a `msghdr` with its iovec, address and bytes. The port keeps its slots in boxed slices
//! that never grow, so that none of them moves while the kernel points into it.

use std::net::SocketAddr;

use socket2::{SockAddr, SockAddrStorage};

/// Room for one control message carrying an `int` (a send's `IP_TOS`/`IPV6_TCLASS`),
/// aligned as `cmsghdr` requires.
#[repr(C, align(8))]
struct Control([u8; 32]);

/// One message and its buffer.
pub(super) struct MsgSlot {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: SockAddrStorage,
    control: Control,
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
            control: Control([0; 32]),
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

    /// Copies `payload` in and returns the header that sends it to `dest`, with IP TOS
    /// (traffic class) `tos` when it is set, else the socket's; `None` when the payload
    /// does not fit.
    pub(super) fn for_send(
        &mut self,
        dest: SocketAddr,
        tos: Option<u8>,
        payload: &[u8],
    ) -> Option<*const libc::msghdr> {
        self.buf.get_mut(..payload.len())?.copy_from_slice(payload);
        let sa = SockAddr::from(dest);
        let addr_len = sa.len();
        self.addr = sa.as_storage();
        let hdr = self.point(payload.len(), addr_len);
        if let Some(tos) = tos {
            let (level, kind) = match dest {
                SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
                SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
            };
            let int = std::mem::size_of::<libc::c_int>() as u32;
            self.hdr.msg_control = self.control.0.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE and CMSG_LEN are arithmetic; msg_control points at 32
            // bytes aligned for cmsghdr, more than CMSG_SPACE(4) (24), so the first header
            // and its data lie inside it.
            unsafe {
                self.hdr.msg_controllen = libc::CMSG_SPACE(int) as _;
                let c = libc::CMSG_FIRSTHDR(&self.hdr);
                (*c).cmsg_level = level;
                (*c).cmsg_type = kind;
                (*c).cmsg_len = libc::CMSG_LEN(int) as _;
                let v = libc::c_int::from(tos);
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), v);
            }
        }
        Some(hdr.cast_const())
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
