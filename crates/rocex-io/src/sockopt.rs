//! setsockopt(2) and getsockopt(2), for the options socket2 does not cover (packet rings, UDP GRO, path MTU
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

/// Reads option `name` at `level` of `fd` into a plain-data `T` (zeroed where the kernel
/// writes less).
pub(crate) fn get<T: Copy + Default>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<T> {
    let mut value = T::default();
    let mut len = mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live, writable `T` of `len` bytes; the kernel writes at most
    // `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if r == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}
