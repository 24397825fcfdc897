//! setsockopt(2), for the options socket2 does not cover (packet rings, UDP GRO, path MTU
//! discovery), shared by every backend.

use std::io;
use std::mem;
use std::os::fd::AsRawFd;

/// Sets option `name` at `level` of `fd` to `value`, a plain-data value passed by address
/// with its size.
pub(crate) fn set<T: Copy>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to a live `T` of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
