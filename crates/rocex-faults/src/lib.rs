//! The one fault model: what a bad network does to a packet (loss, duplication, corruption,
//! delay, jitter, reordering), drawn from a seeded generator on the time the caller gives.
//!
//! The simulated fabric (rocex-sim) applies a [`Link`] to every packet it carries on
//! virtual time; `--inject` (rocex-io's `Injected`) applies the same [`Link`] through an
//! [`Injector`] to every packet a real engine sends. Neither reads a clock: a run with the
//! same seed and the same times does the same. A crate of its own, so that the I/O layer
//! shares the model without linking the simulator. `docs/faults.md` has the model and the
//! `--inject` syntax.

#![forbid(unsafe_code)]

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rocex_proto::Instant;

/// How long a reordered packet is held back at most, unless told otherwise.
pub const DEFAULT_REORDER_BY: Duration = Duration::from_micros(100);

/// What a link does to the packets it carries. Probabilities are in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// One-way delay.
    pub delay: Duration,
    /// Extra delay, uniform in `0..jitter`, which reorders packets when it exceeds their spacing.
    pub jitter: Duration,
    /// Chance a packet is lost.
    pub loss: f64,
    /// Chance a packet is delivered twice.
    pub duplicate: f64,
    /// Chance a packet is held back by up to `reorder_by`, arriving after later ones.
    pub reorder: f64,
    /// How long a reordered packet is held back at most.
    pub reorder_by: Duration,
    /// Chance one bit of a packet is flipped.
    pub corrupt: f64,
}

impl Default for Link {
    /// A perfect link; a reordered packet would be held back [`DEFAULT_REORDER_BY`] at most.
    fn default() -> Self {
        Self {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_by: DEFAULT_REORDER_BY,
            corrupt: 0.0,
        }
    }
}

/// The seeded generator faults are drawn from.
#[derive(Debug, Clone)]
pub struct Dice(ChaCha8Rng);

impl Dice {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// True with probability `p` (and without a draw when `p` is 0).
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.0.next_u64() as f64 / u64::MAX as f64) < p
    }

    /// A duration uniform in `0..d`.
    pub fn up_to(&mut self, d: Duration) -> Duration {
        let n = d.as_nanos() as u64;
        if n == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.0.next_u64() % n)
        }
    }

    /// A number uniform in `0..n`; `n` must not be 0.
    fn below(&mut self, n: usize) -> usize {
        self.0.next_u64() as usize % n
    }
}

/// One copy of a packet the link carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// How long after it was sent it arrives.
    pub after: Duration,
    /// It was held back (reordered).
    pub held_back: bool,
}

/// What became of a packet the link did not lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Carried {
    /// One bit was flipped.
    pub corrupted: bool,
    copies: [Arrival; 2],
    count: usize,
}

impl Carried {
    /// The copies that arrive: one, or two when duplicated.
    pub fn copies(&self) -> &[Arrival] {
        &self.copies[..self.count]
    }
}

impl Link {
    /// A perfect link with a delay.
    pub fn with_delay(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    /// Decides the fate of one packet: lost (`None`), or carried, with one bit of `bytes`
    /// flipped if corrupted, as one or two copies, each delayed and maybe held back. The
    /// draws come in one fixed order (loss, corruption, duplication, then each copy's
    /// jitter and reordering), so a seed replays.
    pub fn carry(&self, dice: &mut Dice, bytes: &mut [u8]) -> Option<Carried> {
        if dice.chance(self.loss) {
            return None;
        }
        let corrupted = !bytes.is_empty() && dice.chance(self.corrupt);
        if corrupted {
            let bit = dice.below(bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
        }
        let count = if dice.chance(self.duplicate) { 2 } else { 1 };
        let mut copies = [Arrival {
            after: Duration::ZERO,
            held_back: false,
        }; 2];
        for c in &mut copies[..count] {
            c.after = self.delay + dice.up_to(self.jitter);
            if dice.chance(self.reorder) {
                c.after += dice.up_to(self.reorder_by);
                c.held_back = true;
            }
        }
        Some(Carried {
            corrupted,
            copies,
            count,
        })
    }
}

/// What the faults did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultCounters {
    /// Packets dropped.
    pub lost: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Copies held back.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
}

impl FaultCounters {
    /// Counts one packet's fate.
    pub fn count(&mut self, fate: Option<&Carried>) {
        let Some(c) = fate else {
            self.lost += 1;
            return;
        };
        self.corrupted += u64::from(c.corrupted);
        self.duplicated += c.copies().len() as u64 - 1;
        self.reordered += c.copies().iter().filter(|c| c.held_back).count() as u64;
    }
}

/// A packet waiting for its time.
#[derive(Debug)]
struct Held<D> {
    at: Instant,
    seq: u64,
    to: D,
    bytes: Vec<u8>,
}

// Ordered by due time, then by when it was held: the destination plays no part.
impl<D> PartialEq for Held<D> {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl<D> Eq for Held<D> {}
impl<D> PartialOrd for Held<D> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<D> Ord for Held<D> {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Applies a [`Link`] to a stream of outgoing packets bound for destinations `D`, on the
/// time the caller gives (the engine's): what is due goes out, the rest waits.
#[derive(Debug)]
pub struct Injector<D> {
    link: Link,
    dice: Dice,
    held: BinaryHeap<Reverse<Held<D>>>,
    seq: u64,
    /// Counts of what was done.
    pub counters: FaultCounters,
}

impl<D> Injector<D> {
    /// An injector applying `link`, its faults drawn from `seed`.
    pub fn new(link: Link, seed: u64) -> Self {
        Self {
            link,
            dice: Dice::new(seed),
            held: BinaryHeap::new(),
            seq: 0,
            counters: FaultCounters::default(),
        }
    }

    /// Takes a packet bound for `to`, sent at `now`, and appends to `out` what is to be
    /// sent now, in order: the held packets due by now, then this one unless it waits.
    pub fn apply(&mut self, now: Instant, to: D, packet: &[u8], out: &mut Vec<(D, Vec<u8>)>)
    where
        D: Clone,
    {
        self.release(now, out);
        let mut bytes = packet.to_vec();
        let fate = self.link.carry(&mut self.dice, &mut bytes);
        self.counters.count(fate.as_ref());
        let Some(carried) = fate else { return };
        for c in carried.copies() {
            if c.after.is_zero() {
                out.push((to.clone(), bytes.clone()));
            } else {
                self.seq += 1;
                self.held.push(Reverse(Held {
                    at: now + c.after,
                    seq: self.seq,
                    to: to.clone(),
                    bytes: bytes.clone(),
                }));
            }
        }
    }

    /// Appends the held packets due by `now` to `out`, the earliest first.
    pub fn release(&mut self, now: Instant, out: &mut Vec<(D, Vec<u8>)>) {
        while self.held.peek().is_some_and(|Reverse(h)| h.at <= now) {
            let Reverse(h) = self.held.pop().expect("peeked");
            out.push((h.to, h.bytes));
        }
    }

    /// When the next held packet is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.peek().map(|Reverse(h)| h.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(loss: f64, duplicate: f64, reorder: f64, corrupt: f64) -> Link {
        Link {
            loss,
            duplicate,
            reorder,
            corrupt,
            ..Link::default()
        }
    }

    #[test]
    fn rates_come_out_near_what_was_asked() {
        let mut inj = Injector::new(link(0.1, 0.05, 0.0, 0.0), 3);
        let mut out = Vec::new();
        for _ in 0..100_000 {
            inj.apply(Instant::ZERO, (), &[1, 2, 3], &mut out);
        }
        let c = inj.counters;
        assert!((9_000..11_000).contains(&c.lost), "{c:?}");
        assert!((4_000..5_000).contains(&c.duplicated), "{c:?}");
        assert_eq!(out.len() as u64, 100_000 - c.lost + c.duplicated);
    }

    #[test]
    fn the_same_seed_does_the_same() {
        let run = || {
            let mut inj = Injector::new(link(0.3, 0.0, 0.2, 0.1), 9);
            let mut out = Vec::new();
            for i in 0..1000u32 {
                let now = Instant::from_micros(u64::from(i) * 10);
                inj.apply(now, i, &i.to_be_bytes(), &mut out);
            }
            inj.release(Instant::from_millis(20), &mut out);
            out
        };
        assert_eq!(run(), run());
    }

    /// A held-back packet goes out after the packets sent while it waits, once its time
    /// has come, and not before.
    #[test]
    fn held_back_packets_are_overtaken_and_then_sent() {
        let mut inj = Injector::new(link(0.0, 0.0, 0.5, 0.0), 1);
        let mut out = Vec::new();
        for i in 0..200u32 {
            inj.apply(Instant::from_micros(u64::from(i)), i, &[], &mut out);
        }
        let held = inj.counters.reordered;
        assert!((60..140).contains(&held), "{held}");
        let due = inj.next_due().expect("some are held");
        assert!(due <= Instant::from_micros(200) + DEFAULT_REORDER_BY);
        inj.release(due, &mut out);
        inj.release(Instant::from_millis(1), &mut out);
        assert_eq!(inj.next_due(), None);
        let order: Vec<u32> = out.iter().map(|&(i, _)| i).collect();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..200).collect::<Vec<_>>(), "every packet, once");
        assert_ne!(order, sorted, "some were overtaken");
    }

    /// A delay holds every packet exactly that long, in the order sent.
    #[test]
    fn delay_holds_every_packet_in_order() {
        let mut inj = Injector::new(Link::with_delay(Duration::from_millis(2)), 1);
        let mut out = Vec::new();
        inj.apply(Instant::ZERO, 1, &[1], &mut out);
        inj.apply(Instant::from_millis(1), 2, &[2], &mut out);
        assert!(out.is_empty());
        assert_eq!(inj.next_due(), Some(Instant::from_millis(2)));
        inj.release(Instant::from_millis(2), &mut out);
        assert_eq!(out, vec![(1, vec![1])]);
        inj.release(Instant::from_millis(3), &mut out);
        assert_eq!(out, vec![(1, vec![1]), (2, vec![2])]);
    }

    #[test]
    fn corruption_flips_one_bit() {
        let mut dice = Dice::new(4);
        let l = link(0.0, 0.0, 0.0, 1.0);
        let mut b = vec![0u8; 64];
        let c = l.carry(&mut dice, &mut b).expect("not lost");
        assert!(c.corrupted);
        assert_eq!(b.iter().map(|x| x.count_ones()).sum::<u32>(), 1);
        let mut empty = [];
        assert!(!l.carry(&mut dice, &mut empty).expect("not lost").corrupted);
    }
}
