//! The libibverbs this library runs on, bound at first use: `libibverbs.so.1` as the
//! dynamic loader finds it (rocex's, under `rocex run`), with its public verbs by their
//! rdma-core versions and rocex's private CM entry points (`ROCEX_PRIVATE_1`, see
//! `docs/verbs.md`). Binding at run time rather than link time keeps the build free of
//! rdma-core's development files; a libibverbs without rocex's private node (rdma-core's
//! own) makes every call fail with `ENOSYS` and says why once.

use core::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::abi::*;

type Ctx = *mut ibv_context;

/// Declares the table of bound functions: `name: node => fn(args) -> ret`.
macro_rules! table {
    ($($name:ident : $node:literal => fn($($a:ty),*) $(-> $r:ty)?;)*) => {
        /// The bound functions.
        #[allow(missing_docs)]
        pub struct Verbs {
            $(pub $name: unsafe extern "C" fn($($a),*) $(-> $r)?,)*
        }

        impl Verbs {
            fn bind(lib: *mut c_void) -> Result<Self, String> {
                Ok(Self {$(
                    // SAFETY: the symbol has this C signature in rdma-core's (and rocex's)
                    // libibverbs; `sym` checked it is there.
                    $name: unsafe {
                        core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) $(-> $r)?>(
                            sym(lib, concat!(stringify!($name), "\0"), concat!($node, "\0"))?,
                        )
                    },
                )*})
            }
        }
    };
}

table! {
    ibv_get_device_list: "IBVERBS_1.1" => fn(*mut c_int) -> *mut *mut ibv_device;
    ibv_free_device_list: "IBVERBS_1.1" => fn(*mut *mut ibv_device);
    ibv_query_port: "IBVERBS_1.1" => fn(Ctx, u8, *mut ibv_port_attr) -> c_int;
    ibv_alloc_pd: "IBVERBS_1.1" => fn(Ctx) -> *mut ibv_pd;
    ibv_create_comp_channel: "IBVERBS_1.0" => fn(Ctx) -> *mut ibv_comp_channel;
    ibv_destroy_comp_channel: "IBVERBS_1.0" => fn(*mut ibv_comp_channel) -> c_int;
    ibv_create_cq: "IBVERBS_1.1" => fn(Ctx, c_int, *mut c_void, *mut ibv_comp_channel, c_int) -> *mut ibv_cq;
    ibv_destroy_cq: "IBVERBS_1.1" => fn(*mut ibv_cq) -> c_int;
    ibv_create_qp: "IBVERBS_1.1" => fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
    ibv_modify_qp: "IBVERBS_1.1" => fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
    ibv_query_qp: "IBVERBS_1.1" => fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int;
    ibv_destroy_qp: "IBVERBS_1.1" => fn(*mut ibv_qp) -> c_int;
    ibv_create_srq: "IBVERBS_1.1" => fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq;
    ibv_destroy_srq: "IBVERBS_1.1" => fn(*mut ibv_srq) -> c_int;
    ibv_open_device: "IBVERBS_1.1" => fn(*mut ibv_device) -> Ctx;
    rocex_context_addr: "ROCEX_PRIVATE_1" => fn(Ctx, *mut [u8; 16]) -> c_int;
    rocex_cm_listen: "ROCEX_PRIVATE_1" => fn(Ctx, u16, u16) -> c_int;
    rocex_cm_unlisten: "ROCEX_PRIVATE_1" => fn(Ctx, u16, u16) -> c_int;
    rocex_cm_connect: "ROCEX_PRIVATE_1" => fn(*mut ibv_qp, u32, *const [u8; 16], u16, u16, u8, *const u8, usize, *mut u32) -> c_int;
    rocex_cm_accept: "ROCEX_PRIVATE_1" => fn(*mut ibv_qp, u32, *const u8, usize) -> c_int;
    rocex_cm_reject: "ROCEX_PRIVATE_1" => fn(Ctx, u32, *const u8, usize) -> c_int;
    rocex_cm_disconnect: "ROCEX_PRIVATE_1" => fn(Ctx, u32) -> c_int;
    rocex_cm_poll: "ROCEX_PRIVATE_1" => fn(Ctx, *mut rocex_cm_event) -> c_int;
}

/// `dlvsym` of `name` at version `node`, or why not.
fn sym(lib: *mut c_void, name: &str, node: &str) -> Result<*mut c_void, String> {
    // SAFETY: both strings end in NUL (the macro appends it); `lib` is a dlopen handle.
    let p = unsafe {
        libc::dlvsym(
            lib,
            name.as_ptr().cast::<c_char>(),
            node.as_ptr().cast::<c_char>(),
        )
    };
    if p.is_null() {
        let n = name.trim_end_matches('\0');
        let v = node.trim_end_matches('\0');
        return Err(format!(
            "libibverbs.so.1 has no {n}@{v}: rocex's librdmacm runs on rocex's libibverbs \
             (`rocex run -- PROGRAM`, docs/verbs.md)"
        ));
    }
    Ok(p)
}

/// The bound libibverbs, or `None` (errno `ENOSYS`) when it is not rocex's.
pub fn verbs() -> Option<&'static Verbs> {
    static V: OnceLock<Result<Verbs, String>> = OnceLock::new();
    let v = V.get_or_init(|| {
        let so = c"libibverbs.so.1";
        // SAFETY: a NUL-terminated name; the handle is kept for the process's life.
        let lib = unsafe { libc::dlopen(so.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if lib.is_null() {
            // SAFETY: dlerror returns a NUL-terminated message after a failed dlopen.
            let why = unsafe { CStr::from_ptr(libc::dlerror()) };
            return Err(format!(
                "cannot load libibverbs.so.1: {}",
                why.to_string_lossy()
            ));
        }
        Verbs::bind(lib)
    });
    match v {
        Ok(v) => Some(v),
        Err(e) => {
            static SAID: OnceLock<()> = OnceLock::new();
            SAID.get_or_init(|| eprintln!("librdmacm (rocex): {e}"));
            crate::set_errno(libc::ENOSYS);
            None
        }
    }
}

/// `ibv_create_qp_ex`, an inline function of verbs.h: the extended-operations slot of the
/// `verbs_context` that holds `ctx`.
///
/// # Safety
///
/// `ctx` is a context of rocex's libibverbs (which always has the extended operations).
pub unsafe fn create_qp_ex(ctx: Ctx, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    // SAFETY: per the contract the context is the `context` field of a `verbs_context`.
    let f = unsafe {
        (*ctx
            .cast::<u8>()
            .sub(core::mem::offset_of!(verbs_context, context))
            .cast::<verbs_context>())
        .create_qp_ex
    };
    match f {
        // SAFETY: the context's own constructor, called as verbs.h does.
        Some(f) => unsafe { f(ctx, attr) },
        None => crate::null_errno(libc::EOPNOTSUPP),
    }
}
