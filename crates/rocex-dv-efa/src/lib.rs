//! A stub `libefa.so.1`. Debian's perftest links rdma-core's EFA "direct verbs" library;
//! the system's copy needs libibverbs' private ABI, which rocex's libibverbs does not
//! offer. This one exports what those programs import, each answering "not this device"
//! (`EOPNOTSUPP`, or NULL with errno `EOPNOTSUPP`), so they run on rocex's generic verbs.

use core::ffi::{c_int, c_void};

/// `efadv_query_device`: not an EFA device.
#[unsafe(no_mangle)]
pub extern "C" fn efadv_query_device(
    _context: *mut c_void,
    _attr: *mut c_void,
    _inlen: u32,
) -> c_int {
    libc::EOPNOTSUPP
}

/// `efadv_create_qp_ex`.
#[unsafe(no_mangle)]
pub extern "C" fn efadv_create_qp_ex(
    _context: *mut c_void,
    _attr: *mut c_void,
    _efa_attr: *mut c_void,
    _inlen: u32,
) -> *mut c_void {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
    core::ptr::null_mut()
}

core::arch::global_asm!(
    ".symver efadv_query_device, efadv_query_device@@EFA_1.1",
    ".symver efadv_create_qp_ex, efadv_create_qp_ex@@EFA_1.1",
);
