//! Single-producer single-consumer rings over a [`ShmView`].
//!
//! Indices are free-running u32 counters, masked with the owner's own `mask` only when a slot
//! is addressed, so `producer - consumer` (wrapping) is the fill level and a full ring uses
//! every slot. The producer writes a slot with relaxed stores and publishes it with a
//! `Release` store of `producer_index`; the consumer loads that index with `Acquire` before
//! it reads the slot, and hands slots back with a `Release` store of `consumer_index`, which
//! the producer loads with `Acquire` before it reuses them.
//!
//! Each side keeps its own index and the ring geometry in private memory. The other side's
//! index is read from shared memory, and it is checked: a producer index more than `slots`
//! ahead of the consumer's (or a consumer index ahead of the producer's) is a
//! [`RingError`], never a slot address.
//!
//! # Notification suppression and the missed-wakeup race
//!
//! While the consumer polls, the producer's index store is the whole doorbell: no system
//! call. A consumer that wants to sleep publishes `need_wakeup = 1` (and an `event_index`,
//! as virtio's `used_event`), and the producer writes the eventfd only when it sees the flag.
//! The race: the consumer checks the ring (empty), the producer publishes and checks the
//! flag (clear, so no eventfd), the consumer sets the flag and sleeps; the entry waits
//! forever. The fix, as in virtio's `enable_notification` and io_uring's `SQ_NEED_WAKEUP`:
//! both sides store, then `fence(SeqCst)`, then load the other's word. The consumer stores
//! the flag, fences, and re-reads the producer index; the producer stores its index,
//! fences, and reads the flag. The two SeqCst fences are totally ordered, so at least one
//! side sees the other's store: either the consumer's re-check finds the entry (it clears
//! the flag and does not sleep), or the producer sees the flag (it writes the eventfd).
//! The producer takes the flag with a swap, so one sleep costs at most one eventfd write
//! however many entries follow (the suppression that a naive wake-per-entry lacks).

use crate::layout::{RingHeader, RingSpec, ring_off};
use crate::mem::{MemError, ShmView};
use crate::sync::{AtomicU32, Ordering, fence};
use core::fmt;
use zerocopy::IntoBytes;

/// A ring-level fault: nothing was consumed; the queue cannot be trusted any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingError {
    /// The shared producer index is more than `slots` ahead of the consumer's own index.
    ProducerAhead {
        /// The producer index read from shared memory.
        producer: u32,
        /// The consumer's private index.
        consumer: u32,
        /// Slots in the ring.
        slots: u32,
    },
    /// The shared consumer index is ahead of the producer's own index (or behind by more
    /// than `slots`).
    ConsumerAhead {
        /// The producer's private index.
        producer: u32,
        /// The consumer index read from shared memory.
        consumer: u32,
        /// Slots in the ring.
        slots: u32,
    },
    /// Every slot is in use.
    Full,
    /// An entry longer than a slot.
    TooLarge {
        /// Bytes offered.
        len: usize,
        /// Bytes per slot.
        slot_size: u32,
    },
    /// The view is smaller than the ring.
    Mem(MemError),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ProducerAhead {
                producer,
                consumer,
                slots,
            } => write!(
                f,
                "producer index {producer} is more than {slots} slots ahead of consumer index {consumer}"
            ),
            Self::ConsumerAhead {
                producer,
                consumer,
                slots,
            } => write!(
                f,
                "consumer index {consumer} is not within {slots} slots behind producer index {producer}"
            ),
            Self::Full => f.write_str("ring is full"),
            Self::TooLarge { len, slot_size } => {
                write!(f, "{len}-byte entry does not fit a {slot_size}-byte slot")
            }
            Self::Mem(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RingError {}

impl From<MemError> for RingError {
    fn from(e: MemError) -> Self {
        Self::Mem(e)
    }
}

/// What the consumer should do after [`Consumer::prepare_sleep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepCheck {
    /// Nothing is ready and the producer will write the eventfd: block on it, then call
    /// [`Consumer::finish_sleep`].
    Sleep,
    /// This many entries arrived while arming: keep polling (the flag is already cleared).
    Ready(u32),
}

/// virtio's `vring_need_event`: true when moving the index from `old` to `new` passed
/// `event` (that is, `event` is in `[old, new)` modulo 2^32).
pub const fn need_event(event: u32, new: u32, old: u32) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

/// One ring in a view, with the geometry its owner chose.
#[derive(Debug, Clone, Copy)]
pub struct Ring<'m> {
    view: ShmView<'m>,
    spec: RingSpec,
    producer: &'m AtomicU32,
    consumer: &'m AtomicU32,
    need_wakeup: &'m AtomicU32,
    event_index: &'m AtomicU32,
}

impl<'m> Ring<'m> {
    /// The ring of geometry `spec` at the start of `view`.
    pub fn new(view: ShmView<'m>, spec: RingSpec) -> Result<Self, MemError> {
        let view = view.sub(0, spec.bytes())?;
        Ok(Self {
            view,
            spec,
            producer: view.word(ring_off::PRODUCER)?,
            consumer: view.word(ring_off::CONSUMER)?,
            need_wakeup: view.word(ring_off::NEED_WAKEUP)?,
            event_index: view.word(ring_off::EVENT_INDEX)?,
        })
    }

    /// Writes the header (with the limits the client should know) and zeroes the indices.
    /// The daemon calls this once, before it hands the region out.
    pub fn init(&self, max_sge: u32, max_inline: u32) -> Result<(), MemError> {
        self.view
            .write(0, self.spec.header(max_sge, max_inline).as_bytes())?;
        debug_assert_eq!(core::mem::size_of::<RingHeader>(), ring_off::DATA);
        Ok(())
    }

    /// The geometry.
    pub fn spec(&self) -> RingSpec {
        self.spec
    }

    /// The producer end, starting from an empty ring.
    pub fn producer(&self) -> Producer<'m> {
        self.producer_at(0)
    }

    /// The consumer end, starting from an empty ring.
    pub fn consumer(&self) -> Consumer<'m> {
        self.consumer_at(0)
    }

    /// The producer end of an empty ring whose indices both stand at `index` (both ends
    /// and the shared words must agree: see [`Ring::reset`]).
    pub fn producer_at(&self, index: u32) -> Producer<'m> {
        Producer {
            ring: *self,
            tail: index,
            head: index,
            published: index,
        }
    }

    /// The consumer end of an empty ring whose indices both stand at `index`.
    pub fn consumer_at(&self, index: u32) -> Consumer<'m> {
        Consumer {
            ring: *self,
            head: index,
            tail: index,
            released: index,
        }
    }

    /// Stores the SQ header's `responder_msn` (`Release`), after the messages it counts
    /// have written their memory.
    pub fn publish_responder_msn(&self, msn: u32) -> Result<(), MemError> {
        self.view
            .word(ring_off::RESPONDER_MSN)?
            .store(msn, Ordering::Release);
        Ok(())
    }

    /// Sets both shared indices to `index` and clears the wakeup words (an empty ring
    /// starting at `index`; tests use it to start near `u32::MAX`).
    pub fn reset(&self, index: u32) {
        self.producer.store(index, Ordering::Relaxed);
        self.consumer.store(index, Ordering::Relaxed);
        self.need_wakeup.store(0, Ordering::Relaxed);
        self.event_index.store(index, Ordering::Relaxed);
    }

    fn slot(&self, index: u32) -> Result<ShmView<'m>, MemError> {
        let size = self.spec.slot_size() as usize;
        let at = ring_off::DATA + (index & self.spec.mask()) as usize * size;
        self.view.sub(at, size)
    }
}

/// The producing end: the application for SQ and RQ, the daemon for CQ.
#[derive(Debug)]
pub struct Producer<'m> {
    ring: Ring<'m>,
    /// Next index to fill (private).
    tail: u32,
    /// Last consumer index seen, checked.
    head: u32,
    /// Last index stored to shared memory.
    published: u32,
}

impl<'m> Producer<'m> {
    /// Free slots, refreshing the consumer index from shared memory.
    pub fn free(&mut self) -> Result<u32, RingError> {
        let slots = self.ring.spec.slots();
        let c = self.ring.consumer.load(Ordering::Acquire);
        let used = self.tail.wrapping_sub(c);
        if used > slots {
            return Err(RingError::ConsumerAhead {
                producer: self.tail,
                consumer: c,
                slots,
            });
        }
        self.head = c;
        Ok(slots - used)
    }

    /// Copies `entry` into the next slot (unpublished until [`publish`](Self::publish)).
    /// A short entry leaves the rest of the slot as it was, except for the padding of its
    /// last 4-byte word.
    pub fn push(&mut self, entry: &[u8]) -> Result<(), RingError> {
        let slot_size = self.ring.spec.slot_size();
        if entry.len() > slot_size as usize {
            return Err(RingError::TooLarge {
                len: entry.len(),
                slot_size,
            });
        }
        if self.tail.wrapping_sub(self.head) >= self.ring.spec.slots() && self.free()? == 0 {
            return Err(RingError::Full);
        }
        let slot = self.ring.slot(self.tail)?;
        let whole = entry.len() & !3;
        slot.write(0, &entry[..whole])?;
        if whole < entry.len() {
            let mut last = [0u8; 4];
            last[..entry.len() - whole].copy_from_slice(&entry[whole..]);
            slot.write(whole, &last)?;
        }
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// Entries pushed but not yet published.
    pub fn pending(&self) -> u32 {
        self.tail.wrapping_sub(self.published)
    }

    /// Publishes every pushed entry (the doorbell: one `Release` store) and returns true
    /// when the consumer asked to be woken, i.e. the caller must write the eventfd.
    ///
    /// See the module docs for why the `SeqCst` fence sits between the index store and the
    /// flag load.
    #[must_use = "when true the consumer sleeps until the eventfd is written"]
    pub fn publish(&mut self) -> bool {
        let old = self.published;
        let new = self.tail;
        if old == new {
            return false;
        }
        self.ring.producer.store(new, Ordering::Release);
        self.published = new;
        fence(Ordering::SeqCst);
        if self.ring.need_wakeup.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let event = self.ring.event_index.load(Ordering::Relaxed);
        if !need_event(event, new, old) {
            return false;
        }
        // One eventfd write per sleep: whoever takes the flag signals.
        self.ring.need_wakeup.swap(0, Ordering::AcqRel) != 0
    }
}

/// The consuming end: the daemon for SQ and RQ, the application for CQ.
#[derive(Debug)]
pub struct Consumer<'m> {
    ring: Ring<'m>,
    /// Next index to read (private).
    head: u32,
    /// Last producer index seen, checked.
    tail: u32,
    /// Last index stored to shared memory.
    released: u32,
}

/// One slot handed to the consumer: a bounded view, valid until the next
/// [`Consumer::release`].
#[derive(Debug, Clone, Copy)]
pub struct Slot<'m> {
    /// The slot's bytes.
    pub view: ShmView<'m>,
    /// The free-running index of the slot.
    pub index: u32,
}

impl<'m> Consumer<'m> {
    /// The geometry.
    pub fn spec(&self) -> RingSpec {
        self.ring.spec
    }

    /// Entries ready, refreshing the producer index from shared memory (`Acquire`).
    pub fn available(&mut self) -> Result<u32, RingError> {
        let slots = self.ring.spec.slots();
        let p = self.ring.producer.load(Ordering::Acquire);
        let ready = p.wrapping_sub(self.head);
        if ready > slots {
            return Err(RingError::ProducerAhead {
                producer: p,
                consumer: self.head,
                slots,
            });
        }
        self.tail = p;
        Ok(ready)
    }

    /// The next published slot, or `None` when the ring is empty. The slot stays the
    /// consumer's until [`release`](Self::release); read it once into private memory.
    pub fn next_slot(&mut self) -> Result<Option<Slot<'m>>, RingError> {
        if self.head == self.tail && self.available()? == 0 {
            return Ok(None);
        }
        let index = self.head;
        let view = self.ring.slot(index)?;
        self.head = self.head.wrapping_add(1);
        Ok(Some(Slot { view, index }))
    }

    /// Copies the next entry (up to `out.len()` bytes, a multiple of 4) into `out`.
    pub fn pop_into(&mut self, out: &mut [u8]) -> Result<bool, RingError> {
        match self.next_slot()? {
            None => Ok(false),
            Some(slot) => {
                let n = out.len().min(slot.view.len());
                slot.view.read(0, &mut out[..n])?;
                Ok(true)
            }
        }
    }

    /// Hands every slot taken so far back to the producer (`Release`).
    pub fn release(&mut self) {
        if self.released != self.head {
            self.ring.consumer.store(self.head, Ordering::Release);
            self.released = self.head;
        }
    }

    /// Arms the wakeup: asks for the eventfd once at least `min_ready` (≥ 1) entries are
    /// ready, then re-checks the ring. See the module docs for the race this closes.
    pub fn prepare_sleep(&mut self, min_ready: u32) -> Result<SleepCheck, RingError> {
        self.release();
        let min_ready = min_ready.clamp(1, self.ring.spec.slots());
        self.ring
            .event_index
            .store(self.head.wrapping_add(min_ready - 1), Ordering::Relaxed);
        self.ring.need_wakeup.store(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let ready = self.available()?;
        if ready >= min_ready {
            self.ring.need_wakeup.store(0, Ordering::Relaxed);
            return Ok(SleepCheck::Ready(ready));
        }
        Ok(SleepCheck::Sleep)
    }

    /// Disarms after a wakeup (or a timeout); the caller then drains the ring.
    pub fn finish_sleep(&mut self) {
        self.ring.need_wakeup.store(0, Ordering::Relaxed);
    }
}
