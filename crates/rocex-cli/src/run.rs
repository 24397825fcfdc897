//! `rocex run -- PROGRAM ARGS...`: runs an unmodified RDMA program on rocex, with rocex's
//! `libibverbs.so.1` and `librdmacm.so.1` (and the `libmlx5.so.1`/`libefa.so.1` stubs)
//! first on its library path; `rocex libdir` prints that directory for those who set
//! `LD_LIBRARY_PATH` themselves (docs/verbs.md).
//!
//! The libraries are found from the `rocex` binary: installed, in `../lib/rocex/` beside
//! its directory (files named by their sonames); built by cargo, as `libibverbs.so`,
//! `libmlx5.so`, `libefa.so` and `librdmacm.so` in the same target directory, which get a
//! `rocex-lib/` directory there of links named by the sonames (the names the dynamic
//! loader asks for). librdmacm is optional: without it rdma_cm programs get the system's
//! librdmacm, which finds no kernel rdma_cm for rocex's devices.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use rocex_verbs::{daemon_sockets, socket_dir};

/// The libraries: the file cargo builds and the soname programs ask for.
const LIBS: [(&str, &str); 3] = [
    ("libibverbs.so", "libibverbs.so.1"),
    ("libmlx5.so", "libmlx5.so.1"),
    ("libefa.so", "libefa.so.1"),
];

/// The drop-in librdmacm, linked beside the others when it is built. Its own dependency
/// on libibverbs (opened by soname at first use) resolves through the same directory.
const RDMACM: (&str, &str) = ("librdmacm.so", "librdmacm.so.1");

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The daemon's control socket (sets ROCEX_SOCKET for the program) [default:
    /// $ROCEX_SOCKET, else every daemon in $ROCEX_SOCKET_DIR or /run/rocex].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
pub(crate) struct LibdirArgs {}

/// The directory holding the drop-in libraries under their sonames, made if needed.
pub(crate) fn libdir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the rocex binary: {e}"))?;
    let bin = exe.parent().unwrap_or(Path::new("/"));
    let installed = bin.join("../lib/rocex");
    if LIBS.iter().all(|(_, so)| installed.join(so).exists()) {
        return Ok(installed);
    }
    // The test binaries of a cargo build live one level down, in deps/.
    let built = [bin.to_path_buf(), bin.join("..")]
        .into_iter()
        .find(|d| LIBS.iter().all(|(f, _)| d.join(f).exists()))
        .ok_or_else(|| {
            format!(
                "the drop-in libraries are not built next to {}: run `cargo build -p rocex-ibverbs -p rocex-dv-mlx5 -p rocex-dv-efa -p rocex-rdmacm` (same profile)",
                bin.display()
            )
        })?;
    let dir = built.join("rocex-lib");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let rdmacm = built.join(RDMACM.0).exists().then_some(RDMACM);
    for (file, so) in LIBS.into_iter().chain(rdmacm) {
        let link = dir.join(so);
        let target = Path::new("..").join(file);
        if std::fs::read_link(&link).ok().as_deref() == Some(target.as_path()) {
            continue;
        }
        // Another `rocex` may be making the same link: build it aside, then rename it in
        // place, which is atomic.
        let tmp = dir.join(format!(".{so}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&target, &tmp)
            .and_then(|()| std::fs::rename(&tmp, &link))
            .map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(dir)
}

/// The sockets the program would find a daemon on: `--socket`, else those
/// [`daemon_sockets`] names.
fn sockets(explicit: Option<&Path>) -> Vec<PathBuf> {
    explicit.map_or_else(daemon_sockets, |p| vec![p.to_owned()])
}

pub(crate) fn run_libdir(_a: &LibdirArgs) -> ExitCode {
    match libdir() {
        Ok(d) => {
            println!("{}", d.canonicalize().unwrap_or(d).display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocex libdir: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn run(a: &RunArgs) -> ExitCode {
    let dir = match libdir() {
        Ok(d) => d.canonicalize().unwrap_or(d),
        Err(e) => {
            eprintln!("rocex run: {e}");
            return ExitCode::FAILURE;
        }
    };
    let socks = sockets(a.socket.as_deref());
    if !socks
        .iter()
        .any(|s| std::os::unix::net::UnixStream::connect(s).is_ok())
    {
        let dir = socket_dir();
        let looked = match socks.as_slice() {
            [] => format!("{}/*.sock", dir.display()),
            s => s
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        };
        eprintln!(
            "rocex run: no rocexd answers at {looked}; the program will see no RDMA device. \
             Start one with `rocexd --addr <IP>` (socket {}/<IP>.sock) or pass \
             --socket PATH (docs/daemon.md)",
            dir.display()
        );
    }
    let mut path = OsString::from(&dir);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).env("LD_LIBRARY_PATH", path);
    if let Some(s) = &a.socket {
        cmd.env("ROCEX_SOCKET", s);
    }
    let err = cmd.exec();
    eprintln!("rocex run: {}: {err}", a.command[0].to_string_lossy());
    ExitCode::from(127)
}
