//! Completion queues.

use std::collections::VecDeque;

use crate::verbs::WorkCompletion;

/// A completion queue with a fixed capacity.
#[derive(Debug)]
pub(crate) struct Cq {
    entries: VecDeque<WorkCompletion>,
    capacity: usize,
    /// Set by `req_notify`; cleared when the next completion raises an event.
    armed: Option<NotifyOn>,
    /// Set when a completion did not fit (IBTA: CQ overrun, an asynchronous error).
    pub(crate) overrun: bool,
}

/// Which completions end an armed notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyOn {
    /// Any completion.
    Next,
    /// Only a receive completion for a solicited message, or any error.
    Solicited,
}

impl Cq {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            armed: None,
            overrun: false,
        }
    }

    /// Adds a completion; returns whether a notification is due.
    pub(crate) fn push(
        &mut self,
        wc: WorkCompletion,
        solicited: bool,
    ) -> Result<bool, WorkCompletion> {
        if self.entries.len() >= self.capacity {
            self.overrun = true;
            return Err(wc);
        }
        let error = wc.status != crate::verbs::WcStatus::Success;
        self.entries.push_back(wc);
        let fire = match self.armed {
            Some(NotifyOn::Next) => true,
            Some(NotifyOn::Solicited) => solicited || error,
            None => false,
        };
        if fire {
            self.armed = None;
        }
        Ok(fire)
    }

    pub(crate) fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Changes the capacity; fewer entries than are waiting is refused (rxe
    /// `rxe_cq_chk_attr`: "cqe < current # elements in queue").
    pub(crate) fn resize(&mut self, capacity: usize) -> bool {
        if capacity < self.entries.len() {
            return false;
        }
        self.capacity = capacity;
        true
    }

    pub(crate) fn arm(&mut self, on: NotifyOn) {
        self.armed = Some(on);
    }
}
