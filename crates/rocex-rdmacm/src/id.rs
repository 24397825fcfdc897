//! rdma_cm ids: creation and destruction, binding, options, the channel an id reports
//! to, and the device list.

use core::ffi::{c_int, c_void};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::abi::*;
use crate::channel::{Channel, ack_event, event, get_event};
use crate::registry::{Guard, PortUse, enter};
use crate::sockaddr;
use crate::verbs::Verbs;
use crate::{fail, status, symver};
use rocex_ibverbs_abi::calloc_list;

/// Where an id stands, as the kernel's `enum rdma_cm_state` (the daemon's connection id
/// where there is one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Created.
    Idle,
    /// Bound to an address.
    Bound,
    /// `rdma_resolve_addr` done.
    AddrResolved,
    /// `rdma_resolve_route` done.
    RouteResolved,
    /// Listening.
    Listening,
    /// A REQ sent, no answer yet.
    Connecting(u32),
    /// A request not yet accepted or rejected.
    Requested(u32),
    /// Connected.
    Connected(u32),
    /// Rejected, unreachable or disconnected: the daemon forgot the connection.
    Done,
}

/// An id: rdma-core's struct first, then what this library keeps of it.
#[repr(C)]
pub struct Id {
    /// What programs see.
    pub c: rdma_cm_id,
    /// Where it stands.
    pub state: State,
    /// Its device, once bound to one.
    pub dev: Option<usize>,
    /// The local port it holds (0: none).
    pub port: u16,
    /// Its own channel when created without one (synchronous use).
    pub sync: *mut Channel,
    /// The path `rdma_resolve_route` reports.
    pub path: ibv_sa_path_rec,
    /// Whether `rdma_create_qp` made the CQs and completion channels.
    pub own_cqs: bool,
    /// `RDMA_OPTION_ID_REUSEADDR`.
    pub reuse: bool,
    /// `RDMA_OPTION_ID_AFONLY`, when the program set it.
    pub afonly: Option<bool>,
    /// How it holds its port, once bound.
    pub port_use: PortUse,
    /// A passive endpoint's QP attributes and PD, for the ids `rdma_get_request` gives.
    pub ep: Option<(ibv_qp_init_attr, *mut ibv_pd)>,
    /// `RDMA_OPTION_ID_TOS`, when the program set it: the traffic class of the path.
    pub tos: Option<u8>,
    /// What a request settles for the QP (passive side, before `rdma_accept`).
    pub settled: Option<crate::qp::Settled>,
}

/// The ids this library made and has not destroyed, by address. A program's pointer is
/// looked up here before it is read: perftest 4.5 calls `rdma_resolve_addr` again on an id
/// it destroyed after a rejection, where rdma-core's library reads freed memory; here it
/// gets `EINVAL`.
static LIVE: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

fn live() -> MutexGuard<'static, BTreeSet<usize>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Id {
    /// The library's id behind a program's pointer, `None` when it is not an id of this
    /// library that is still alive (NULL, destroyed, or never one).
    ///
    /// # Safety
    ///
    /// No other reference to the id is in use.
    pub unsafe fn of<'a>(id: *mut rdma_cm_id) -> Option<&'a mut Self> {
        if !live().contains(&(id as usize)) {
            return None;
        }
        // SAFETY: a live id of this library (`Id` starts with the `rdma_cm_id`); per the
        // contract, not referenced elsewhere.
        Some(unsafe { &mut *id.cast::<Self>() })
    }

    /// Queues an event of `kind` with `status` and no private data on the id's channel.
    pub fn post(&mut self, kind: u32, status: i32) {
        let e = event(&mut self.c, kind, status, &[]);
        self.deliver(e);
    }

    /// Hands `e` to the id's channel (none once the program destroyed it: [`detach`]).
    pub fn deliver(&self, e: Box<crate::channel::Event>) {
        // SAFETY: a channel outlives the ids on it, or they were detached from it.
        if let Some(ch) = unsafe { self.c.channel.cast::<Channel>().as_ref() } {
            ch.push(e);
        }
    }

    /// Takes device `i` as the id's: its context, default PD and port.
    pub fn set_dev(&mut self, v: &Verbs, g: &mut Guard, i: usize) {
        self.dev = Some(i);
        self.c.verbs = g.dev(i).ctx;
        self.c.pd = g.pd(v, i);
        self.c.port_num = 1;
    }

    /// The local address.
    pub fn src(&self) -> Option<SocketAddr> {
        sockaddr::stored(&self.c.route.addr.src)
    }

    /// The peer's address.
    pub fn dst(&self) -> Option<SocketAddr> {
        sockaddr::stored(&self.c.route.addr.dst)
    }

    /// The port space rocexd's CM serves the id in: UDP (SIDR) for a UD id, else TCP.
    pub fn daemon_ps(&self) -> u16 {
        if self.c.qp_type == IBV_QPT_UD {
            RDMA_PS_UDP as u16
        } else {
            RDMA_PS_TCP as u16
        }
    }
}

/// A new id on `channel` (its own channel when NULL), or an errno.
pub fn new_id(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: u32,
    qp_type: c_int,
) -> Result<*mut Id, i32> {
    let sync = if channel.is_null() {
        Channel::new()?
    } else {
        core::ptr::null_mut()
    };
    let ch = if sync.is_null() {
        channel
    } else {
        // SAFETY: just made.
        unsafe { &raw mut (*sync).c }
    };
    // SAFETY: an all-zero rdma_cm_id (NULL pointers, zero addresses) is its empty value.
    let mut c: rdma_cm_id = unsafe { core::mem::zeroed() };
    c.channel = ch;
    c.context = context;
    c.ps = ps;
    c.qp_type = qp_type;
    let made = Box::into_raw(Box::new(Id {
        c,
        state: State::Idle,
        dev: None,
        port: 0,
        sync,
        path: ibv_sa_path_rec::default(),
        own_cqs: false,
        reuse: false,
        afonly: None,
        port_use: PortUse::default(),
        ep: None,
        tos: None,
        settled: None,
    }));
    live().insert(made as usize);
    Ok(made)
}

/// The QP type of a port space: RC for TCP and IB, UD for UDP (rocexd's CM resolves the
/// service with SIDR). IPoIB's port space joins the IPoIB broadcast group, which needs
/// multicast, which rocex does not have: `EOPNOTSUPP`, said once on stderr so that a
/// program's bare "Operation not supported" has its reason; `EINVAL` for a port space
/// rdma-core does not define.
fn qp_type_of(ps: u32) -> Result<c_int, i32> {
    match ps {
        RDMA_PS_TCP | RDMA_PS_IB => Ok(IBV_QPT_RC),
        RDMA_PS_UDP => Ok(IBV_QPT_UD),
        RDMA_PS_IPOIB => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "librdmacm (rocex): RDMA_PS_IPOIB needs IPoIB's multicast groups, which \
                     rocex does not have (docs/verbs.md)"
                );
            });
            Err(libc::EOPNOTSUPP)
        }
        _ => Err(libc::EINVAL),
    }
}

/// Waits on a synchronous id's own channel for the event its last call started, keeps it
/// as `id->event` (acking the one before) and fails as rdma-core's `ucma_complete` does:
/// `ECONNREFUSED` for a rejection, else the event's status as an errno.
///
/// # Safety
///
/// `id` is a live id of this library.
pub unsafe fn complete(id: *mut Id) -> c_int {
    // SAFETY: per the contract.
    let me = unsafe { &mut *id };
    let mut e = core::ptr::null_mut();
    // SAFETY: the id's own channel.
    if unsafe { get_event(me.c.channel, &mut e) } != 0 {
        return -1;
    }
    if !me.c.event.is_null() {
        // SAFETY: the previous event this id kept.
        unsafe { ack_event(me.c.event) };
    }
    me.c.event = e;
    // SAFETY: just taken from the channel.
    let (kind, st) = unsafe { ((*e).event, (*e).status) };
    match (kind, st) {
        (event::REJECTED, _) => fail(libc::ECONNREFUSED),
        (_, 0) => 0,
        (_, s) => fail(s.abs()),
    }
}

/// The end of a call that queued the id's next event: 0, or on a synchronous id (made
/// without a channel) that event's outcome ([`complete`]), waited for after `g` is let go.
///
/// # Safety
///
/// `id` is a live id of this library.
pub unsafe fn settle(id: *mut Id, g: Guard) -> c_int {
    // SAFETY: per the contract.
    let sync = !unsafe { &*id }.sync.is_null();
    drop(g);
    if sync {
        // SAFETY: per the contract.
        return unsafe { complete(id) };
    }
    0
}

/// `rdma_create_id`: RC port spaces only (`qp_type_of`).
///
/// # Safety
///
/// `channel` is NULL or a channel of this library; `id` is writable.
pub unsafe fn create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    let qpt = match qp_type_of(ps) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    match new_id(channel, context, ps, qpt) {
        Ok(p) => {
            // SAFETY: per the contract.
            unsafe { *id = p.cast() };
            0
        }
        Err(e) => fail(e),
    }
}

/// Ends what id `me` has with rocexd, as the kernel does when an id goes: disconnects its
/// connection or rejects its request, and gives its listening ports up, so that their
/// REQs get the CM's own REJ (invalid service ID). Failures mean the daemon already forgot
/// them.
fn release(v: &Verbs, g: &mut Guard, me: *mut Id) {
    // SAFETY: ids reached here are live (the caller's, or the registry's under its lock).
    let m = unsafe { &mut *me };
    if let Some(d) = m.dev {
        let ctx = g.dev(d).ctx;
        match m.state {
            // SAFETY: the device's open context.
            State::Connected(c) | State::Connecting(c) => unsafe {
                (v.rocex_cm_disconnect)(ctx, c);
            },
            // SAFETY: as above.
            State::Requested(c) => unsafe {
                (v.rocex_cm_reject)(ctx, c, core::ptr::null(), 0);
            },
            _ => {}
        }
    }
    g.conns.retain(|_, p| *p != me);
    let mut mine = Vec::new();
    g.listeners.retain(|&k, p| {
        let keep = *p != me;
        if !keep {
            mine.push(k);
        }
        keep
    });
    for (d, ps, port) in mine {
        if g.listening.remove(&(d, ps, port)) {
            // SAFETY: the device's open context.
            unsafe { (v.rocex_cm_unlisten)(g.dev(d).ctx, ps, port) };
        }
    }
}

/// The program destroys `channel` while ids on it still have connections or listens.
/// The kernel destroys the ids of an rdma_cm file that closes (`ucma_close`); here their
/// connections and listens end as in [`release`], they stand `Done` and their `channel`
/// becomes NULL, so that no event reaches the freed channel (the poller would otherwise
/// write into it) and the program may still destroy them.
pub fn detach(channel: *mut rdma_event_channel) {
    let Some((v, mut g)) = enter() else {
        return;
    };
    let mut ids: Vec<*mut Id> = g
        .conns
        .values()
        .chain(g.listeners.values())
        .copied()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for p in ids {
        // SAFETY: ids in the registry are live (destroy removes them under the lock).
        if unsafe { (*p).c.channel } != channel {
            continue;
        }
        release(v, &mut g, p);
        // SAFETY: as above.
        let m = unsafe { &mut *p };
        m.state = State::Done;
        m.c.channel = core::ptr::null_mut();
    }
}

/// `rdma_destroy_id`: disconnects or rejects what the id still has and stops its listen
/// (as the kernel does when an id goes), then frees it and its own channel.
///
/// # Safety
///
/// `id` is a live id of this library, not used again.
pub unsafe fn destroy_id(id: *mut rdma_cm_id) -> c_int {
    if !live().remove(&(id as usize)) {
        return fail(libc::EINVAL);
    }
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    let me = id.cast::<Id>();
    release(v, &mut g, me);
    // SAFETY: per the contract.
    let m = unsafe { &mut *me };
    if m.sync.is_null() && !m.c.channel.is_null() {
        // SAFETY: the program's channel outlives its ids.
        unsafe { &*m.c.channel.cast::<Channel>() }.forget(id);
    }
    if m.port != 0 {
        g.free_port(m.port, m.port_use);
    }
    drop(g);
    if !m.c.event.is_null() {
        // SAFETY: the event a synchronous call kept.
        unsafe { ack_event(m.c.event) };
    }
    if !m.sync.is_null() {
        // SAFETY: the id's own channel, made by new_id.
        unsafe { Channel::destroy(m.sync) };
    }
    // SAFETY: made by new_id; the program does not use it again.
    drop(unsafe { Box::from_raw(me) });
    0
}

/// `rdma_migrate_id`: later events of the id go to `channel` (its own, synchronous
/// channel when NULL).
///
/// # Safety
///
/// `id` is a live id; `channel` NULL or a channel of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let Some((_, g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let old = m.sync;
    if channel.is_null() {
        match Channel::new() {
            Ok(c) => {
                m.sync = c;
                // SAFETY: just made.
                m.c.channel = unsafe { &raw mut (*c).c };
            }
            Err(e) => return fail(e),
        }
    } else {
        m.sync = core::ptr::null_mut();
        m.c.channel = channel;
    }
    drop(g);
    if !old.is_null() {
        // SAFETY: the id's former own channel, which nothing else reaches.
        unsafe { Channel::destroy(old) };
    }
    0
}

/// Binds `m` to `sa`: its device (none for a wildcard address) and local port.
pub fn bind(v: &Verbs, g: &mut Guard, m: &mut Id, sa: SocketAddr) -> i32 {
    if m.state != State::Idle {
        return libc::EINVAL;
    }
    let ip = sa.ip();
    let dev = if ip.is_unspecified() {
        None
    } else {
        match g.dev_at(v, ip) {
            Some(i) => Some(i),
            // rdma_translate_ip: an address of no interface; cma_acquire_dev_by_src_ip:
            // an interface with no RDMA device.
            None if std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_err() => {
                return libc::EADDRNOTAVAIL;
            }
            None => return libc::ENODEV,
        }
    };
    let v6 = ip.is_ipv6();
    let u = PortUse {
        reuse: m.reuse,
        v6,
        afonly: m.afonly.unwrap_or(!v6 || bindv6only()),
    };
    let port = match g.take_port(sa.port(), u) {
        Ok(p) => p,
        Err(e) => return e,
    };
    m.port = port;
    m.port_use = u;
    sockaddr::write(&mut m.c.route.addr.src, SocketAddr::new(ip, port));
    if let Some(i) = dev {
        m.set_dev(v, g, i);
        m.c.route.addr.ibaddr.sgid = sockaddr::gid(ip);
    }
    m.state = State::Bound;
    0
}

/// `net.ipv6.bindv6only`, which decides whether an IPv6 id takes IPv4 too when the program
/// did not say (off unless the sysctl reads 1).
fn bindv6only() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").is_ok_and(|s| s.trim() == "1")
}

/// `rdma_bind_addr`.
///
/// # Safety
///
/// `id` is a live id; `addr` NULL or a socket address.
pub unsafe fn bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let Some(sa) = (unsafe { sockaddr::read(addr) }) else {
        return fail(libc::EAFNOSUPPORT);
    };
    let Some((v, mut g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    match unsafe { Id::of(id) } {
        Some(m) => status(bind(v, &mut g, m, sa)),
        None => fail(libc::EINVAL),
    }
}

/// `rdma_set_option`, with the kernel's answers (`ucma_set_option_id`,
/// `ucma_set_option_level`): `ENOSYS` for an unknown level or option, `EINVAL` for a
/// value of the wrong size or an option the id's state no longer takes. TOS is the
/// traffic class `rdma_connect` puts on the path (the REQ's, which both QPs take, as the
/// kernel's `cma_resolve_iboe_route` does) or on a UD path's address vector; rocexd
/// chooses the ACK timeout itself, so ACK_TIMEOUT is checked and kept but does not reach
/// the wire (`docs/verbs.md`).
///
/// # Safety
///
/// `id` is a live id; `optval` points at `optlen` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    if id.is_null() || (optval.is_null() && optlen > 0) {
        return fail(libc::EINVAL);
    }
    let Some((_, mut g)) = enter() else {
        return -1;
    };
    // SAFETY: per the contract.
    let Some(m) = (unsafe { Id::of(id) }) else {
        return fail(libc::EINVAL);
    };
    let int = || {
        // SAFETY: per the contract, checked to be an int's size.
        (optlen == size_of::<c_int>()).then(|| unsafe { optval.cast::<c_int>().read_unaligned() })
    };
    let e = match (level, optname) {
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if optlen == 1 => {
            // SAFETY: per the contract, one byte.
            m.tos = Some(unsafe { optval.cast::<u8>().read() });
            0
        }
        (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) => match int() {
            // rdma_set_reuseaddr: before binding, or turning it on before listening.
            Some(r) if m.state == State::Idle || (r != 0 && m.state != State::Listening) => {
                m.reuse = r != 0;
                retag(
                    &mut g,
                    m,
                    PortUse {
                        reuse: m.reuse,
                        ..m.port_use
                    },
                );
                0
            }
            _ => libc::EINVAL,
        },
        (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => match int() {
            Some(a) if matches!(m.state, State::Idle | State::Bound) => {
                m.afonly = Some(a != 0);
                retag(
                    &mut g,
                    m,
                    PortUse {
                        afonly: a != 0,
                        ..m.port_use
                    },
                );
                0
            }
            _ => libc::EINVAL,
        },
        // rdma_set_ack_timeout: connected QP types only, which every id here has.
        (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) if optlen == 1 => 0,
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS | RDMA_OPTION_ID_ACK_TIMEOUT) => libc::EINVAL,
        (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => libc::EOPNOTSUPP,
        _ => libc::ENOSYS,
    };
    status(e)
}

/// An option set on a bound id changes how it holds its port from now on (`rdma_set_option`
/// checks no port again).
fn retag(g: &mut Guard, m: &mut Id, now: PortUse) {
    if m.port != 0 {
        g.retag_port(m.port, m.port_use, now);
        m.port_use = now;
    }
}

/// The port of `a`, in network order, as `rdma_get_src_port` gives it.
fn port_be(a: Option<SocketAddr>) -> u16 {
    a.map_or(0, |a| a.port().to_be())
}

/// `rdma_get_src_port`.
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: per the contract.
    unsafe { Id::of(id) }.map_or(0, |m| port_be(m.src()))
}

/// `rdma_get_dst_port`.
///
/// # Safety
///
/// `id` is a live id.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: per the contract.
    unsafe { Id::of(id) }.map_or(0, |m| port_be(m.dst()))
}

/// `rdma_get_devices`: every rocex device's context (the ones ids use), NULL-terminated.
///
/// # Safety
///
/// `num_devices` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let Some((v, mut g)) = enter() else {
        return core::ptr::null_mut();
    };
    let ctxs: Vec<*mut ibv_context> = g.devs(v).iter().map(|d| d.ctx).collect();
    // SAFETY: per the contract; freed by rdma_free_devices.
    unsafe { calloc_list(&ctxs, num_devices) }
}

/// `rdma_free_devices`: frees the list (the contexts stay open, as in rdma-core).
///
/// # Safety
///
/// `list` came from [`rdma_get_devices`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: per the contract: calloc'd.
    unsafe { libc::free(list.cast()) };
}

/// The address family of an id's own address, for checks against a peer's.
pub fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4()
}

crate::export! {
    /// `rdma_create_id`.
    fn rdma_create_id(channel: *mut rdma_event_channel, id: *mut *mut rdma_cm_id, context: *mut c_void, ps: u32) -> c_int = create_id;
}

crate::export! {
    /// `rdma_destroy_id`.
    fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int = destroy_id;
}

crate::export! {
    /// `rdma_bind_addr`.
    fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int = bind_addr;
}

symver! {
    rdma_create_id @ "RDMACM_1.0",
    rdma_destroy_id @ "RDMACM_1.0",
    rdma_migrate_id @ "RDMACM_1.0",
    rdma_bind_addr @ "RDMACM_1.0",
    rdma_set_option @ "RDMACM_1.0",
    rdma_get_src_port @ "RDMACM_1.0",
    rdma_get_dst_port @ "RDMACM_1.0",
    rdma_get_devices @ "RDMACM_1.0",
    rdma_free_devices @ "RDMACM_1.0",
}
