//! A stub `libmlx5.so.1`. Debian's perftest links rdma-core's mlx5 "direct verbs" library
//! and asks it whether a device is an mlx5 before taking its generic path; the system's
//! copy needs libibverbs' private ABI, which rocex's libibverbs does not offer. This one
//! exports the functions those programs import, each answering "not this device" (NULL
//! with errno `EOPNOTSUPP`, or `EOPNOTSUPP`), so they run on rocex's generic verbs.

use core::ffi::{c_int, c_void};

/// NULL with errno `EOPNOTSUPP`.
fn none() -> *mut c_void {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
    core::ptr::null_mut()
}

/// `mlx5dv_open_device`: not an mlx5 device.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_open_device(_device: *mut c_void, _attr: *mut c_void) -> *mut c_void {
    none()
}

/// `mlx5dv_create_qp`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_create_qp(
    _context: *mut c_void,
    _attr: *mut c_void,
    _mlx5_attr: *mut c_void,
) -> *mut c_void {
    none()
}

/// `mlx5dv_qp_ex_from_ibv_qp_ex`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_qp_ex_from_ibv_qp_ex(_qp: *mut c_void) -> *mut c_void {
    none()
}

/// `mlx5dv_create_mkey`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_create_mkey(_attr: *mut c_void) -> *mut c_void {
    none()
}

/// `mlx5dv_destroy_mkey`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_destroy_mkey(_mkey: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `mlx5dv_devx_general_cmd`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_devx_general_cmd(
    _context: *mut c_void,
    _in: *const c_void,
    _inlen: usize,
    _out: *mut c_void,
    _outlen: usize,
) -> c_int {
    libc::EOPNOTSUPP
}

/// `mlx5dv_crypto_login`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_crypto_login(_context: *mut c_void, _attr: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `mlx5dv_dek_create`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dek_create(_context: *mut c_void, _attr: *mut c_void) -> *mut c_void {
    none()
}

/// `mlx5dv_dek_destroy`.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_dek_destroy(_dek: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `mlx5dv_is_supported`: no rocex device is an mlx5.
#[unsafe(no_mangle)]
pub extern "C" fn mlx5dv_is_supported(_device: *mut c_void) -> bool {
    false
}

core::arch::global_asm!(
    ".symver mlx5dv_open_device, mlx5dv_open_device@@MLX5_1.7",
    ".symver mlx5dv_create_qp, mlx5dv_create_qp@@MLX5_1.3",
    ".symver mlx5dv_qp_ex_from_ibv_qp_ex, mlx5dv_qp_ex_from_ibv_qp_ex@@MLX5_1.10",
    ".symver mlx5dv_create_mkey, mlx5dv_create_mkey@@MLX5_1.10",
    ".symver mlx5dv_destroy_mkey, mlx5dv_destroy_mkey@@MLX5_1.10",
    ".symver mlx5dv_devx_general_cmd, mlx5dv_devx_general_cmd@@MLX5_1.7",
    ".symver mlx5dv_crypto_login, mlx5dv_crypto_login@@MLX5_1.21",
    ".symver mlx5dv_dek_create, mlx5dv_dek_create@@MLX5_1.21",
    ".symver mlx5dv_dek_destroy, mlx5dv_dek_destroy@@MLX5_1.21",
    ".symver mlx5dv_is_supported, mlx5dv_is_supported@@MLX5_1.8",
);
