//! The rest of the public ABI: the `*_str` helpers, rate conversions, fork support, async
//! events, and the verbs rocex does not offer, which answer as rdma-core does for a
//! device without them (NULL with errno EOPNOTSUPP, or the error code).

use core::ffi::{c_char, c_int, c_void};

use crate::abi::*;
use crate::ctx::Ctx;
use crate::{null_errno, set_errno, symver, unsupported};

macro_rules! cstr {
    ($s:literal) => {
        concat!($s, "\0").as_ptr().cast::<c_char>()
    };
}

/// `ibv_wc_status_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    match status {
        0 => cstr!("success"),
        1 => cstr!("local length error"),
        2 => cstr!("local QP operation error"),
        3 => cstr!("local EE context operation error"),
        4 => cstr!("local protection error"),
        5 => cstr!("Work Request Flushed Error"),
        6 => cstr!("memory management operation error"),
        7 => cstr!("bad response error"),
        8 => cstr!("local access error"),
        9 => cstr!("remote invalid request error"),
        10 => cstr!("remote access error"),
        11 => cstr!("remote operation error"),
        12 => cstr!("transport retry counter exceeded"),
        13 => cstr!("RNR retry counter exceeded"),
        14 => cstr!("local RDD violation error"),
        15 => cstr!("remote invalid RD request"),
        16 => cstr!("aborted error"),
        17 => cstr!("invalid EE context number"),
        18 => cstr!("invalid EE context state"),
        19 => cstr!("fatal error"),
        20 => cstr!("response timeout error"),
        21 => cstr!("general error"),
        22 => cstr!("TM error"),
        23 => cstr!("TM software rendezvous"),
        _ => cstr!("unknown"),
    }
}

/// `ibv_node_type_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_node_type_str(t: c_int) -> *const c_char {
    match t {
        1 => cstr!("InfiniBand channel adapter"),
        2 => cstr!("InfiniBand switch"),
        3 => cstr!("InfiniBand router"),
        4 => cstr!("iWARP NIC"),
        5 => cstr!("usNIC"),
        6 => cstr!("usNIC UDP"),
        7 => cstr!("unspecified"),
        _ => cstr!("unknown"),
    }
}

/// `ibv_port_state_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_port_state_str(s: c_int) -> *const c_char {
    match s {
        0 => cstr!("no state change (NOP)"),
        1 => cstr!("down"),
        2 => cstr!("init"),
        3 => cstr!("armed"),
        4 => cstr!("active"),
        5 => cstr!("active defer"),
        _ => cstr!("unknown"),
    }
}

/// `ibv_event_type_str`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_event_type_str(e: c_int) -> *const c_char {
    match e {
        0 => cstr!("CQ error"),
        1 => cstr!("local work queue catastrophic error"),
        2 => cstr!("invalid request local work queue error"),
        3 => cstr!("local access violation work queue error"),
        4 => cstr!("communication established"),
        5 => cstr!("send queue drained"),
        6 => cstr!("path migrated"),
        7 => cstr!("path migration request error"),
        8 => cstr!("local catastrophic error"),
        9 => cstr!("port active"),
        10 => cstr!("port error"),
        11 => cstr!("LID change"),
        12 => cstr!("P_Key change"),
        13 => cstr!("SM change"),
        14 => cstr!("SRQ catastrophic error"),
        15 => cstr!("SRQ limit reached"),
        16 => cstr!("last WQE reached"),
        17 => cstr!("client reregistration"),
        18 => cstr!("GID table change"),
        19 => cstr!("WQ fatal"),
        _ => cstr!("unknown"),
    }
}

/// `enum ibv_rate` values with their rates in Mb/s.
const RATES: [(c_int, c_int); 23] = [
    (2, 2500),
    (5, 5000),
    (3, 10000),
    (6, 20000),
    (4, 30000),
    (7, 40000),
    (8, 60000),
    (9, 80000),
    (10, 120000),
    (11, 14062),
    (12, 56250),
    (13, 112500),
    (14, 168750),
    (15, 25781),
    (16, 103125),
    (17, 206250),
    (18, 309375),
    (19, 28125),
    (20, 53125),
    (21, 425000),
    (22, 637500),
    (23, 850000),
    (24, 1275000),
];

/// `ibv_rate_to_mbps`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

/// `mbps_to_ibv_rate`.
#[unsafe(no_mangle)]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.1 == mbps).map_or(0, |r| r.0)
}

/// `ibv_rate_to_mult`: the rate as a multiple of 2.5 Gb/s (the classic rates only).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES[..9]
        .iter()
        .find(|r| r.0 == rate)
        .map_or(-1, |r| r.1 / 2500)
}

/// `mult_to_ibv_rate`.
#[unsafe(no_mangle)]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES[..9]
        .iter()
        .find(|r| r.1 == mult.saturating_mul(2500))
        .map_or(0, |r| r.0)
}

/// `ibv_fork_init`: nothing to prepare (registered memory is never pinned).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// `ibv_dontfork_range`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_dofork_range`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_get_async_event`: the context's next event (`events.rs`), waiting for one
/// unless the program made `async_fd` non-blocking (then -1 with errno EAGAIN).
///
/// # Safety
///
/// `context` is a context of this library; `event` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    context: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    match ctx.events.next() {
        Ok(e) => {
            // SAFETY: per the contract.
            unsafe { event.write(e) };
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// `ibv_ack_async_event`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

/// `ibv_attach_mcast`: multicast is not offered.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_attach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> c_int {
    unsupported("ibv_attach_mcast", "EOPNOTSUPP");
    libc::EOPNOTSUPP
}

/// `ibv_detach_mcast`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_detach_mcast(_qp: *mut ibv_qp, _gid: *const ibv_gid, _lid: u16) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_resolve_eth_l2_from_gid`: rocexd resolves peers itself.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_resolve_eth_l2_from_gid(
    _context: *mut ibv_context,
    _attr: *mut ibv_ah_attr,
    _eth_mac: *mut u8,
    _vid: *mut u16,
) -> c_int {
    unsupported("ibv_resolve_eth_l2_from_gid", "EOPNOTSUPP");
    libc::EOPNOTSUPP
}

/// `ibv_query_ece`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_set_ece`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_query_qp_data_in_order`: 0 (no promise beyond the verbs' ordering rules).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut ibv_qp, _op: c_int, _flags: u32) -> c_int {
    0
}

/// `ibv_import_device`: no uverbs command fd to import.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ibv_context {
    unsupported("ibv_import_device", "EOPNOTSUPP");
    null_errno(libc::EOPNOTSUPP)
}

/// `ibv_import_pd`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_import_pd(_c: *mut ibv_context, _h: u32) -> *mut ibv_pd {
    unsupported("ibv_import_pd", "EOPNOTSUPP");
    null_errno(libc::EOPNOTSUPP)
}

/// `ibv_unimport_pd`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_unimport_pd(_pd: *mut ibv_pd) {}

/// `ibv_import_mr`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_import_mr(_pd: *mut ibv_pd, _h: u32) -> *mut ibv_mr {
    unsupported("ibv_import_mr", "EOPNOTSUPP");
    null_errno(libc::EOPNOTSUPP)
}

/// `ibv_unimport_mr`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_unimport_mr(_mr: *mut ibv_mr) {}

/// `ibv_import_dm`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_import_dm(_c: *mut ibv_context, _h: u32) -> *mut c_void {
    unsupported("ibv_import_dm", "EOPNOTSUPP");
    null_errno(libc::EOPNOTSUPP)
}

/// `ibv_unimport_dm`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_unimport_dm(_dm: *mut c_void) {}

/// `ibv_register_driver`: providers are not loaded.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_register_driver(_name: *const c_char, _init: *mut c_void) {}

/// `ibv_get_sysfs_path`: rocex devices have no sysfs entries.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    cstr!("/sys")
}

/// `ibv_read_sysfs_file`: -1 (nothing in sysfs describes a rocex device).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    set_errno(libc::ENOENT);
    -1
}

/// `ibv_copy_qp_attr_from_kern` (a uverbs helper other rdma-core libraries import; rocex
/// has no kernel structures to copy).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_qp_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

/// `ibv_copy_ah_attr_from_kern` (as above).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_ah_attr_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

/// `ibv_copy_path_rec_from_kern` (as above).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_path_rec_from_kern(_dst: *mut c_void, _src: *mut c_void) {}

/// `ibv_copy_path_rec_to_kern` (as above).
#[unsafe(no_mangle)]
pub extern "C" fn ibv_copy_path_rec_to_kern(_dst: *mut c_void, _src: *mut c_void) {}

symver! {
    ibv_wc_status_str @ "IBVERBS_1.1",
    ibv_node_type_str @ "IBVERBS_1.1",
    ibv_port_state_str @ "IBVERBS_1.1",
    ibv_event_type_str @ "IBVERBS_1.1",
    ibv_rate_to_mbps @ "IBVERBS_1.1",
    mbps_to_ibv_rate @ "IBVERBS_1.1",
    ibv_rate_to_mult @ "IBVERBS_1.0",
    mult_to_ibv_rate @ "IBVERBS_1.0",
    ibv_fork_init @ "IBVERBS_1.1",
    ibv_is_fork_initialized @ "IBVERBS_1.13",
    ibv_dontfork_range @ "IBVERBS_1.1",
    ibv_dofork_range @ "IBVERBS_1.1",
    ibv_get_async_event @ "IBVERBS_1.1",
    ibv_ack_async_event @ "IBVERBS_1.1",
    ibv_attach_mcast @ "IBVERBS_1.1",
    ibv_detach_mcast @ "IBVERBS_1.1",
    ibv_resolve_eth_l2_from_gid @ "IBVERBS_1.1",
    ibv_query_ece @ "IBVERBS_1.10",
    ibv_set_ece @ "IBVERBS_1.10",
    ibv_query_qp_data_in_order @ "IBVERBS_1.14",
    ibv_import_device @ "IBVERBS_1.10",
    ibv_import_pd @ "IBVERBS_1.10",
    ibv_unimport_pd @ "IBVERBS_1.10",
    ibv_import_mr @ "IBVERBS_1.10",
    ibv_unimport_mr @ "IBVERBS_1.10",
    ibv_import_dm @ "IBVERBS_1.13",
    ibv_unimport_dm @ "IBVERBS_1.13",
    ibv_register_driver @ "IBVERBS_1.1",
    ibv_get_sysfs_path @ "IBVERBS_1.0",
    ibv_read_sysfs_file @ "IBVERBS_1.0",
    ibv_copy_qp_attr_from_kern @ "IBVERBS_1.0",
    ibv_copy_ah_attr_from_kern @ "IBVERBS_1.1",
    ibv_copy_path_rec_from_kern @ "IBVERBS_1.0",
    ibv_copy_path_rec_to_kern @ "IBVERBS_1.0",
}
