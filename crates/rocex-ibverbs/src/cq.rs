//! Completion channels, CQs (`ibv_cq` and `ibv_cq_ex`), polling and events.
//!
//! A channel is the eventfd rocexd writes when an armed CQ gets a completion; it does not
//! say which CQ, so the library keeps the CQs armed on each channel and
//! `ibv_get_cq_event` returns one that has completions. A CQ armed while completions were
//! already waiting gets its event at once (the library writes the eventfd itself), so a
//! program that arms, then polls, never sleeps past a completion.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_uint, c_void};
use std::os::fd::AsRawFd;
use std::sync::MutexGuard;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use rocex_verbs::{CompChannel, Cq as VCq};
use rocex_verbs_types::{QpType, WcOpcode, WcStatus, WorkCompletion};

use crate::abi::*;
use crate::ctx::{Ctx, CtxState, Guarded, zeroed};
use crate::{errno_of, null_errno, set_errno, symver, trace};

/// A completion channel.
#[repr(C)]
pub struct Chan {
    /// rdma-core's channel (`fd` is the eventfd).
    pub ibv: ibv_comp_channel,
    ch: Guarded<CompChannel>,
    /// The control socket, readable only when the daemon is gone.
    sock_fd: c_int,
    /// The CQs of this channel (armed or not).
    cqs: Guarded<Vec<*mut Cq>>,
}

/// A CQ (always the extended form, whose prefix is `ibv_cq`).
#[repr(C)]
pub struct Cq {
    /// rdma-core's CQ.
    pub ibv: ibv_cq_ex,
    /// The rocex-verbs CQ.
    pub cq: Guarded<VCq>,
    chan: *mut Chan,
    armed: AtomicBool,
    /// Empty polls since the daemon was last checked for.
    empty: AtomicU32,
    /// When the current run of empty polls reached [`spins_before_yield`] ([`micros`]).
    empty_since: AtomicU64,
    /// The completion `ibv_start_poll`/`ibv_next_poll` last took (one poller at a time, as
    /// the extended CQ API requires).
    cur: UnsafeCell<ibv_wc>,
    /// Completions of local requests (BIND_MW, LOCAL_INV: `mw.rs`), taken first.
    local: Guarded<crate::mw::LocalWcs>,
}

impl Cq {
    /// # Safety
    ///
    /// `cq` is a CQ of this library.
    pub unsafe fn from_ibv<'a>(cq: *mut ibv_cq) -> &'a Self {
        // SAFETY: `ibv` (whose prefix is ibv_cq) is the first field of the repr(C) Cq.
        unsafe { &*cq.cast::<Self>() }
    }

    /// Adds the completion of a local request (`mw.rs`); on an armed CQ its event is
    /// owed at once, as for a completion from rocexd.
    pub(crate) fn push_local(&self, g: &MutexGuard<'_, CtxState>, wc: ibv_wc) {
        self.local(g).push_back(wc);
        let vcq = self.cq.get(g);
        if self.armed.load(Ordering::Acquire) && vcq.armed().unwrap_or(false) {
            let _ = vcq.take_arm();
            let _ = vcq.channel().signal();
        }
    }

    /// The completions of local requests waiting to be polled (`mw.rs`).
    fn local<'a>(&'a self, g: &'a MutexGuard<'_, CtxState>) -> &'a mut crate::mw::LocalWcs {
        self.local.get(g)
    }

    pub(crate) fn ctx(&self) -> &Ctx {
        // SAFETY: a CQ's context outlives it.
        unsafe { Ctx::from_ibv(self.ibv.context) }
    }
}

/// `ibv_create_comp_channel`.
///
/// # Safety
///
/// `context` is a context of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(
    context: *mut ibv_context,
) -> *mut ibv_comp_channel {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let g = ctx.lock();
    match g.verbs.create_comp_channel() {
        Ok(ch) => {
            let [ev, sock] = ch.wait_fds();
            let (ev, sock) = (ev.as_raw_fd(), sock.as_raw_fd());
            // The eventfd comes from the daemon non-blocking; a channel starts blocking
            // (as rdma-core's), so that a program setting O_NONBLOCK is seen. The daemon
            // only writes it, which never blocks on an eventfd it is not flooding.
            // SAFETY: fcntl on the channel's own eventfd.
            unsafe {
                let fl = libc::fcntl(ev, libc::F_GETFL);
                if fl >= 0 {
                    libc::fcntl(ev, libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
            }
            Box::into_raw(Box::new(Chan {
                ibv: ibv_comp_channel {
                    context,
                    fd: ev,
                    refcnt: 0,
                },
                ch: Guarded::new(ch),
                sock_fd: sock,
                cqs: Guarded::new(Vec::new()),
            }))
            .cast()
        }
        Err(e) => null_errno(errno_of(&e)),
    }
}

/// `ibv_destroy_comp_channel`: EBUSY while CQs use it.
///
/// # Safety
///
/// `channel` is a channel of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ibv_comp_channel) -> c_int {
    // SAFETY: per the contract.
    let ctx = unsafe { Ctx::from_ibv((*channel).context) };
    let g = ctx.lock();
    // SAFETY: `ibv` is the first field of the repr(C) Chan.
    let ch = unsafe { &*channel.cast::<Chan>() };
    if !ch.cqs.get(&g).is_empty() {
        return libc::EBUSY;
    }
    // SAFETY: made by Box::into_raw above; dropped under the lock.
    drop(unsafe { Box::from_raw(channel.cast::<Chan>()) });
    0
}

/// Makes a CQ (both `ibv_create_cq` and the extended operation).
unsafe fn create(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
) -> *mut Cq {
    // SAFETY: per the callers' contracts.
    let ctx = unsafe { Ctx::from_ibv(context) };
    let Ok(n) = u32::try_from(cqe) else {
        return null_errno(libc::EINVAL);
    };
    let g = ctx.lock();
    let chan = channel.cast::<Chan>();
    // SAFETY: a non-null channel is one of this library's, alive while CQs use it.
    let vch = (!chan.is_null()).then(|| unsafe { &*chan }.ch.get(&g));
    let vcq = match g.verbs.create_cq(n.max(1), vch.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            trace("ibv_create_cq", &e);
            return null_errno(errno_of(&e));
        }
    };
    // SAFETY: all-zero is valid for every field of ibv_cq_ex (pointers, integers,
    // optional function pointers, pthread objects' static initializer).
    let mut ibv: ibv_cq_ex = unsafe { core::mem::zeroed() };
    ibv.context = context;
    ibv.channel = channel;
    ibv.cq_context = cq_context;
    ibv.handle = vcq.handle();
    ibv.cqe = cqe;
    ibv.mutex = zeroed();
    ibv.cond = zeroed();
    let cq = Box::into_raw(Box::new(Cq {
        ibv,
        cq: Guarded::new(vcq),
        chan,
        armed: AtomicBool::new(false),
        empty: AtomicU32::new(0),
        empty_since: AtomicU64::new(0),
        cur: UnsafeCell::new(ibv_wc::default()),
        local: Guarded::new(Default::default()),
    }));
    if !chan.is_null() {
        // SAFETY: as above.
        unsafe { &*chan }.cqs.get(&g).push(cq);
    }
    cq
}

/// `ibv_create_cq`.
///
/// # Safety
///
/// `context` is a context of this library; `channel` NULL or one of its channels.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: per the contract.
    unsafe { create(context, cqe, cq_context, channel) }.cast()
}

/// `create_cq_ex` of the extended operations (`ibv_create_cq_ex`): the standard fields
/// only (byte_len, imm, qp_num, src_qp, slid, sl, dlid_path_bits); timestamps and the
/// rest are refused with EOPNOTSUPP.
pub(crate) unsafe extern "C" fn create_cq_ex(
    context: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    // SAFETY: verbs.h passes a readable attribute struct.
    let a = unsafe { &*attr };
    if a.wc_flags & !0x7f != 0 {
        crate::unsupported(
            "ibv_create_cq_ex with wc_flags beyond the standard ones",
            "EOPNOTSUPP",
        );
        return null_errno(libc::EOPNOTSUPP);
    }
    // SAFETY: per the contract of the operation.
    let cq = unsafe { create(context, a.cqe as c_int, a.cq_context, a.channel) };
    if cq.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: just made.
    let ex = unsafe { &mut (*cq).ibv };
    ex.start_poll = Some(start_poll);
    ex.next_poll = Some(next_poll);
    ex.end_poll = Some(end_poll);
    ex.read_opcode = Some(read_opcode);
    ex.read_vendor_err = Some(read_vendor_err);
    ex.read_byte_len = Some(read_byte_len);
    ex.read_imm_data = Some(read_imm_data);
    ex.read_qp_num = Some(read_qp_num);
    ex.read_src_qp = Some(read_src_qp);
    ex.read_wc_flags = Some(read_wc_flags);
    ex.read_slid = Some(read_slid);
    ex.read_sl = Some(read_sl);
    ex.read_dlid_path_bits = Some(read_dlid_path_bits);
    ex
}

/// `ibv_destroy_cq`.
///
/// # Safety
///
/// `cq` is a CQ of this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: per the contract.
    let c = unsafe { Cq::from_ibv(cq) };
    let ctx = c.ctx();
    let g = ctx.lock();
    if !c.chan.is_null() {
        // SAFETY: the channel outlives its CQs.
        unsafe { &*c.chan }
            .cqs
            .get(&g)
            .retain(|&x| !core::ptr::eq(x, c));
    }
    // SAFETY: made by Box::into_raw in `create`; dropped under the lock.
    drop(unsafe { Box::from_raw(cq.cast::<Cq>()) });
    0
}

/// A completion as `struct ibv_wc`. A receive on a UD QP carries a GRH, as on rxe.
fn wc_of(w: &WorkCompletion, st: &CtxState) -> ibv_wc {
    let mut flags = 0;
    let mut imm = 0;
    if let Some(i) = w.imm_data {
        flags |= 1 << 1; // IBV_WC_WITH_IMM
        imm = i.to_be();
    } else if let Some(r) = w.invalidated_rkey {
        flags |= 1 << 3; // IBV_WC_WITH_INV
        imm = r;
    }
    let recv = matches!(w.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
    let ud = st.qp_types.get(&w.qp_num) == Some(&QpType::Ud);
    if recv && ud && w.status == WcStatus::Success {
        flags |= 1; // IBV_WC_GRH
    }
    ibv_wc {
        wr_id: w.wr_id,
        status: w.status as c_int,
        opcode: w.opcode as c_int,
        vendor_err: 0,
        byte_len: w.byte_len,
        imm_data: imm,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: flags,
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// Takes up to `max` completions from the CQ's ring and hands the program each it is to
/// see, as `ibv_wc`; returns how many it handed. A completion on a QP attached to an SRQ
/// is first accounted to the SRQ, which keeps a flushed receive (`srq::on_completion`).
/// What `ibv_poll_cq` and the extended CQ's `start_poll`/`next_poll` share.
fn take(
    c: &Cq,
    g: &MutexGuard<'_, CtxState>,
    max: usize,
    mut f: impl FnMut(ibv_wc),
) -> rocex_verbs::Result<usize> {
    let st: &CtxState = g;
    let mut shown = 0;
    let local = c.local(g);
    while shown < max {
        let Some(w) = local.pop_front() else { break };
        f(w);
        shown += 1;
    }
    c.cq.get(g).take_with(max - shown, |w| {
        if let Some(&srq) = st.srq_of.get(&w.qp_num) {
            if !crate::srq::on_completion(srq, &w, g) {
                return;
            }
        }
        f(wc_of(&w, st));
        shown += 1;
    })?;
    Ok(shown)
}

/// `poll_cq` of `ibv_context.ops` (`ibv_poll_cq`): no system call.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: verbs.h passes a CQ of this library.
    let c = unsafe { Cq::from_ibv(cq) };
    let Ok(max) = usize::try_from(n) else {
        return -libc::EINVAL;
    };
    let g = c.ctx().lock();
    let mut i = 0;
    let r = take(c, &g, max, |w| {
        // SAFETY: the caller's array holds `n` entries and i < n.
        unsafe { wc.add(i).write(w) };
        i += 1;
    });
    match r {
        // A daemon that died leaves the ring mapped and silent: every so many empty polls
        // look at the control socket, so the program sees an error instead of waiting.
        Ok(0) => {
            let n = c.empty.fetch_add(1, Ordering::Relaxed);
            if n % GONE_CHECK == GONE_CHECK - 1 && g.verbs.is_gone() {
                trace("ibv_poll_cq", &"rocexd is gone");
                return -libc::EIO;
            }
            let spins = spins_before_yield(g.verbs.is_direct());
            if n < spins {
                return 0;
            }
            // A program spinning on an empty CQ competes with rocexd, which does the
            // device's work on a core of this host: past a short spin, each empty poll
            // lets it run first, and once the CQ has been empty for a while, sleeps.
            let now = micros();
            if n == spins {
                c.empty_since.store(now, Ordering::Relaxed);
            }
            let waited = now.saturating_sub(c.empty_since.load(Ordering::Relaxed));
            if waited >= SLEEP_AFTER_US && c.chan.is_null() {
                nap(c, g);
            } else {
                drop(g);
                std::thread::yield_now();
            }
            0
        }
        Ok(k) => {
            c.empty.store(0, Ordering::Relaxed);
            // A SEND's or WRITE's completion: perhaps wait, yielding the core to rocexd
            // without the lock, until the peer's answer has landed (`docs/verbs.md`,
            // "Lingering on the daemon path").
            if let Some(w) = c.cq.get(&g).answer_wait() {
                drop(g);
                let l = w.run();
                c.cq.get(&c.ctx().lock()).lingered(l);
            }
            k as c_int
        }
        Err(e) => {
            trace("ibv_poll_cq", &e);
            -errno_of(&e)
        }
    }
}

/// Empty polls between two checks that the daemon is still there.
const GONE_CHECK: u32 = 4096;

/// Empty polls in a row before each further one yields the processor. On rocexd's rings a
/// few, for the completion a poll finds at once: every completion is rocexd's work, and
/// where rocexd shares the program's core each empty poll before the first yield keeps it
/// waiting (`ib_write_lat` pinned beside rocexd read 11.5 us with 64 spins, 8.3-9.0 us
/// with 4; `docs/verbs.md`, "Lingering on the daemon path"). On a direct context each
/// poll runs the engine itself, and 64 read 0.15 us less than 4.
fn spins_before_yield(direct: bool) -> u32 {
    if direct { 64 } else { 4 }
}

/// How long (in microseconds) a CQ without a channel of the program's is polled empty
/// before each further empty poll sleeps until a completion (at most [`NAP_MS`]): longer
/// than a round trip between two rocexd, so that a latency test polling for its reply
/// never pays a wake-up, and short beside the gaps between a bandwidth test's moderated
/// completions.
const SLEEP_AFTER_US: u64 = 200;

/// Microseconds on the monotonic clock since the library first asked.
fn micros() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// The longest such sleep: a program polling this CQ while waiting for something else
/// (another CQ, its own memory) looks again this soon.
const NAP_MS: c_int = 1;

/// Sleeps on the CQ's own channel (which rocex-verbs makes for a CQ created without one)
/// until the daemon writes a completion or [`NAP_MS`] pass, without the context's lock.
/// Yielding alone leaves a spinning program runnable beside rocexd: where cores are
/// few (ib_write_bw spins on its CQ between moderated completions) the daemon then gets
/// a share of a core instead of the core. The arm stays set after a timeout; the daemon
/// takes it with one eventfd write at the next completion.
fn nap(c: &Cq, g: MutexGuard<'_, CtxState>) {
    let vcq = c.cq.get(&g);
    if !matches!(vcq.req_notify(), Ok(false)) {
        return; // completions came meanwhile (or the ring is bad: the next poll says so)
    }
    let [ev, sock] = vcq.channel().wait_fds().map(|f| f.as_raw_fd());
    drop(g);
    let mut fds = [
        libc::pollfd {
            fd: ev,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: sock,
            events: libc::POLLRDHUP,
            revents: 0,
        },
    ];
    // SAFETY: two valid pollfds; the CQ (and so its channel) outlives its polls.
    if unsafe { libc::poll(fds.as_mut_ptr(), 2, NAP_MS) } > 0 && fds[0].revents != 0 {
        let mut v = 0u64;
        // SAFETY: an 8-byte read from the channel's eventfd (non-blocking) into `v`.
        unsafe { libc::read(ev, (&raw mut v).cast(), 8) };
    }
}

/// `req_notify_cq` of `ibv_context.ops` (`ibv_req_notify_cq`); solicited-only arms for
/// any completion.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    // SAFETY: verbs.h passes a CQ of this library.
    let c = unsafe { Cq::from_ibv(cq) };
    let g = c.ctx().lock();
    let vcq = c.cq.get(&g);
    c.armed.store(true, Ordering::Release);
    match vcq.req_notify() {
        // Local completions waiting (`mw.rs`) are owed an event as the ring's are.
        Ok(false) if !c.local(&g).is_empty() => {
            let _ = vcq.take_arm();
            vcq.channel().signal().map_or(libc::EIO, |()| 0)
        }
        Ok(false) => 0,
        Ok(true) => vcq.channel().signal().map_or(libc::EIO, |()| 0),
        Err(e) => errno_of(&e),
    }
}

/// Waits until `fd` or the control socket is readable (or, for a non-blocking channel,
/// says it is not yet); `Err` carries the errno.
fn wait_channel(ch: &Chan) -> Result<(), c_int> {
    // SAFETY: fcntl on the channel's own eventfd.
    let fl = unsafe { libc::fcntl(ch.ibv.fd, libc::F_GETFL) };
    let timeout = if fl >= 0 && fl & libc::O_NONBLOCK != 0 {
        0
    } else {
        -1
    };
    let mut fds = [
        libc::pollfd {
            fd: ch.ibv.fd,
            events: libc::POLLIN,
            revents: 0,
        },
        // Only the hang-up: another thread's control call makes the socket readable.
        libc::pollfd {
            fd: ch.sock_fd,
            events: libc::POLLRDHUP,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if r == 0 {
            return Err(libc::EAGAIN);
        }
        if r < 0 {
            return Err(libc::EIO);
        }
        if fds[0].revents != 0 {
            let mut v = 0u64;
            // SAFETY: an 8-byte read from the eventfd into `v`.
            unsafe { libc::read(ch.ibv.fd, (&raw mut v).cast(), 8) };
            return Ok(());
        }
        return Err(libc::EIO);
    }
}

/// Takes what the eventfd `fd` holds, if anything, without waiting.
fn drain(fd: c_int) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let mut v = 0u64;
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&raw mut pfd, 1, 0) } > 0 && pfd.revents & libc::POLLIN != 0 {
        // SAFETY: an 8-byte read from the ready eventfd into `v`.
        unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
    }
}

/// `ibv_get_cq_event`: the next CQ of the channel with an event.
///
/// # Safety
///
/// `channel` is a channel of this library; `cq` and `cq_context` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: per the contract.
    let ch = unsafe { &*channel.cast::<Chan>() };
    // SAFETY: the channel's context outlives it.
    let ctx = unsafe { Ctx::from_ibv(ch.ibv.context) };
    let mut checked = false;
    loop {
        if checked {
            if let Err(e) = wait_channel(ch) {
                set_errno(e);
                return -1;
            }
        }
        checked = true;
        let g = ctx.lock();
        let cqs = ch.cqs.get(&g).clone();
        // The CQs whose arm was taken: by the daemon when a completion came (it wrote the
        // eventfd), or by `req_notify_cq` finding completions waiting. An event is owed
        // even if the program has polled those completions since, as on a device.
        let owed = |p: *const Cq| {
            // SAFETY: CQs in the list are alive (removed before they are destroyed).
            let c = unsafe { &*p };
            c.armed.load(Ordering::Acquire) && !c.cq.get(&g).armed().unwrap_or(false)
        };
        if let Some(p) = cqs.iter().copied().find(|&p| owed(p)) {
            // SAFETY: as above.
            let c = unsafe { &*p };
            c.armed.store(false, Ordering::Release);
            // The eventfd is readable exactly while an event is owed, as a device's channel
            // is: an event loop (tgtd's epoll) that saw it readable calls this and expects
            // no wait. Drained first, then signalled again if another CQ's event is owed.
            drain(ch.ibv.fd);
            if cqs.iter().any(|&q| q != p && owed(q)) {
                let _ = ch.ch.get(&g).signal();
            }
            // SAFETY: writable per the contract.
            unsafe {
                *cq = p.cast();
                *cq_context = c.ibv.cq_context;
            }
            return 0;
        }
    }
}

/// `ibv_ack_cq_events`.
///
/// # Safety
///
/// `cq` is a CQ of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    // SAFETY: per the contract.
    let c = unsafe { Cq::from_ibv(cq) };
    let _g = c.ctx().lock();
    // SAFETY: the field is only written under the context's lock.
    unsafe {
        let p = cq.cast::<ibv_cq>();
        (*p).comp_events_completed = (*p).comp_events_completed.wrapping_add(nevents);
    }
}

/// One completion into the CQ's `cur`, as `ibv_start_poll`/`ibv_next_poll` return it.
unsafe fn take_one(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: the extended CQ operations are called with a CQ of this library.
    let c = unsafe { Cq::from_ibv(cq.cast()) };
    let g = c.ctx().lock();
    let mut got = None;
    match take(c, &g, 1, |w| got = Some(w)) {
        Ok(_) => match got {
            Some(w) => {
                // SAFETY: one poller at a time per CQ (the extended API's rule).
                unsafe {
                    *c.cur.get() = w;
                    (*cq).status = w.status;
                    (*cq).wr_id = w.wr_id;
                }
                0
            }
            None => libc::ENOENT,
        },
        Err(e) => errno_of(&e),
    }
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, _attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: per the operation's contract.
    unsafe { take_one(cq) }
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: per the operation's contract.
    unsafe { take_one(cq) }
}

unsafe extern "C" fn end_poll(_cq: *mut ibv_cq_ex) {}

/// The completion `start_poll`/`next_poll` took.
unsafe fn cur<'a>(cq: *mut ibv_cq_ex) -> &'a ibv_wc {
    // SAFETY: a CQ of this library, read by its one poller.
    unsafe { &*Cq::from_ibv(cq.cast()).cur.get() }
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.opcode
}
unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.vendor_err
}
unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.byte_len
}
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.imm_data
}
unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.qp_num
}
unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.src_qp
}
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    // SAFETY: per the operation's contract.
    unsafe { cur(cq) }.wc_flags
}
unsafe extern "C" fn read_slid(_cq: *mut ibv_cq_ex) -> u32 {
    0
}
unsafe extern "C" fn read_sl(_cq: *mut ibv_cq_ex) -> u8 {
    0
}
unsafe extern "C" fn read_dlid_path_bits(_cq: *mut ibv_cq_ex) -> u8 {
    0
}

symver! {
    ibv_create_comp_channel @ "IBVERBS_1.0",
    ibv_destroy_comp_channel @ "IBVERBS_1.0",
    ibv_create_cq @ "IBVERBS_1.1",
    ibv_destroy_cq @ "IBVERBS_1.1",
    ibv_get_cq_event @ "IBVERBS_1.1",
    ibv_ack_cq_events @ "IBVERBS_1.1",
}
