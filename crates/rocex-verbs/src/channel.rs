//! The control connection to rocexd: one request, one response, with descriptors.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rocex_shm::control::{
    HEADER_LEN, Request, Response, decode_header, encode_frame, kind, response_fds,
};
use rocex_shm::region::{recv_fds, send_fds};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::answer::Answers;
use crate::error::{gone_or_io, proto, refusal};
use crate::{Error, Result};

/// The control connection.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) sock: UnixStream,
    pub(crate) seq: Cell<u64>,
    /// The daemon closed the connection: every later call fails at once.
    pub(crate) gone: Cell<bool>,
    /// The context's polls' lingering on the rings (`answer.rs`).
    pub(crate) answers: RefCell<Answers>,
}

impl Channel {
    /// One request, one response: sends the frame with `fds`, reads the answer and the
    /// descriptors its kind carries. A closed connection is [`Error::DaemonGone`], now and
    /// for every later call.
    pub(crate) fn call(&self, req: &Request, fds: &[OwnedFd]) -> Result<(Response, Vec<OwnedFd>)> {
        if self.gone.get() {
            return Err(Error::DaemonGone);
        }
        let r = self.exchange(req, fds);
        if matches!(r, Err(Error::DaemonGone)) {
            self.gone.set(true);
        }
        r
    }

    /// True when the daemon's end is closed (checked without blocking). The daemon never
    /// writes outside an answer, so a readable socket between calls means end of file.
    pub(crate) fn closed(&self) -> bool {
        if self.gone.get() {
            return true;
        }
        let mut fds = [PollFd::new(&self.sock, PollFlags::IN | PollFlags::RDHUP)];
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let hup = matches!(poll(&mut fds, Some(&ts)), Ok(1)) && !fds[0].revents().is_empty();
        self.gone.set(hup);
        hup
    }

    pub(crate) fn exchange(
        &self,
        req: &Request,
        fds: &[OwnedFd],
    ) -> Result<(Response, Vec<OwnedFd>)> {
        let seq = self.seq.get().wrapping_add(1);
        self.seq.set(seq);
        let frame =
            encode_frame(req.kind(), seq, &req.encode()).map_err(|e| proto(e.to_string()))?;
        let borrowed: Vec<_> = fds.iter().map(AsFd::as_fd).collect();
        let n = send_fds(self.sock.as_fd(), &frame, &borrowed).map_err(gone_or_io)?;
        if n < frame.len() {
            write_all(&self.sock, &frame[n..]).map_err(gone_or_io)?;
        }
        let mut head = [0u8; HEADER_LEN];
        let mut got = 0;
        let mut fds = Vec::new();
        while got < HEADER_LEN {
            let (n, f) = recv_fds(self.sock.as_fd(), &mut head[got..], 4).map_err(gone_or_io)?;
            if n == 0 {
                return Err(Error::DaemonGone);
            }
            fds.extend(f);
            got += n;
        }
        let h = decode_header(&head).map_err(|e| proto(e.to_string()))?;
        let mut body = vec![0u8; h.body_len];
        let mut got = 0;
        while got < body.len() {
            let (n, f) = recv_fds(self.sock.as_fd(), &mut body[got..], 4).map_err(gone_or_io)?;
            if n == 0 {
                return Err(Error::DaemonGone);
            }
            fds.extend(f);
            got += n;
        }
        if h.seq != seq {
            return Err(proto(format!("response seq {} for request {seq}", h.seq)));
        }
        let resp = Response::decode(h.kind, &body).map_err(|e| proto(e.to_string()))?;
        if let Response::Error { errno, detail } = resp {
            return Err(refusal(errno, detail));
        }
        if h.kind != req.kind() | kind::RESPONSE {
            return Err(proto(format!(
                "response kind {:#x} to {:#x}",
                h.kind,
                req.kind()
            )));
        }
        if fds.len() != response_fds(h.kind) {
            return Err(proto(format!(
                "{} fds with response {:#x}",
                fds.len(),
                h.kind
            )));
        }
        Ok((resp, fds))
    }

    pub(crate) fn done(&self, req: &Request) -> Result<()> {
        self.call(req, &[]).map(drop)
    }
}

fn write_all(sock: &UnixStream, mut b: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut s = sock;
    while !b.is_empty() {
        let n = s.write(b)?;
        b = &b[n..];
    }
    Ok(())
}
