//! The NULL-terminated arrays of pointers rdma-core's list calls return
//! (`ibv_get_device_list`, `rdma_get_devices`), which the program hands back to their free
//! calls, `free(3)` here.

use core::ffi::c_int;

/// `items` in a `calloc`'d array with a NULL after the last, and their number in `*count`
/// when `count` is not NULL; NULL with errno `ENOMEM` (calloc's) when the allocation fails.
///
/// # Safety
///
/// `count` is NULL or writable.
pub unsafe fn calloc_list<T>(items: &[*mut T], count: *mut c_int) -> *mut *mut T {
    // SAFETY: calloc of items.len() + 1 pointers, freed by the list's free call.
    let list = unsafe { libc::calloc(items.len() + 1, size_of::<*mut T>()) }.cast::<*mut T>();
    if list.is_null() {
        return list;
    }
    for (i, p) in items.iter().enumerate() {
        // SAFETY: `list` has items.len() + 1 slots.
        unsafe { *list.add(i) = *p };
    }
    if !count.is_null() {
        // SAFETY: per the contract.
        unsafe { *count = items.len() as c_int };
    }
    list
}
