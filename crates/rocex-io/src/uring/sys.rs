//! The eventfd of the uring backend.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A non-blocking eventfd.
pub(super) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2); the descriptor is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Resets the eventfd's count, if it has one.
pub(super) fn drain(fd: &OwnedFd) -> io::Result<()> {
    let mut count = 0u64;
    // SAFETY: reads the 8-byte counter into `count`, which lives for the call.
    let r = unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::WouldBlock {
            return Err(e);
        }
    }
    Ok(())
}
