//! The mapping: a memfd shared between rocexd and one client, seen as [`ShmView`].
//!
//! This and the view's bulk copies ([`crate::mem`]) are the crate's only `unsafe` code.
//! Everything above them works on the safe view.
//!
//! A memfd the other side can shrink would turn the daemon's next access into SIGBUS, so
//! the creator seals the size (`F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`) and a receiver
//! refuses a memfd without `F_SEAL_SHRINK`.

use crate::mem::ShmView;
use crate::sync::AtomicU32;
use core::ptr::NonNull;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use std::io;

/// A shared memory region mapped read-write into this process.
#[derive(Debug)]
pub struct SharedRegion {
    fd: OwnedFd,
    ptr: NonNull<AtomicU32>,
    len: usize,
}

// SAFETY: the region is only accessed through `&AtomicU32` (see `view`), which is Sync; the
// mapping itself is not tied to a thread, and unmapping needs `&mut`/ownership (Drop).
unsafe impl Send for SharedRegion {}
// SAFETY: as above; shared access hands out only atomics.
unsafe impl Sync for SharedRegion {}

fn page_size() -> usize {
    rustix::param::page_size()
}

impl SharedRegion {
    /// Creates a sealed memfd of `len` bytes (rounded up to a page) and maps it.
    pub fn create(name: &str, len: usize) -> io::Result<Self> {
        let len = len.max(1).next_multiple_of(page_size());
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Self::map(fd, len)
    }

    /// Maps a memfd received from the other side. Refuses one whose size is not sealed
    /// against shrinking, or whose size is 0 or not a multiple of the page size.
    pub fn from_fd(fd: OwnedFd) -> io::Result<Self> {
        let seals = rustix::fs::fcntl_get_seals(&fd)?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "shared memory fd is not sealed against shrinking",
            ));
        }
        let size = rustix::fs::fstat(&fd)?.st_size;
        let len = usize::try_from(size)
            .ok()
            .filter(|&l| l > 0 && l % page_size() == 0)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad shared memory size"))?;
        Self::map(fd, len)
    }

    fn map(fd: OwnedFd, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping chosen by the kernel (null hint, no MAP_FIXED), so
        // it overlaps no existing Rust object; `fd` is a sealed memfd of at least `len`
        // bytes that cannot shrink, so every byte of the mapping stays backed.
        let raw = unsafe {
            rustix::mm::mmap(
                core::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )?
        };
        let ptr = NonNull::new(raw.cast::<AtomicU32>())
            .ok_or_else(|| io::Error::other("mmap returned null"))?;
        // mmap returns page-aligned addresses; check rather than assume, since the view
        // below relies on it.
        if ptr
            .as_ptr()
            .align_offset(core::mem::align_of::<AtomicU32>())
            != 0
        {
            // SAFETY: `raw`/`len` is the mapping just created and nothing refers to it.
            let _ = unsafe { rustix::mm::munmap(raw, len) };
            return Err(io::Error::other("misaligned mapping"));
        }
        Ok(Self { fd, ptr, len })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd, to pass to the other process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The region as atomic words.
    pub fn view(&self) -> ShmView<'_> {
        // SAFETY: `ptr` is the start of a live read-write mapping of `len` bytes that lives
        // as long as `self` (unmapped only in Drop), aligned for AtomicU32 (checked in
        // `map`) and `len` is a multiple of 4 (a page multiple). AtomicU32 has the size,
        // alignment and validity of u32, so every bit pattern is a valid value. Other
        // threads reach the memory only through this same view; another process may write
        // it with any instruction, which this process observes only through the view's
        // atomic loads and its copies into private memory, never through a reference.
        let words = unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len / 4) };
        ShmView::new(words)
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` is the mapping made in `map`; every view borrowed `self`, so
        // none outlives this call.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Sends `data` and `fds` over a Unix socket in one message (SCM_RIGHTS).
pub fn send_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space =
        vec![core::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many fds for one message"));
    }
    Ok(sendmsg(
        sock,
        &[io::IoSlice::new(data)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?)
}

/// Receives one message of at most `buf.len()` bytes and up to `max_fds` descriptors.
/// Descriptors beyond `max_fds`, or a truncated message, are an error (the received fds are
/// closed).
pub fn recv_fds(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut space =
        vec![core::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(max_fds.max(1)))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = recvmsg(
        sock,
        &mut [io::IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(r) = m {
            fds.extend(r);
        }
    }
    if msg.flags.contains(rustix::net::ReturnFlags::CTRUNC)
        || msg.flags.contains(rustix::net::ReturnFlags::TRUNC)
        || fds.len() > max_fds
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "truncated message or too many fds",
        ));
    }
    Ok((msg.bytes, fds))
}
