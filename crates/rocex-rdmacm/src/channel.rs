//! Event channels and events. A channel's `fd` is a semaphore eventfd that counts the
//! events waiting in its queue, so it polls readable exactly while one waits (as the
//! kernel's `rdma_cm` file does), `rdma_get_cm_event` blocks in its `read` (or fails with
//! `EAGAIN` when the program made it non-blocking) and takes one event per count.

use core::ffi::{c_char, c_int, c_void};
use std::collections::VecDeque;
use std::sync::Mutex;

use crate::abi::*;
use crate::{fail, null_errno, symver};

/// Most bytes of private data an event carries: a REP's (196). A REQ's after rdma_cm's
/// header are 56, a REJ's 148.
pub const PRIVATE_DATA_LEN: usize = crate::abi::ROCEX_CM_PRIVATE_DATA_LEN;
/// Most bytes of private data `rdma_connect` sends: a REQ's 92 less rdma_cm's header.
pub const REQ_PRIVATE_DATA_LEN: usize = 56;
/// Most bytes of private data `rdma_accept` sends: a REP's.
pub const REP_PRIVATE_DATA_LEN: usize = 196;
/// Most bytes of private data `rdma_connect` sends on a UD id: a SIDR_REQ's 216 less
/// rdma_cm's header (the kernel's `RDMA_MAX_UDP_PRIVATE_DATA`).
pub const SIDR_REQ_PRIVATE_DATA_LEN: usize = 180;
/// Most bytes of private data `rdma_accept` sends on a UD id: a SIDR_REP's.
pub const SIDR_REP_PRIVATE_DATA_LEN: usize = 136;
/// Most bytes of private data `rdma_reject` sends: a REJ's.
pub const REJ_PRIVATE_DATA_LEN: usize = 148;

/// An event channel: rdma-core's struct first, then the queue behind it.
#[repr(C)]
pub struct Channel {
    /// What programs see.
    pub c: rdma_event_channel,
    queue: Mutex<VecDeque<usize>>,
}

/// An event handed to the program, with room for its private data.
#[repr(C)]
pub struct Event {
    /// What programs see.
    pub e: rdma_cm_event,
    data: [u8; PRIVATE_DATA_LEN],
}

impl Channel {
    /// A new channel, or an errno.
    pub fn new() -> Result<*mut Self, i32> {
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        Ok(Box::into_raw(Box::new(Self {
            c: rdma_event_channel { fd },
            queue: Mutex::new(VecDeque::new()),
        })))
    }

    /// Queues `e` and counts it on the descriptor.
    pub fn push(&self, e: Box<Event>) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(Box::into_raw(e) as usize);
        let one = 1u64;
        // SAFETY: 8 bytes from a u64 to our eventfd. It cannot overflow in practice
        // (2^64 - 2 events).
        unsafe { libc::write(self.c.fd, (&raw const one).cast::<c_void>(), 8) };
    }

    /// Drops the events waiting for `id`, or for requests to it, as the kernel does when an
    /// id goes (`ucma_destroy_id`), and takes their counts off the descriptor.
    pub fn forget(&self, id: *mut rdma_cm_id) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let before = q.len();
        q.retain(|&e| {
            let ev = e as *mut Event;
            // SAFETY: queued events are boxes only the queue owns.
            let theirs = unsafe { (*ev).e.id == id || (*ev).e.listen_id == id };
            if theirs {
                // SAFETY: as above; taken out of the queue here.
                drop(unsafe { Box::from_raw(ev) });
            }
            !theirs
        });
        for _ in q.len()..before {
            let mut n = 0u64;
            // SAFETY: 8 bytes into a u64 from the channel's eventfd; each dropped event was
            // counted (or is about to be, by the thread that queued it).
            unsafe { libc::read(self.c.fd, (&raw mut n).cast::<c_void>(), 8) };
        }
    }

    /// Frees the channel, its descriptor and the events nobody took.
    ///
    /// # Safety
    ///
    /// `ch` came from [`Channel::new`] and is not used again.
    pub unsafe fn destroy(ch: *mut Self) {
        // SAFETY: per the contract.
        let ch = unsafe { Box::from_raw(ch) };
        for e in ch.queue.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            // SAFETY: queued events are boxes only the queue owned.
            drop(unsafe { Box::from_raw(e as *mut Event) });
        }
        // SAFETY: the channel's own descriptor.
        unsafe { libc::close(ch.c.fd) };
    }
}

/// An event of `kind` for `id`, with `status` and the private data `data`.
pub fn event(id: *mut rdma_cm_id, kind: u32, status: i32, data: &[u8]) -> Box<Event> {
    let mut e = Box::new(Event {
        e: rdma_cm_event {
            id,
            listen_id: core::ptr::null_mut(),
            event: kind,
            status,
            // SAFETY: all-zero is an empty parameter block (NULL data, zero fields) in
            // either member, which UD events (`param.ud`) need whole.
            param: unsafe { core::mem::zeroed() },
        },
        data: [0; PRIVATE_DATA_LEN],
    });
    let n = data.len().min(PRIVATE_DATA_LEN);
    if n > 0 {
        e.data[..n].copy_from_slice(&data[..n]);
        let p = e.data.as_ptr().cast::<c_void>();
        e.e.param.conn.private_data = p;
        e.e.param.conn.private_data_len = n as u8;
    }
    e
}

/// `rdma_create_event_channel`.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    Channel::new().map_or_else(null_errno, |c| c.cast())
}

/// `rdma_destroy_event_channel`. A program should destroy the channel's ids first; ids
/// it left (perftest does on a failed connect) are detached from it
/// ([`crate::id::detach`]).
///
/// # Safety
///
/// `channel` came from [`rdma_create_event_channel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    if !channel.is_null() {
        crate::id::detach(channel);
        // SAFETY: per the contract.
        unsafe { Channel::destroy(channel.cast()) };
    }
}

/// `rdma_get_cm_event`: the next event, waiting for one unless the descriptor is
/// non-blocking (`EAGAIN`).
///
/// # Safety
///
/// `channel` is a channel of this library, `event` writable.
pub unsafe fn get_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    if channel.is_null() || event.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract.
    let ch = unsafe { &*channel.cast::<Channel>() };
    loop {
        let mut n = 0u64;
        // SAFETY: 8 bytes into a u64 from the channel's eventfd.
        let r = unsafe { libc::read(ch.c.fd, (&raw mut n).cast::<c_void>(), 8) };
        if r != 8 {
            let e = std::io::Error::last_os_error();
            return fail(e.raw_os_error().unwrap_or(libc::EIO));
        }
        if let Some(e) = ch
            .queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            // SAFETY: per the contract.
            unsafe { *event = (e as *mut Event).cast() };
            return 0;
        }
    }
}

/// `rdma_ack_cm_event`: frees an event [`get_event`] gave.
///
/// # Safety
///
/// `event` came from [`get_event`] and is not used again.
pub unsafe fn ack_event(event: *mut rdma_cm_event) -> c_int {
    if event.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: per the contract; the event is the head of an `Event` box.
    drop(unsafe { Box::from_raw(event.cast::<Event>()) });
    0
}

crate::export! {
    /// `rdma_get_cm_event`.
    fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int = get_event;
}

crate::export! {
    /// `rdma_ack_cm_event`.
    fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int = ack_event;
}

/// `rdma_event_str`: the event's name as rdma-core spells it.
#[unsafe(no_mangle)]
pub extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    let s: &'static core::ffi::CStr = match event {
        event::ADDR_RESOLVED => c"RDMA_CM_EVENT_ADDR_RESOLVED",
        event::ADDR_ERROR => c"RDMA_CM_EVENT_ADDR_ERROR",
        event::ROUTE_RESOLVED => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        event::ROUTE_ERROR => c"RDMA_CM_EVENT_ROUTE_ERROR",
        event::CONNECT_REQUEST => c"RDMA_CM_EVENT_CONNECT_REQUEST",
        event::CONNECT_RESPONSE => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        event::CONNECT_ERROR => c"RDMA_CM_EVENT_CONNECT_ERROR",
        event::UNREACHABLE => c"RDMA_CM_EVENT_UNREACHABLE",
        event::REJECTED => c"RDMA_CM_EVENT_REJECTED",
        event::ESTABLISHED => c"RDMA_CM_EVENT_ESTABLISHED",
        event::DISCONNECTED => c"RDMA_CM_EVENT_DISCONNECTED",
        event::DEVICE_REMOVAL => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        event::MULTICAST_JOIN => c"RDMA_CM_EVENT_MULTICAST_JOIN",
        event::MULTICAST_ERROR => c"RDMA_CM_EVENT_MULTICAST_ERROR",
        event::ADDR_CHANGE => c"RDMA_CM_EVENT_ADDR_CHANGE",
        event::TIMEWAIT_EXIT => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        _ => c"UNKNOWN EVENT",
    };
    s.as_ptr()
}

/// `rpoll`, the rsockets poll: with no rsockets in this library every descriptor is a
/// plain one (event channels, completion channels, sockets), so it is `poll(2)`.
///
/// # Safety
///
/// `fds` points at `nfds` writable entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: per the contract.
    unsafe { libc::poll(fds, nfds, timeout) }
}

symver! {
    rdma_create_event_channel @ "RDMACM_1.0",
    rdma_destroy_event_channel @ "RDMACM_1.0",
    rdma_get_cm_event @ "RDMACM_1.0",
    rdma_ack_cm_event @ "RDMACM_1.0",
    rdma_event_str @ "RDMACM_1.0",
    rpoll @ "RDMACM_1.0",
}
