//! A drop-in `librdmacm.so.1` over `rocexd`: rdma-core's public, versioned rdma_cm ABI
//! (`RDMACM_1.0` ... `RDMACM_1.3`), so that programs built against rdma-core (rping,
//! ucmatose, rdma_server/rdma_client, perftest's `-R`, fio's rdma engine) connect through
//! rocexd's connection manager unchanged. `rocex run -- PROGRAM` puts it first on the
//! library path beside rocex's libibverbs (`docs/verbs.md`).
//!
//! rocexd runs the IB CM (REQ, REP, RTU, REJ, DREQ, DREP) and moves the QPs
//! (`docs/daemon.md` "rdma_cm"); this library keeps rdma_cm's objects (event channels,
//! ids, their addresses and state) and drives the daemon through rocex's libibverbs
//! ([`verbs`]): each device is opened once per process and its `ibv_context` is every id's
//! `verbs`. Address and route resolution happen here, from the kernel's routing table and
//! the devices' addresses; connection events come from the daemon, which a thread of this
//! library polls ([`poller`]) and hands to the event channels, whose descriptors are
//! eventfds a program can poll.
//!
//! Threads: all state lives in one registry behind a mutex ([`registry`]), taken by every
//! entry point except while it blocks for an event.

pub mod abi;
pub mod addrinfo;
pub mod channel;
pub mod conn;
pub mod ep;
pub mod id;
pub mod poller;
pub mod qp;
pub mod registry;
pub mod resolve;
pub mod sockaddr;
pub mod verbs;

use core::ffi::c_int;

/// Gives each listed function its symbol version, as rdma-core's `librdmacm.map`
/// assigns it (`name@@NODE`). The nodes are declared in `librdmacm.map`.
macro_rules! symver {
    ($($name:ident @ $node:literal),* $(,)?) => {
        core::arch::global_asm!(
            $(concat!(".symver ", stringify!($name), ", ", stringify!($name), "@@", $node)),*
        );
    };
}
pub(crate) use symver;

/// Exports `inner` under rdma-core's name as a thin C wrapper: the library's own callers
/// call `inner`, so that no other object file refers to the exported symbol, whose
/// `.symver` (optimized builds otherwise fail to assemble) must sit beside its definition.
macro_rules! export {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),* $(,)?) $(-> $r:ty)? = $inner:path;) => {
        $(#[$m])*
        ///
        /// # Safety
        ///
        /// As for the function it calls.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) $(-> $r)? {
            // SAFETY: the caller keeps the contract of the function called.
            unsafe { $inner($($a),*) }
        }
    };
}
pub(crate) use export;

/// Sets the thread's errno (the C library's).
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// -1 with errno set: how rdma-core's calls fail.
pub(crate) fn fail(e: i32) -> c_int {
    trace(e);
    set_errno(e);
    -1
}

/// 0, or -1 with errno `e` when `e` is not 0.
pub(crate) fn status(e: i32) -> c_int {
    if e == 0 { 0 } else { fail(e) }
}

/// NULL with errno set: how rdma-core's constructors fail.
pub(crate) fn null_errno<T>(e: i32) -> *mut T {
    set_errno(e);
    core::ptr::null_mut()
}

/// True when `ROCEX_DEBUG` is set to anything but `0` or empty.
pub(crate) fn debug() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ROCEX_DEBUG").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Logs (with `ROCEX_DEBUG=1`) the errno a call fails with.
fn trace(e: i32) {
    if debug() {
        eprintln!(
            "librdmacm (rocex): failing with {}",
            std::io::Error::from_raw_os_error(e)
        );
    }
}
