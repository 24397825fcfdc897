//! The thread that takes the daemon's CM events. rocexd queues each client's events for
//! it to poll (`CmPoll`); this thread polls every device with connections or listeners,
//! backing off from 100 µs to 5 ms while nothing comes, and turns each event into
//! rdma_cm's: a request becomes a new id and `CONNECT_REQUEST` on the listener's channel,
//! the rest go to the id that owns the connection.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::abi::*;
use crate::channel::event as new_event;
use crate::id::{Id, State, new_id};
use crate::qp;
use crate::registry::{Guard, lock};
use crate::sockaddr;
use crate::verbs::{Verbs, verbs};

const MIN_NAP: Duration = Duration::from_micros(100);
const MAX_NAP: Duration = Duration::from_millis(5);

/// `rocex_cm_event.kind` values.
const REQUEST: u32 = 1;
const ESTABLISHED: u32 = 2;
const REJECTED: u32 = 3;
const UNREACHABLE: u32 = 4;
const DISCONNECTED: u32 = 5;

/// Starts the thread once per process (a child of `fork` gets no copy of it).
///
/// The thread starts with every signal blocked. rdma-core's librdmacm starts no thread,
/// so a program that blocks a signal in its own threads and takes it from a signalfd
/// (tgtd does so with SIGUSR2) expects no thread of its process to take it: one that
/// left it unblocked would get a signal raised at the process, and its default action
/// would end the program.
pub fn start(g: &mut Guard) {
    let me = std::process::id();
    if g.poller == Some(me) {
        return;
    }
    let spawned = with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("rdmacm-events".into())
            .spawn(run)
    });
    g.poller = spawned.is_ok().then_some(me);
}

/// Runs `f` with every signal blocked in the calling thread, whose mask a thread started
/// by `f` inherits, and restores the caller's mask after.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data that sigfillset initialises; pthread_sigmask reads
    // `all` and writes `old`, both live locals.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        r
    }
}

fn run() {
    let Some(v) = verbs() else { return };
    let mut nap = MIN_NAP;
    loop {
        let devs = lock().busy_devs();
        let mut got = false;
        for (i, ctx) in devs {
            loop {
                let mut e = rocex_cm_event::default();
                // SAFETY: an open context of the bound libibverbs; `e` is writable.
                let r = unsafe { (v.rocex_cm_poll)(ctx as *mut ibv_context, &mut e) };
                if r < 0 {
                    if crate::debug() {
                        let err = std::io::Error::from_raw_os_error(-r);
                        eprintln!("librdmacm (rocex): polling CM events: {err}");
                    }
                    removed(&mut lock(), i);
                }
                if r != 1 {
                    break;
                }
                got = true;
                dispatch(v, &mut lock(), i, &e);
            }
        }
        nap = if got { MIN_NAP } else { (nap * 2).min(MAX_NAP) };
        std::thread::sleep(nap);
    }
}

/// The daemon of device `i` is gone (its control connection failed): every id with a
/// connection or listener there gets `DEVICE_REMOVAL`, as the kernel tells the ids of a
/// device that goes away (`cma_process_remove`), and the device is polled no more.
fn removed(g: &mut Guard, i: usize) {
    let conns = g.conns.iter().filter(|(k, _)| k.0 == i).map(|(_, &p)| p);
    let listeners = g
        .listeners
        .iter()
        .filter(|(k, _)| k.0 == i)
        .map(|(_, &p)| p);
    let mut ids: Vec<*mut Id> = conns.chain(listeners).collect();
    ids.sort_unstable();
    ids.dedup();
    g.conns.retain(|k, _| k.0 != i);
    g.listeners.retain(|k, _| k.0 != i);
    g.listening.retain(|k| k.0 != i);
    for p in ids {
        // SAFETY: ids in the registry are live (destroy removes them under the lock).
        let m = unsafe { &mut *p };
        m.state = State::Done;
        m.post(event::DEVICE_REMOVAL, 0);
    }
}

/// The peer address of a daemon event.
fn peer(e: &rocex_cm_event) -> IpAddr {
    if e.family == libc::AF_INET as u32 {
        IpAddr::from([e.addr[0], e.addr[1], e.addr[2], e.addr[3]])
    } else {
        IpAddr::from(e.addr)
    }
}

/// Hands the daemon's event `e` on device `i` to its id.
fn dispatch(v: &Verbs, g: &mut Guard, i: usize, e: &rocex_cm_event) {
    if e.kind == REQUEST {
        return request(v, g, i, e);
    }
    let Some(&p) = g.conns.get(&(i, e.id)) else {
        return;
    };
    // SAFETY: ids in the registry are live (destroy removes them under the lock).
    let m = unsafe { &mut *p };
    // The REP's private data on the connecting side, the REJ's on a refusal, each field
    // whole (cma_ib_handler).
    let data = &e.private_data[..(e.private_data_len as usize).min(e.private_data.len())];
    let ud = e.ps == RDMA_PS_UDP as u16;
    let (kind, status) = match e.kind {
        // A SIDR exchange ends here: the service's QPN, Q_Key and the path's address
        // vector, as `cma_sidr_rep_handler` hands them on.
        ESTABLISHED if ud => {
            g.conns.remove(&(i, e.id));
            m.state = State::Done;
            let mut ev = new_event(&mut m.c, event::ESTABLISHED, 0, data);
            ev.e.param.ud.ah_attr = qp::ah_attr(peer(e), m.tos.unwrap_or(0));
            ev.e.param.ud.qp_num = e.remote_qpn;
            ev.e.param.ud.qkey = e.qkey;
            return m.deliver(ev);
        }
        ESTABLISHED => {
            m.state = State::Connected(e.id);
            let ev = new_event(&mut m.c, event::ESTABLISHED, 0, data);
            return m.deliver(ev);
        }
        // The IB reject reason, as the kernel reports it.
        REJECTED => (event::REJECTED, i32::from(e.reason)),
        // cma_sidr_rep_handler: a SIDR_REP refusing, with its status.
        UNREACHABLE if e.reason != 0 => (event::UNREACHABLE, i32::from(e.reason)),
        // cma_ib_handler: a REQ or REP that timed out (a SIDR_REQ too).
        UNREACHABLE => (event::UNREACHABLE, -libc::ETIMEDOUT),
        DISCONNECTED => (event::DISCONNECTED, 0),
        _ => return,
    };
    g.conns.remove(&(i, e.id));
    m.state = State::Done;
    let refused = kind == event::REJECTED || (kind == event::UNREACHABLE && ud && status > 0);
    let data = if refused { data } else { &[] };
    let ev = new_event(&mut m.c, kind, status, data);
    m.deliver(ev);
}

/// A connection request: a new id on the listener's device (with its own channel when
/// the listener is synchronous, as rdma-core gives it) and `CONNECT_REQUEST` with the
/// REQ's private data on the listener's channel (a SIDR_REQ's for a UD listener), and
/// the REQ's initiator depth and responder resources as the passive side's (swapped,
/// as `cma_set_req_event_data` gives them). A request for a port no id listens on any
/// more is rejected.
fn request(v: &Verbs, g: &mut Guard, i: usize, e: &rocex_cm_event) {
    let ctx = g.dev(i).ctx;
    let Some(&l) = g.listeners.get(&(i, e.ps, e.port)) else {
        // SAFETY: the device's open context.
        unsafe { (v.rocex_cm_reject)(ctx, e.id, core::ptr::null(), 0) };
        return;
    };
    // SAFETY: ids in the registry are live.
    let lm = unsafe { &mut *l };
    let ch = if lm.sync.is_null() {
        lm.c.channel
    } else {
        core::ptr::null_mut()
    };
    let Ok(new) = new_id(ch, lm.c.context, lm.c.ps, lm.c.qp_type) else {
        // SAFETY: as above.
        unsafe { (v.rocex_cm_reject)(ctx, e.id, core::ptr::null(), 0) };
        return;
    };
    // SAFETY: just made.
    let m: &mut Id = unsafe { &mut *new };
    m.set_dev(v, g, i);
    m.state = State::Requested(e.id);
    let (local, remote) = (g.dev(i).addr, peer(e));
    sockaddr::write(&mut m.c.route.addr.src, SocketAddr::new(local, e.port));
    sockaddr::write(
        &mut m.c.route.addr.dst,
        SocketAddr::new(remote, e.peer_port),
    );
    m.c.route.addr.ibaddr = rdma_ib_addr {
        sgid: sockaddr::gid(local),
        dgid: sockaddr::gid(remote),
        pkey: 0xffff_u16.to_be(),
    };
    g.conns.insert((i, e.id), new);
    let n = (e.private_data_len as usize).min(e.private_data.len());
    let mut ev = new_event(&mut m.c, event::CONNECT_REQUEST, 0, &e.private_data[..n]);
    ev.e.listen_id = &mut lm.c;
    if m.c.qp_type != IBV_QPT_UD {
        m.settled = Some(qp::Settled {
            peer: remote,
            event: *e,
        });
        // SAFETY: the conn member is the one `new_event` filled for a connected id.
        let c = unsafe { &mut ev.e.param.conn };
        (c.initiator_depth, c.responder_resources) = (e.max_rd_atomic, e.max_dest_rd_atomic);
        (c.retry_count, c.rnr_retry_count) = (e.retry_cnt, e.rnr_retry);
    }
    lm.deliver(ev);
}
