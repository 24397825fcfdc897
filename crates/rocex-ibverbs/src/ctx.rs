//! The open device: `struct verbs_context` (and the `ibv_context` inside it) followed by
//! the rocex-verbs [`Context`] and the lock that guards every object of the context.
//!
//! This layout is what the `ROCEX_PRIVATE_1` entry points (`private.rs`) rely on:
//! librdmacm finds the [`Ctx`] behind an `ibv_context`, and the rocex-verbs `Qp` behind an
//! `ibv_qp`, to drive rocexd's CM on the same control connection that owns the QP.

use core::cell::UnsafeCell;
use core::mem::offset_of;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};

use rocex_verbs::Context;
use rocex_verbs_types::QpType;

use crate::abi::*;
use crate::device::Device;
use crate::events::AsyncEvents;

/// A value reached only while its context's lock is held.
pub struct Guarded<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get`, which needs the guard of the one mutex that
// protects all objects of a context: no two threads touch the value (nor the `Rc`s inside
// it, which all belong to that context) at the same time.
unsafe impl<T> Send for Guarded<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Guarded<T> {}

impl<T> Guarded<T> {
    /// Wraps `v`.
    pub fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// The value, while `_g` (the guard of its context's lock) is held.
    #[allow(clippy::mut_from_ref)]
    pub fn get<'a>(&'a self, _g: &'a MutexGuard<'_, CtxState>) -> &'a mut T {
        // SAFETY: the context's lock is held for 'a, and callers never hold two references
        // to the same object's value at once.
        unsafe { &mut *self.0.get() }
    }

    /// The value, by ownership (the object is being destroyed; the lock is held).
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

/// What a context's lock protects besides its objects' rocex-verbs values.
pub struct CtxState {
    /// The connection to rocexd.
    pub verbs: Context,
    /// The type of each QP by number (a UD receive completion reports a GRH).
    pub qp_types: HashMap<u32, QpType>,
    /// The SRQ of each QP attached to one, by number.
    pub srq_of: HashMap<u32, *mut ibv_srq>,
}

/// An open device.
#[repr(C)]
pub struct Ctx {
    /// rdma-core's context, extended operations first.
    pub vctx: verbs_context,
    /// The device this context opened.
    pub dev: *const Device,
    /// The lock for every object of this context.
    pub lock: Mutex<CtxState>,
    /// The daemon's address (what peers name this device by).
    pub addr: IpAddr,
    /// The GID table (index 0 link-local, 1 the address).
    pub gids: [[u8; 16]; 2],
    /// The asynchronous events (`ibv_context.async_fd`).
    pub events: AsyncEvents,
}

// SAFETY: the raw pointers name the process-lifetime device and C-owned memory; the
// mutable state is behind `lock`.
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

const CONTEXT_OFFSET: usize = offset_of!(Ctx, vctx) + offset_of!(verbs_context, context);

impl Ctx {
    /// The context behind a C `ibv_context` this library made.
    ///
    /// # Safety
    ///
    /// `c` must be the `ibv_context` of a live [`Ctx`] (every `ibv_context` this library
    /// hands out is).
    pub unsafe fn from_ibv<'a>(c: *mut ibv_context) -> &'a Self {
        // SAFETY: per the contract, `c` lies CONTEXT_OFFSET bytes into a Ctx.
        unsafe { &*c.cast::<u8>().sub(CONTEXT_OFFSET).cast::<Self>() }
    }

    /// The C context.
    pub fn ibv(&self) -> *mut ibv_context {
        (&raw const self.vctx.context).cast_mut()
    }

    /// Takes the lock (a poisoned lock is still usable: the state stays consistent between
    /// calls).
    pub fn lock(&self) -> MutexGuard<'_, CtxState> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A zeroed pthread object for the public structs' `mutex`/`cond` fields, which rdma-core
/// initializes and this library never uses.
pub fn zeroed<T>() -> T {
    // SAFETY: used only for pthread_mutex_t/pthread_cond_t, whose all-zero bit pattern is
    // their static initializer on Linux.
    unsafe { core::mem::zeroed() }
}
