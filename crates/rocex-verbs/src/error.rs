//! What a verbs call can fail with.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;

use rocex_shm::{PostError, ReadError};

/// Why a verbs call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket or a mapping failed.
    Io(io::Error),
    /// The device refused the request: rocexd, or in direct mode the engine in this
    /// process (`errno` as in libibverbs: EINVAL, ENOENT, ...).
    Daemon {
        /// The errno value.
        errno: u32,
        /// The daemon's explanation.
        detail: String,
    },
    /// The daemon answered something this library cannot use.
    Protocol(String),
    /// A work request does not fit its ring slot.
    Post(PostError),
    /// The work queue is full (`ENOMEM` from `ibv_post_send`); poll the CQ and retry.
    QueueFull,
    /// A completion in the CQ ring is malformed.
    BadCompletion(ReadError),
    /// No completion arrived in time.
    Timeout,
    /// The daemon is gone (killed, crashed or stopped): the control connection closed.
    /// Every object of this context is lost; open a new [`Context`](crate::Context) once a
    /// daemon serves the socket again.
    DaemonGone,
    /// A per-client limit of the daemon was reached (`EDQUOT`).
    Limit {
        /// The limit's configuration key (`max_qps`, `max_cqs`, `max_mrs`,
        /// `max_mr_bytes`, `max_pds`).
        key: String,
        /// The daemon's explanation.
        detail: String,
    },
    /// No daemon could be reached at a control socket
    /// ([`Context::open`](crate::Context::open)).
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why: no such file (no daemon started there), refused (a stale file), ...
        source: io::Error,
    },
    /// No socket was given and no daemon answers in the socket directory.
    NoDaemon {
        /// The directory looked in ([`socket_dir`](crate::socket_dir)).
        dir: PathBuf,
    },
    /// No socket was given and several daemons answer: the caller must choose.
    SeveralDaemons {
        /// The directory looked in ([`socket_dir`](crate::socket_dir)).
        dir: PathBuf,
        /// Each daemon's socket and address, sorted by socket.
        daemons: Vec<(PathBuf, IpAddr)>,
    },
    /// The verb is not available on this context (`EOPNOTSUPP`): `what`, and why.
    Unsupported {
        /// The verb or feature.
        what: &'static str,
        /// Why this context cannot offer it.
        why: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::Daemon { errno, detail } => {
                write!(
                    f,
                    "the device refused the request (errno {errno}): {detail}"
                )
            }
            Self::Protocol(why) => write!(f, "control-channel protocol error: {why}"),
            Self::Post(e) => write!(f, "{e}"),
            Self::QueueFull => f.write_str("the work queue is full"),
            Self::BadCompletion(e) => write!(f, "malformed completion: {e}"),
            Self::Timeout => f.write_str("no completion within the timeout"),
            Self::DaemonGone => f.write_str("rocexd is gone: the control connection closed"),
            Self::Limit { detail, .. } => write!(f, "rocexd per-client limit: {detail}"),
            Self::Connect { path, source } => match source.kind() {
                // No file, or a file no daemon listens on any more.
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => write!(
                    f,
                    "no rocexd at {} ({source}); start one with `rocexd --addr IP --socket \
                     {}`",
                    path.display(),
                    path.display()
                ),
                _ => write!(
                    f,
                    "cannot connect to rocexd at {}: {source}",
                    path.display()
                ),
            },
            Self::Unsupported { what, why } => {
                write!(f, "{what} is not supported on a direct context: {why}")
            }
            Self::NoDaemon { dir } => write!(
                f,
                "no rocexd answers in {}: start one with `rocexd --addr IP` (it serves \
                 {}/IP.sock), or name a daemon's socket with --socket PATH or \
                 ROCEX_SOCKET=PATH",
                dir.display(),
                dir.display()
            ),
            Self::SeveralDaemons { dir, daemons } => {
                write!(
                    f,
                    "{} rocexd answer in {}; choose one with --socket PATH or \
                     ROCEX_SOCKET=PATH:",
                    daemons.len(),
                    dir.display()
                )?;
                for (path, addr) in daemons {
                    write!(f, "\n  {}  (address {addr})", path.display())?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// A socket error that means the daemon's end is closed.
pub(crate) fn gone_or_io(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::NotConnected
        | io::ErrorKind::UnexpectedEof => Error::DaemonGone,
        _ => Error::Io(e),
    }
}

/// `EDQUOT`: the per-client limits of `docs/abi.md` §6.3.
const EDQUOT: u32 = rustix::io::Errno::DQUOT.raw_os_error() as u32;

/// A refusal as its typed error: a limit's detail starts with the limit's key.
pub(crate) fn refusal(errno: u32, detail: String) -> Error {
    if errno == EDQUOT {
        let key = detail.split(':').next().unwrap_or_default().to_owned();
        return Error::Limit { key, detail };
    }
    Error::Daemon { errno, detail }
}

/// A result of a verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn proto(why: impl Into<String>) -> Error {
    Error::Protocol(why.into())
}
