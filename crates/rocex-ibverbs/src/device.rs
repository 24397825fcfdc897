//! Devices: one per running `rocexd`, found by its control socket (`$ROCEX_SOCKET` when
//! set, else every `*.sock` in `/run/rocex/` that accepts a connection), named `rocex0`,
//! `rocex1`, ... in the order first seen; opening one connects to its daemon. Queries
//! answer as kernel rxe does for a netdev (docs/verbs.md).

use core::ffi::{c_char, c_int};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rocex_verbs::{Context, DeviceAttributes};

use crate::abi::*;
use crate::ctx::{Ctx, CtxState, zeroed};
use crate::events::AsyncEvents;
use crate::gid::{GID_TBL_LEN, eui64, gid_addr, gid_table, mac_for};
use crate::{cq, mw, null_errno, qp, srq, symver, trace};

/// A device: rdma-core's `ibv_device` and the daemon socket behind it. Devices live as long
/// as the process (as in rdma-core, a device list may be freed while contexts stay open).
#[repr(C)]
pub struct Device {
    /// rdma-core's device.
    pub ibv: ibv_device,
    /// The daemon's control socket.
    pub socket: PathBuf,
    /// The node GUID (EUI-64 of the MAC), in network order, once asked for.
    guid: OnceLock<u64>,
}

// SAFETY: the device is immutable after creation but for the OnceLock.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

static DEVICES: Mutex<Vec<&'static Device>> = Mutex::new(Vec::new());

/// The sockets of the daemons that answer now, of those
/// [`daemon_sockets`](rocex_verbs::daemon_sockets) names.
pub fn live_sockets() -> Vec<PathBuf> {
    let mut v = rocex_verbs::daemon_sockets();
    v.retain(|p| UnixStream::connect(p).is_ok());
    v
}

fn fill(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().chain([0])) {
        *d = b as c_char;
    }
}

/// The device for `socket`, made on first sight.
fn device_for(list: &mut Vec<&'static Device>, socket: &Path) -> &'static Device {
    if let Some(d) = list.iter().find(|d| d.socket == socket) {
        return d;
    }
    let n = list.len();
    let mut ibv = ibv_device {
        _ops: _ibv_device_ops {
            _dummy1: core::ptr::null_mut(),
            _dummy2: core::ptr::null_mut(),
        },
        node_type: 1,      // IBV_NODE_CA, as rxe
        transport_type: 0, // IBV_TRANSPORT_IB, as rxe
        name: [0; 64],
        dev_name: [0; 64],
        dev_path: [0; 256],
        ibdev_path: [0; 256],
    };
    fill(&mut ibv.name, &format!("rocex{n}"));
    fill(&mut ibv.dev_name, &format!("uverbs{n}"));
    fill(
        &mut ibv.dev_path,
        &format!("/sys/class/infiniband_verbs/uverbs{n}"),
    );
    fill(
        &mut ibv.ibdev_path,
        &format!("/sys/class/infiniband/rocex{n}"),
    );
    let d: &'static Device = Box::leak(Box::new(Device {
        ibv,
        socket: socket.to_owned(),
        guid: OnceLock::new(),
    }));
    list.push(d);
    d
}

/// # Safety
///
/// `device` is a device of this library.
unsafe fn dev<'a>(device: *mut ibv_device) -> &'a Device {
    // SAFETY: `ibv` is the first field of the repr(C) Device.
    unsafe { &*device.cast::<Device>() }
}

/// The daemon's address: its GID as an IP address.
fn daemon_addr(attr: &DeviceAttributes) -> IpAddr {
    gid_addr(&attr.gid)
}

/// `ibv_get_device_list`: the live daemons, as a NULL-terminated array the caller frees
/// with `ibv_free_device_list`. No daemon: an empty list.
///
/// # Safety
///
/// `num_devices` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let socks = live_sockets();
    let mut list = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    let devs: Vec<*mut ibv_device> = socks
        .iter()
        .map(|s| (&raw const device_for(&mut list, s).ibv).cast_mut())
        .collect();
    // SAFETY: per the contract; freed by ibv_free_device_list.
    unsafe { calloc_list(&devs, num_devices) }
}

/// `ibv_free_device_list`.
///
/// # Safety
///
/// `list` came from `ibv_get_device_list`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: allocated with calloc in ibv_get_device_list.
    unsafe { libc::free(list.cast()) };
}

/// `ibv_get_device_name`.
///
/// # Safety
///
/// `device` is a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    // SAFETY: per the contract.
    unsafe { (*device).name.as_ptr() }
}

/// `ibv_get_device_index`: the N of `rocexN`.
///
/// # Safety
///
/// `device` is a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    let list = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: per the contract.
    let d = unsafe { dev(device) };
    list.iter()
        .position(|x| core::ptr::eq(*x, d))
        .map_or(-1, |i| i as c_int)
}

/// `ibv_get_device_guid`: the node GUID, the EUI-64 of the interface's MAC (asking the
/// daemon for its address the first time).
///
/// # Safety
///
/// `device` is a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    // SAFETY: per the contract.
    let d = unsafe { dev(device) };
    *d.guid.get_or_init(|| {
        match Context::open_daemon_path(&d.socket).and_then(|c| c.query_gid(1, 0)) {
            Ok(gid) => guid_of(gid_addr(&gid)),
            Err(e) => {
                trace("ibv_get_device_guid", &e);
                0
            }
        }
    })
}

/// The node GUID of the device at `addr`, in network order.
fn guid_of(addr: IpAddr) -> u64 {
    u64::from_ne_bytes(eui64(mac_for(addr)))
}

/// `ibv_open_device`: a connection to the device's daemon, direct when it grants a slot
/// (rocex-verbs' `Context::open`).
///
/// # Safety
///
/// `device` is a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    // SAFETY: per the contract.
    unsafe { open_device(device, |p| Context::open(p)) }
}

/// Opens `device` with `open` (direct if granted, or the daemon path only).
///
/// # Safety
///
/// `device` is a device of this library.
pub(crate) unsafe fn open_device(
    device: *mut ibv_device,
    open: fn(&Path) -> rocex_verbs::Result<Context>,
) -> *mut ibv_context {
    // SAFETY: per the contract.
    let d = unsafe { dev(device) };
    let verbs = match open(&d.socket) {
        Ok(c) => c,
        Err(e) => {
            trace("ibv_open_device", &e);
            return null_errno(crate::errno_of(&e));
        }
    };
    let attr = match verbs.query_device() {
        Ok(a) => a,
        Err(e) => return null_errno(crate::errno_of(&e)),
    };
    let addr = daemon_addr(&attr);
    let mac = mac_for(addr);
    let sock = std::os::fd::AsRawFd::as_raw_fd(&verbs.control_socket());
    let events = match AsyncEvents::new(sock) {
        Ok(e) => e,
        Err(e) => return null_errno(e.raw_os_error().unwrap_or(libc::EMFILE)),
    };
    let async_fd = events.fd;
    let ctx = Box::new(Ctx {
        vctx: verbs_context_for(device),
        dev: d,
        lock: Mutex::new(CtxState {
            verbs,
            qp_types: Default::default(),
            srq_of: Default::default(),
        }),
        addr,
        gids: gid_table(addr, mac),
        events,
    });
    let ctx = Box::leak(ctx);
    ctx.vctx.context.async_fd = async_fd;
    ctx.ibv()
}

/// The context's operation tables.
fn verbs_context_for(device: *mut ibv_device) -> verbs_context {
    // SAFETY: every field of verbs_context is a pointer, an optional function pointer or
    // an integer, for which all-zero is NULL/None/0.
    let mut v: verbs_context = unsafe { core::mem::zeroed() };
    v.query_port = Some(query_port_ex);
    v.create_cq_ex = Some(cq::create_cq_ex);
    v.query_device_ex = Some(query_device_ex);
    v.create_qp_ex = Some(qp::create_qp_ex);
    v.sz = size_of::<verbs_context>();
    let c = &mut v.context;
    c.device = device;
    c.ops.poll_cq = Some(cq::poll_cq);
    c.ops.req_notify_cq = Some(cq::req_notify_cq);
    c.ops.post_send = Some(qp::post_send);
    c.ops.post_recv = Some(qp::post_recv);
    c.ops.post_srq_recv = Some(srq::post_srq_recv);
    c.ops.alloc_mw = Some(mw::alloc_mw);
    c.ops.dealloc_mw = Some(mw::dealloc_mw);
    c.ops.bind_mw = Some(mw::bind_mw);
    c.cmd_fd = -1;
    c.async_fd = -1;
    c.num_comp_vectors = 1;
    c.mutex = zeroed();
    c.abi_compat = VERBS_ABI_IS_EXTENDED;
    v
}

/// `ibv_close_device`.
///
/// # Safety
///
/// `context` is an open context of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    // SAFETY: the Ctx was leaked from a Box in ibv_open_device and is not used again; its
    // events close their descriptors.
    drop(unsafe { Box::from_raw(core::ptr::from_ref(ctx).cast_mut()) });
    0
}

/// The attributes rxe reports, with the daemon's limits.
fn device_attr(ctx: &Ctx, a: &DeviceAttributes) -> ibv_device_attr {
    // SAFETY: ibv_device_attr is integers and a char array: all-zero is valid.
    let mut d: ibv_device_attr = unsafe { core::mem::zeroed() };
    // GID 0, made at open, is fe80:: and the EUI-64 of the MAC: the node GUID.
    let mut eui = [0u8; 8];
    eui.copy_from_slice(&ctx.gids[0][8..]);
    let guid = u64::from_ne_bytes(eui);
    // SAFETY: ctx.dev is the process-lifetime device.
    let _ = unsafe { (*ctx.dev).guid.set(guid) };
    fill(&mut d.fw_ver, env!("CARGO_PKG_VERSION"));
    d.node_guid = guid;
    d.sys_image_guid = guid;
    d.max_mr_size = u64::MAX;
    d.page_size_cap = 0xffff_f000;
    d.vendor_id = 0xffffff;
    d.max_qp = a.max_qp as c_int;
    d.max_qp_wr = a.max_qp_wr as c_int;
    // RC_RNR_NAK_GEN | SYS_IMAGE_GUID | PORT_ACTIVE_EVENT | ... | MEM_WINDOW |
    // MEM_WINDOW_TYPE_2B as rxe's RXE_DEVICE_CAP_FLAGS, less what rocex lacks (SRQ resize).
    d.device_cap_flags =
        (1 << 12) | (1 << 11) | (1 << 10) | (1 << 14) | (1 << 1) | (1 << 2) | (1 << 17) | (1 << 24);
    d.max_sge = a.max_sge as c_int;
    d.max_sge_rd = a.max_sge as c_int;
    d.max_cq = a.max_cq as c_int;
    d.max_cqe = a.max_cqe as c_int;
    d.max_mr = a.max_mr as c_int;
    d.max_pd = a.max_pd as c_int;
    // rocexd's windows per client.
    d.max_mw = 4096;
    d.max_qp_rd_atom = a.max_qp_rd_atom as c_int;
    d.max_res_rd_atom = 0x3f000;
    d.max_qp_init_rd_atom = a.max_qp_rd_atom as c_int;
    d.atomic_cap = 1; // IBV_ATOMIC_HCA
    d.max_ah = 100;
    // SRQs are the library's own (srq.rs): as many as CQs, each as deep as a queue.
    d.max_srq = a.max_cq as c_int;
    d.max_srq_wr = a.max_qp_wr as c_int;
    d.max_srq_sge = a.max_sge as c_int;
    d.max_pkeys = 1;
    d.local_ca_ack_delay = 15;
    d.phys_port_cnt = 1;
    d
}

/// `ibv_query_device`.
///
/// # Safety
///
/// `context` is a context of this library; `attr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let a = match ctx.lock().verbs.query_device() {
        Ok(a) => a,
        Err(e) => return crate::errno_of(&e),
    };
    // SAFETY: per the contract.
    unsafe { attr.write(device_attr(ctx, &a)) };
    0
}

/// `query_device_ex` of the extended operations (behind `ibv_query_device_ex`).
unsafe extern "C" fn query_device_ex(
    context: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    // SAFETY: `input` is NULL or readable (verbs.h).
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    if attr_size < size_of::<ibv_device_attr>() {
        return libc::EINVAL;
    }
    // SAFETY: verbs.h passes a context of this library.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let a = match ctx.lock().verbs.query_device() {
        Ok(a) => a,
        Err(e) => return crate::errno_of(&e),
    };
    // SAFETY: all-zero is a valid ibv_device_attr_ex (integers only).
    let mut ex: ibv_device_attr_ex = unsafe { core::mem::zeroed() };
    ex.orig_attr = device_attr(ctx, &a);
    ex.phys_port_cnt_ex = 1;
    let n = attr_size.min(size_of::<ibv_device_attr_ex>());
    // SAFETY: `attr` has attr_size writable bytes; `ex` is a local of at least n bytes.
    unsafe {
        core::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
        core::ptr::copy_nonoverlapping((&raw const ex).cast::<u8>(), attr.cast::<u8>(), n);
    }
    0
}

/// The port as rxe shows it on an Ethernet netdev.
fn port_attr(ctx: &Ctx) -> Result<ibv_port_attr, c_int> {
    let p = ctx
        .lock()
        .verbs
        .query_port(1)
        .map_err(|e| crate::errno_of(&e))?;
    Ok(ibv_port_attr {
        state: c_int::from(p.state),
        max_mtu: 5,
        active_mtu: c_int::from(p.active_mtu),
        gid_tbl_len: GID_TBL_LEN as c_int,
        port_cap_flags: 1 << 16, // IBV_PORT_CM_SUP
        max_msg_sz: 0x80_0000,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width: 1, // 1X
        active_speed: 8, // FDR10 (10 Gb/s)
        phys_state: 5,   // LinkUp
        link_layer: 2,   // IBV_LINK_LAYER_ETHERNET
        flags: 0,
        port_cap_flags2: 0,
    })
}

/// `ibv_query_port` (the exported, older form: fields up to `link_layer`).
///
/// # Safety
///
/// `context` is a context of this library; `attr` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: per the contract.
    unsafe {
        query_port_ex(
            context,
            port_num,
            attr,
            core::mem::offset_of!(ibv_port_attr, flags),
        )
    }
}

/// `query_port` of the extended operations (verbs.h's `ibv_query_port`).
unsafe extern "C" fn query_port_ex(
    context: *mut ibv_context,
    port_num: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    if port_num != 1 {
        return libc::EINVAL;
    }
    // SAFETY: verbs.h passes a context of this library.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let a = match port_attr(ctx) {
        Ok(a) => a,
        Err(e) => return e,
    };
    let n = len.min(size_of::<ibv_port_attr>());
    // SAFETY: `attr` has `len` writable bytes.
    unsafe { core::ptr::copy_nonoverlapping((&raw const a).cast::<u8>(), attr.cast(), n) };
    0
}

/// `ibv_query_pkey`: index 0 is the default P_Key.
///
/// # Safety
///
/// `pkey` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    _context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if port_num != 1 || index != 0 {
        return -1;
    }
    // SAFETY: per the contract.
    unsafe { *pkey = 0xffff };
    0
}

/// `ibv_get_pkey_index`.
#[unsafe(no_mangle)]
pub extern "C" fn ibv_get_pkey_index(_context: *mut ibv_context, port_num: u8, pkey: u16) -> c_int {
    if port_num == 1 && pkey == 0xffff {
        0
    } else {
        -1
    }
}

symver! {
    ibv_get_device_list @ "IBVERBS_1.1",
    ibv_free_device_list @ "IBVERBS_1.1",
    ibv_get_device_name @ "IBVERBS_1.1",
    ibv_get_device_index @ "IBVERBS_1.9",
    ibv_get_device_guid @ "IBVERBS_1.1",
    ibv_open_device @ "IBVERBS_1.1",
    ibv_close_device @ "IBVERBS_1.1",
    ibv_query_device @ "IBVERBS_1.1",
    ibv_query_port @ "IBVERBS_1.1",
    ibv_query_pkey @ "IBVERBS_1.1",
    ibv_get_pkey_index @ "IBVERBS_1.5",
}
