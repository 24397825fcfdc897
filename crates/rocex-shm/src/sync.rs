//! The atomics the rings use: `std`'s, or loom's mocks when built with `--cfg loom`, so the
//! same ring code runs under the model checker.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering, fence};
