//! A drop-in `libibverbs.so.1` over `rocexd`: rdma-core's public, versioned ABI
//! (`IBVERBS_1.0` ... `IBVERBS_1.14`), so that programs built against rdma-core (perftest,
//! the ibverbs-utils examples, anything linked with `-libverbs`) run unchanged on rocex.
//! `rocex run -- PROGRAM` puts it first on the library path (`docs/verbs.md`).
//!
//! Each object the library hands out is a `#[repr(C)]` struct that starts with rdma-core's
//! public struct ([`abi`]) and carries the rocex-verbs object behind it. The data path is
//! where verbs.h's inline functions look for it: `ibv_context.ops` (post_send, post_recv,
//! poll_cq, req_notify_cq) and `verbs_context`'s extended operations in front of the
//! context (create_qp_ex, create_cq_ex, query_device_ex, the `ibv_qp_ex` work-request
//! functions).
//!
//! Threads: C programs call verbs from several threads (a CQ thread beside the poster).
//! rocex-verbs objects share one control connection through `Rc`, so every object of a
//! context is reached only under that context's mutex ([`ctx::Ctx::lock`]); nothing of
//! rocex-verbs is touched without it, and blocking waits (`ibv_get_cq_event`) poll the raw
//! descriptors without holding it.

pub mod abi;
pub mod ah;
pub mod cq;
pub mod cq_resize;
pub mod ctx;
pub mod device;
pub mod events;
pub mod gid;
pub mod misc;
pub mod mr;
pub mod mw;
pub mod private;
pub mod qp;
pub mod qp_caps;
pub mod qp_ex;
pub mod remap;
pub mod srq;

use std::sync::OnceLock;

/// Gives each listed function its symbol version, as rdma-core's `libibverbs.map.in`
/// assigns it (`name@@NODE`: the default version binaries link against). The nodes
/// themselves are declared in `libibverbs.map`.
macro_rules! symver {
    ($($name:ident @ $node:literal),* $(,)?) => {
        core::arch::global_asm!(
            $(concat!(".symver ", stringify!($name), ", ", stringify!($name), "@@", $node)),*
        );
    };
}
pub(crate) use symver;

/// Sets the thread's errno (the C library's).
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// NULL with errno set: how rdma-core's constructors fail.
pub(crate) fn null_errno<T>(e: i32) -> *mut T {
    set_errno(e);
    core::ptr::null_mut()
}

/// True when `ROCEX_DEBUG` is set to anything but `0` or empty.
pub(crate) fn debug() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("ROCEX_DEBUG").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Logs (with `ROCEX_DEBUG=1`) that the program called a verb rocex does not provide, and
/// what it was told.
pub(crate) fn unsupported(verb: &str, answer: &str) {
    if debug() {
        eprintln!("rocex: {verb}: not supported by rocex ({answer})");
    }
}

/// Logs (with `ROCEX_DEBUG=1`) why a verb failed.
pub(crate) fn trace(verb: &str, why: &dyn std::fmt::Display) {
    if debug() {
        eprintln!("rocex: {verb}: {why}");
    }
}

/// The errno a rocex-verbs error means to a C caller.
pub(crate) fn errno_of(e: &rocex_verbs::Error) -> i32 {
    use rocex_verbs::Error;
    match e {
        Error::Io(io) => io.raw_os_error().unwrap_or(libc::EIO),
        Error::Daemon { errno, .. } => *errno as i32,
        Error::Limit { .. } => libc::ENOMEM,
        Error::QueueFull => libc::ENOMEM,
        Error::Post(_) => libc::EINVAL,
        Error::DaemonGone => libc::EIO,
        Error::Timeout => libc::ETIMEDOUT,
        // What a direct context does not offer (rdma_cm through ROCEX_PRIVATE_1).
        Error::Unsupported { .. } => libc::EOPNOTSUPP,
        // No daemon at the device's socket: the socket's own reason, ENOENT (no file) or
        // ECONNREFUSED (a dead daemon's file), which a program's perror then names.
        Error::Connect { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        _ => libc::EIO,
    }
}
