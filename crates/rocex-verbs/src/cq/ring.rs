//! A CQ rocexd fills: the CQ ring this process reads without system calls, and the rings
//! a resize replaced.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use rocex_shm::control::{Request, Response};
use rocex_shm::{CqReader, ReadError, RingKind, RingSpec, SharedRegion, SleepCheck};
use rocex_verbs_types::WorkCompletion;

use crate::{AnswerWait, Channel, Error, Lingered, Result, map_rings, proto, ring_in};

/// The CQ's ring in the memfd rocexd made for it.
#[derive(Debug)]
pub(super) struct RingCq {
    ch: Rc<Channel>,
    map: SharedRegion,
    spec: RingSpec,
    off: usize,
    head: u32,
    /// Rings [`RingCq::resize`] replaced, oldest first, each read to its end before the
    /// next.
    retired: VecDeque<Retired>,
    /// The last completion the last poll took, for [`RingCq::answer_wait`].
    last: Option<WorkCompletion>,
}

/// A CQ ring that a resize replaced: the daemon writes no more into it, and the
/// completions it still holds come before any of the new ring's.
#[derive(Debug)]
struct Retired {
    map: SharedRegion,
    spec: RingSpec,
    off: usize,
    head: u32,
}

/// Completions waiting in a CQ ring from `head`.
fn available(map: &SharedRegion, off: usize, spec: RingSpec, head: u32) -> Result<u32> {
    let ring = ring_in(map, off, spec)?;
    ring.consumer_at(head)
        .available()
        .map_err(|e| Error::BadCompletion(ReadError::Ring(e)))
}

/// Takes up to `max` completions from a CQ ring at `head`, handing each to `f`: how many,
/// and the malformed completion that ended the batch, if one did.
fn drain(
    map: &SharedRegion,
    off: usize,
    spec: RingSpec,
    head: &mut u32,
    max: usize,
    f: &mut impl FnMut(WorkCompletion),
) -> Result<(usize, Option<ReadError>)> {
    let ring = ring_in(map, off, spec)?;
    let mut r = CqReader::new(ring.consumer_at(*head));
    let mut n = 0;
    let mut err = None;
    while n < max {
        match r.poll() {
            Ok(Some(wc)) => {
                *head = head.wrapping_add(1);
                n += 1;
                f(wc);
            }
            Ok(None) => break,
            Err(e @ ReadError::Desc { .. }) => {
                *head = head.wrapping_add(1);
                err = Some(e);
                break;
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    r.ring().release();
    Ok((n, err))
}

/// The ring of a `CreateCq` or `ResizeCq` answer: its memfd, slots and offset.
fn ring_of(
    ch: &Rc<Channel>,
    slots: u32,
    ring_offset: u64,
    fd: std::os::fd::OwnedFd,
) -> Result<RingCq> {
    let map = map_rings(fd)?;
    let spec = RingSpec::new(RingKind::Cq, slots, 64).map_err(|e| proto(e.to_string()))?;
    let off = usize::try_from(ring_offset).map_err(|_| proto("ring offset"))?;
    ring_in(&map, off, spec)?;
    Ok(RingCq {
        ch: ch.clone(),
        map,
        spec,
        off,
        head: 0,
        retired: VecDeque::new(),
        last: None,
    })
}

impl RingCq {
    /// Has rocexd make a CQ of at least `cqe` entries signalling `channel`: its handle
    /// and ring.
    pub(super) fn create(ch: &Rc<Channel>, cqe: u32, channel: u32) -> Result<(u32, Self)> {
        let (r, mut fds) = ch.call(&Request::CreateCq { cqe, channel }, &[])?;
        match (r, fds.pop()) {
            (
                Response::CreateCq {
                    cq,
                    slots,
                    ring_offset,
                },
                Some(fd),
            ) => Ok((cq, ring_of(ch, slots, ring_offset, fd)?)),
            _ => Err(proto("bad CreateCq response")),
        }
    }

    /// Completions waiting in the ring and in rings a resize replaced.
    pub(super) fn pending(&self) -> Result<u32> {
        let mut n = available(&self.map, self.off, self.spec, self.head)?;
        for r in &self.retired {
            n = n.saturating_add(available(&r.map, r.off, r.spec, r.head)?);
        }
        Ok(n)
    }

    /// Has rocexd make CQ `cq` a new ring of at least `cqe` entries; the old one is read
    /// to its end first, and an arm carries over.
    pub(super) fn resize(&mut self, cq: u32, cqe: u32) -> Result<()> {
        let armed = self.armed()?;
        let (r, mut fds) = self.ch.call(&Request::ResizeCq { cq, cqe }, &[])?;
        let (Response::ResizeCq { slots, ring_offset }, Some(fd)) = (r, fds.pop()) else {
            return Err(proto("bad ResizeCq response"));
        };
        let new = ring_of(&self.ch, slots, ring_offset, fd)?;
        let old = Retired {
            map: std::mem::replace(&mut self.map, new.map),
            spec: std::mem::replace(&mut self.spec, new.spec),
            off: std::mem::replace(&mut self.off, new.off),
            head: std::mem::replace(&mut self.head, 0),
        };
        self.retired.push_back(old);
        if armed {
            self.req_notify()?;
        }
        Ok(())
    }

    /// Has rocexd destroy CQ `cq`.
    pub(super) fn destroy(&self, cq: u32) -> Result<()> {
        self.ch.done(&Request::DestroyCq { cq })
    }

    /// Whether the ring is still armed (the daemon clears the word when it takes the arm).
    pub(super) fn armed(&self) -> Result<bool> {
        let w = self
            .map
            .view()
            .word(self.off + rocex_shm::layout::ring_off::NEED_WAKEUP)
            .map_err(|e| proto(e.to_string()))?;
        Ok(w.load(Ordering::Acquire) != 0)
    }

    /// Takes up to `max` completions into `f`: the replaced rings' first.
    pub(super) fn take_with(
        &mut self,
        max: usize,
        mut f: impl FnMut(WorkCompletion),
    ) -> Result<usize> {
        let last = &mut self.last;
        *last = None;
        let mut f = |wc: WorkCompletion| {
            *last = Some(wc);
            f(wc)
        };
        let mut n = 0;
        let mut err = None;
        // Rings a resize replaced first: the daemon writes no more into them, so one that
        // gives fewer than asked is done with.
        while let Some(old) = self.retired.front_mut() {
            let (k, e) = drain(&old.map, old.off, old.spec, &mut old.head, max - n, &mut f)?;
            n += k;
            err = e;
            if n == max || err.is_some() {
                break;
            }
            self.retired.pop_front();
        }
        if n < max && err.is_none() {
            let (k, e) = drain(
                &self.map,
                self.off,
                self.spec,
                &mut self.head,
                max - n,
                &mut f,
            )?;
            n += k;
            err = e;
        }
        match err {
            Some(e) if n == 0 => Err(Error::BadCompletion(e)),
            _ => Ok(n),
        }
    }

    /// Arms the ring; true when completions are already waiting.
    pub(super) fn req_notify(&mut self) -> Result<bool> {
        for r in &self.retired {
            if available(&r.map, r.off, r.spec, r.head)? > 0 {
                return Ok(true);
            }
        }
        let ring = ring_in(&self.map, self.off, self.spec)?;
        match ring.consumer_at(self.head).prepare_sleep(1) {
            Ok(SleepCheck::Sleep) => Ok(false),
            Ok(SleepCheck::Ready(_)) => Ok(true),
            Err(e) => Err(Error::BadCompletion(ReadError::Ring(e))),
        }
    }

    /// After a poll that took completions: the wait for the peer's answer to the request
    /// the last of them completed, if one is due (`answer.rs`).
    pub(super) fn answer_wait(&mut self) -> Option<AnswerWait> {
        let wc = self.last.take()?;
        self.ch.answers.borrow_mut().begin(&wc)
    }

    /// A wait [`RingCq::answer_wait`] gave has run.
    pub(super) fn lingered(&self, l: Lingered) {
        self.ch.answers.borrow_mut().ended(l);
    }

    /// Takes the arm as the daemon takes it when a completion comes.
    pub(super) fn take_arm(&mut self) -> Result<()> {
        let ring = ring_in(&self.map, self.off, self.spec)?;
        ring.consumer_at(self.head).finish_sleep();
        Ok(())
    }
}
