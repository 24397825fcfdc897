//! Completion channels and CQs: `CreateCompChannel`, `CreateCq`, `ResizeCq`, `DestroyCq`.

use std::sync::Arc;

use rocex_proto::Engine;
use rocex_shm::EventFd;
use rocex_shm::control::{Response, kind};

use super::{Reply, dup, verbs_error};
use crate::client::{Client, MAX_PER_CLIENT};
use crate::limits::{Limits, Resource};
use crate::pump::{self, CqPump};

/// A completion channel: the eventfd the daemon writes for an armed CQ, one end to the
/// client.
pub(super) fn create_channel(c: &mut Client) -> Reply {
    if c.channels.len() >= MAX_PER_CLIENT {
        return Reply::err(libc::ENOMEM, "too many channels");
    }
    let ev = match EventFd::new() {
        Ok(e) => Arc::new(e),
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    let fd = match dup(&*ev) {
        Ok(f) => f,
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    let channel = c.next_channel;
    c.next_channel += 1;
    c.channels.insert(channel, ev);
    Reply {
        resp: Response::CreateCompChannel { channel },
        fds: vec![fd],
    }
}

/// A CQ of at least `cqe` entries, its ring shared with the client; `channel` 0 for none.
pub(super) fn create(
    engine: &mut Engine,
    limits: &Limits,
    c: &mut Client,
    cqe: u32,
    channel: u32,
) -> Reply {
    if let Err(e) = limits.check(Resource::Cqs, c.cqs.len() as u64, 1) {
        return Reply::over(e);
    }
    if cqe == 0 || cqe as usize > engine.config().max_cqe {
        return Reply::err(libc::EINVAL, "cqe out of range");
    }
    let ch = match channel {
        0 => None,
        n => match c.channels.get(&n) {
            Some(ch) => Some(ch.clone()),
            None => return Reply::err(libc::ENOENT, "no such channel"),
        },
    };
    let slots = cqe.next_power_of_two();
    let pump = match CqPump::create(slots, ch) {
        Ok(p) => p,
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    let fd = match dup(pump.region().fd()) {
        Ok(f) => f,
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    let cq = match engine.create_cq(slots as usize) {
        Ok(cq) => cq,
        Err(e) => return verbs_error(e),
    };
    let slots = pump.slots();
    c.cqs.insert(cq, pump);
    Reply {
        resp: Response::CreateCq {
            cq,
            slots,
            ring_offset: pump::CQ_RING_OFFSET as u64,
        },
        fds: vec![fd],
    }
}

/// Gives one of the client's CQs a new ring of at least `cqe` entries (`ibv_resize_cq`),
/// as rxe re-creates a CQ's queue (`rxe_cq_resize_queue`): the old ring keeps what it
/// holds for the client to read first, completions from now on go into the new one, and
/// the engine's CQ holds as many as the new ring. Out of range, or fewer entries than the
/// engine still holds for the ring, is EINVAL (rxe `rxe_cq_chk_attr`).
pub(super) fn resize(engine: &mut Engine, c: &mut Client, cq: u32, cqe: u32) -> Reply {
    let Some(old) = c.cqs.get_mut(&cq) else {
        return Reply::err(libc::ENOENT, "no such CQ");
    };
    if cqe == 0 || cqe as usize > engine.config().max_cqe {
        return Reply::err(libc::EINVAL, "cqe out of range");
    }
    let mut new = match CqPump::create(cqe.next_power_of_two(), old.channel.clone()) {
        Ok(p) => p,
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    let fd = match dup(new.region().fd()) {
        Ok(f) => f,
        Err(e) => return Reply::err(libc::ENOMEM, e.to_string()),
    };
    if let Err(e) = engine.resize_cq(cq, new.slots() as usize) {
        return verbs_error(e);
    }
    new.pending = std::mem::take(&mut old.pending);
    let slots = new.slots();
    *old = new;
    Reply {
        resp: Response::ResizeCq {
            slots,
            ring_offset: pump::CQ_RING_OFFSET as u64,
        },
        fds: vec![fd],
    }
}

/// Destroys one of the client's CQs.
pub(super) fn destroy(engine: &mut Engine, c: &mut Client, cq: u32) -> Reply {
    if !c.cqs.contains_key(&cq) {
        return Reply::err(libc::ENOENT, "no such CQ");
    }
    let destroyed = engine.destroy_cq(cq).inspect(|()| {
        c.cqs.remove(&cq);
    });
    Reply::done(kind::DESTROY_CQ, destroyed)
}
