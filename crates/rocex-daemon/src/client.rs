//! One connected application: its control connection and every object it owns.
//!
//! Objects are named by the engine's own numbers (PD id, lkey, CQ id, QPN), which are
//! unique across the device; each client keeps the set it created, and a request naming
//! anything outside its sets is `ENOENT`, so one client cannot touch another's objects.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use rocex_shm::EventFd;
use rocex_shm::control::{FrameError, FrameHeader, HEADER_LEN, decode_header};
use rocex_shm::region::{recv_fds, send_fds};

use crate::pump::{CqPump, QpPump};

/// Most of each kind of object one client may hold (a client cannot exhaust the device
/// for the others).
pub(crate) const MAX_PER_CLIENT: usize = 4096;

/// Bytes one read of a control connection takes at most.
const READ_BYTES: usize = 16 * 1024;

/// One received frame.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The header.
    pub(crate) header: FrameHeader,
    /// The body.
    pub(crate) body: Vec<u8>,
}

/// A client connection and what it owns.
#[derive(Debug)]
pub(crate) struct Client {
    sock: UnixStream,
    rx: Vec<u8>,
    /// What one read takes, kept: the loop reads every client often, mostly in vain.
    read_buf: Box<[u8]>,
    /// Descriptors received and not yet claimed by a frame.
    pub(crate) fds: VecDeque<OwnedFd>,
    /// `Hello` succeeded.
    pub(crate) hello: bool,
    /// PDs (engine ids).
    pub(crate) pds: HashSet<u32>,
    /// MRs by lkey.
    pub(crate) mrs: HashSet<u32>,
    /// Memory windows by their current rkey.
    pub(crate) mws: HashSet<u32>,
    /// Completion channels by handle.
    pub(crate) channels: HashMap<u32, Arc<EventFd>>,
    /// Next channel handle.
    pub(crate) next_channel: u32,
    /// CQs by engine id.
    pub(crate) cqs: HashMap<u32, CqPump>,
    /// QPs by number.
    pub(crate) qps: HashMap<u32, QpPump>,
    /// Requests answered with an error.
    pub(crate) errors: u64,
    /// The peer's process id from `SO_PEERCRED`, taken at accept (never from a message):
    /// the process whose memory `RegMrProcess` registers. `None` if the kernel gave none.
    pub(crate) pid: Option<libc::pid_t>,
}

/// Why the connection ends.
#[derive(Debug)]
pub(crate) enum Gone {
    /// The client closed it.
    Closed,
    /// A malformed frame (§6.1: the daemon closes the connection).
    Frame(FrameError),
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("closed"),
            Self::Frame(e) => write!(f, "malformed frame: {e}"),
            Self::Io(e) => write!(f, "socket error: {e}"),
        }
    }
}

impl Client {
    /// A new connection (made non-blocking).
    pub(crate) fn new(sock: UnixStream) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        let pid = rustix::net::sockopt::socket_peercred(&sock)
            .ok()
            .map(|cred| cred.pid.as_raw_nonzero().get());
        Ok(Self {
            sock,
            rx: Vec::new(),
            read_buf: vec![0; READ_BYTES].into_boxed_slice(),
            fds: VecDeque::new(),
            hello: false,
            pds: HashSet::new(),
            mrs: HashSet::new(),
            mws: HashSet::new(),
            channels: HashMap::new(),
            next_channel: 1,
            cqs: HashMap::new(),
            qps: HashMap::new(),
            errors: 0,
            pid,
        })
    }

    /// The socket, for poll(2).
    pub(crate) fn sock(&self) -> &UnixStream {
        &self.sock
    }

    /// Reads what is waiting and returns the complete frames. At most a few frames'
    /// worth is read per call, so one chatty client cannot starve the loop.
    pub(crate) fn read_frames(&mut self) -> Result<Vec<Frame>, Gone> {
        let buf = &mut self.read_buf;
        for _ in 0..8 {
            match recv_fds(self.sock.as_fd(), buf, 4) {
                Ok((0, _)) => return Err(Gone::Closed),
                Ok((n, fds)) => {
                    self.rx.extend_from_slice(&buf[..n]);
                    self.fds.extend(fds);
                    if self.fds.len() > 16 {
                        return Err(Gone::Io(io::Error::other("too many unclaimed fds")));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Gone::Io(e)),
            }
        }
        let mut frames = Vec::new();
        loop {
            if self.rx.len() < HEADER_LEN {
                break;
            }
            let header = decode_header(&self.rx).map_err(Gone::Frame)?;
            let total = HEADER_LEN + header.body_len;
            if self.rx.len() < total {
                break;
            }
            let body = self.rx[HEADER_LEN..total].to_vec();
            self.rx.drain(..total);
            frames.push(Frame { header, body });
        }
        Ok(frames)
    }

    /// Sends one frame with its descriptors. The socket is non-blocking and responses
    /// are small, so a send that would block means the client stopped reading its
    /// answers: it is disconnected rather than allowed to stall the daemon.
    pub(crate) fn send(&mut self, frame: &[u8], fds: &[OwnedFd]) -> Result<(), Gone> {
        let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
        match send_fds(self.sock.as_fd(), frame, &borrowed) {
            Ok(n) if n == frame.len() => Ok(()),
            Ok(_) => Err(Gone::Io(io::Error::other("short write of a response"))),
            Err(e) => Err(Gone::Io(e)),
        }
    }
}
