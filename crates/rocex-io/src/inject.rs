//! Fault injection on the way out: loss, duplication, reordering, corruption and delay,
//! drawn from a seeded generator, so that applications can test themselves against a bad
//! network with nothing but a flag (`loss=0.05,dup=0.01,seed=7`).
//!
//! [`Injected`] wraps any [`Backend`] and applies an [`Injector`] to what it sends. A
//! corrupted packet keeps its wrong ICRC through the backend (a GSO segment's ICRC fix is an
//! XOR), so the receiver's ICRC check drops it wherever the receiver can check.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::str::FromStr;
use std::time::Duration;

use crate::{Backend, BackendCounters, BackendKind, RxMeta};

/// Where a packet goes: the destination address and the UDP source port.
pub type To = (IpAddr, u16);

/// What to do to outgoing packets. Probabilities are in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Chance a packet is dropped.
    pub loss: f64,
    /// Chance a packet is sent twice.
    pub dup: f64,
    /// Chance a packet is held back and sent after the next one.
    pub reorder: f64,
    /// Chance one bit of a packet is flipped (the receiver's ICRC check drops it).
    pub corrupt: f64,
    /// Every packet is held this long before it is sent.
    pub delay: Duration,
    /// Seed of the generator.
    pub seed: u64,
}

/// Why a fault specification was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultsError(String);

impl fmt::Display for FaultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad fault specification: {}", self.0)
    }
}

impl std::error::Error for FaultsError {}

impl FromStr for Faults {
    type Err = FaultsError;

    /// `loss=P,dup=P,reorder=P,corrupt=P,delay=DURATION,seed=N` in any order, any subset;
    /// durations as `500us`, `2ms` or `1s`.
    fn from_str(s: &str) -> Result<Self, FaultsError> {
        let mut f = Self::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| FaultsError(format!("`{item}` is not key=value")))?;
            let prob = || -> Result<f64, FaultsError> {
                let p: f64 = v
                    .parse()
                    .map_err(|_| FaultsError(format!("`{v}` is not a number")))?;
                if (0.0..=1.0).contains(&p) {
                    Ok(p)
                } else {
                    Err(FaultsError(format!("{k}={v} is not in 0..1")))
                }
            };
            match k {
                "loss" => f.loss = prob()?,
                "dup" => f.dup = prob()?,
                "reorder" => f.reorder = prob()?,
                "corrupt" => f.corrupt = prob()?,
                "delay" => f.delay = duration(v)?,
                "seed" => {
                    f.seed = v
                        .parse()
                        .map_err(|_| FaultsError(format!("seed `{v}` is not a number")))?
                }
                _ => return Err(FaultsError(format!("unknown key `{k}`"))),
            }
        }
        Ok(f)
    }
}

fn duration(v: &str) -> Result<Duration, FaultsError> {
    let bad = || FaultsError(format!("`{v}` is not a duration like 500us, 2ms or 1s"));
    let (num, unit) = v
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((v, "ms"), |i| v.split_at(i));
    let n: u64 = num.parse().map_err(|_| bad())?;
    match unit {
        "us" => Ok(Duration::from_micros(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        _ => Err(bad()),
    }
}

/// What the injector did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultCounters {
    /// Packets dropped.
    pub lost: u64,
    /// Extra copies sent.
    pub duplicated: u64,
    /// Packets sent after a later one.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
}

/// Applies [`Faults`] to a stream of outgoing packets.
#[derive(Debug)]
pub struct Injector {
    faults: Faults,
    state: u64,
    held: Option<(To, Vec<u8>)>,
    delayed: VecDeque<(std::time::Instant, To, Vec<u8>)>,
    /// Counts of what was done.
    pub counters: FaultCounters,
}

impl Injector {
    /// An injector for `faults`.
    pub fn new(faults: Faults) -> Self {
        Self {
            faults,
            state: faults.seed ^ 0x9e37_79b9_7f4a_7c15,
            held: None,
            delayed: VecDeque::new(),
            counters: FaultCounters::default(),
        }
    }

    /// splitmix64: small, seeded, good enough to decide coin flips.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// Takes a packet bound for `dest` and returns the packets to send now, in order.
    pub fn apply(
        &mut self,
        now: std::time::Instant,
        dest: To,
        packet: &[u8],
        out: &mut Vec<(To, Vec<u8>)>,
    ) {
        self.release(now, out);
        if self.chance(self.faults.loss) {
            self.counters.lost += 1;
            return;
        }
        let mut p = packet.to_vec();
        if !p.is_empty() && self.chance(self.faults.corrupt) {
            let bit = (self.next() % (p.len() as u64 * 8)) as usize;
            p[bit / 8] ^= 1 << (bit % 8);
            self.counters.corrupted += 1;
        }
        let copies = if self.chance(self.faults.dup) { 2 } else { 1 };
        self.counters.duplicated += copies - 1;
        for _ in 0..copies {
            if self.held.is_none() && self.chance(self.faults.reorder) {
                self.counters.reordered += 1;
                self.held = Some((dest, p.clone()));
                continue;
            }
            self.emit(now, dest, p.clone(), out);
            if let Some((d, h)) = self.held.take() {
                self.emit(now, d, h, out);
            }
        }
    }

    fn emit(
        &mut self,
        now: std::time::Instant,
        dest: To,
        p: Vec<u8>,
        out: &mut Vec<(To, Vec<u8>)>,
    ) {
        if self.faults.delay.is_zero() {
            out.push((dest, p));
        } else {
            self.delayed.push_back((now + self.faults.delay, dest, p));
        }
    }

    /// Moves delayed packets that are due (and a held one, if nothing followed it) to `out`.
    pub fn release(&mut self, now: std::time::Instant, out: &mut Vec<(To, Vec<u8>)>) {
        while self.delayed.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, d, p) = self.delayed.pop_front().expect("checked");
            out.push((d, p));
        }
    }

    /// When the next delayed packet is due.
    pub fn next_due(&self) -> Option<std::time::Instant> {
        self.delayed.front().map(|(t, _, _)| *t)
    }

    /// Lets a held (reordered) packet go when no other packet came to overtake it.
    pub fn flush_held(&mut self, now: std::time::Instant, out: &mut Vec<(To, Vec<u8>)>) {
        if let Some((d, h)) = self.held.take() {
            self.emit(now, d, h, out);
        }
    }
}

/// A backend whose sends pass through an [`Injector`] first; everything else is the inner
/// backend's.
#[derive(Debug)]
pub struct Injected<B> {
    inner: B,
    injector: Option<Injector>,
    out: Vec<(To, Vec<u8>)>,
    /// Something was sent since the last flush (a held packet waits for one more).
    sent: bool,
}

impl<B: Backend> Injected<B> {
    /// Applies `faults` to everything sent through `inner`.
    pub fn new(inner: B, faults: Faults) -> Self {
        let mut b = Self::passthrough(inner);
        b.set_faults(faults);
        b
    }

    /// `inner` with no faults until [`Injected::set_faults`].
    pub(crate) fn passthrough(inner: B) -> Self {
        Self {
            inner,
            injector: None,
            out: Vec::new(),
            sent: false,
        }
    }

    /// Applies `faults` from now on, with fresh counters.
    pub(crate) fn set_faults(&mut self, faults: Faults) {
        self.injector = Some(Injector::new(faults));
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn send_out(&mut self) -> io::Result<()> {
        for ((dest, src_port), p) in self.out.drain(..) {
            self.inner.send(dest, src_port, &p)?;
        }
        Ok(())
    }
}

impl<B: Backend> Backend for Injected<B> {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }

    fn local(&self) -> IpAddr {
        self.inner.local()
    }

    fn fixed_source_port(&self) -> Option<u16> {
        self.inner.fixed_source_port()
    }

    fn answer_alone(&self) -> bool {
        self.inner.answer_alone()
    }

    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
        self.inner.recv(f)
    }

    fn send(&mut self, dest: IpAddr, src_port: u16, payload: &[u8]) -> io::Result<()> {
        let Some(inj) = &mut self.injector else {
            return self.inner.send(dest, src_port, payload);
        };
        self.sent = true;
        inj.apply(
            std::time::Instant::now(),
            (dest, src_port),
            payload,
            &mut self.out,
        );
        self.send_out()
    }

    /// In place only when no fault is injected: faults work on copies.
    fn room(&mut self) -> Option<&mut [u8]> {
        match self.injector {
            None => self.inner.room(),
            Some(_) => None,
        }
    }

    fn commit(&mut self, dest: IpAddr, src_port: u16, len: usize) -> io::Result<()> {
        self.inner.commit(dest, src_port, len)
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Some(inj) = &mut self.injector {
            let now = std::time::Instant::now();
            if !std::mem::take(&mut self.sent) {
                inj.flush_held(now, &mut self.out);
            }
            inj.release(now, &mut self.out);
            self.send_out()?;
        }
        self.inner.flush()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd()
    }

    fn next_due(&self) -> Option<std::time::Instant> {
        let mine = self.injector.as_ref().and_then(Injector::next_due);
        match (mine, self.inner.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> BackendCounters {
        self.inner.counters()
    }

    /// What this injector has done (or, when it injects nothing, the inner backend's).
    fn fault_counters(&self) -> Option<FaultCounters> {
        match &self.injector {
            Some(i) => Some(i.counters),
            None => self.inner.fault_counters(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let f: Faults = "loss=0.1,dup=0.05,reorder=0.02,corrupt=0.01,delay=2ms,seed=7"
            .parse()
            .unwrap();
        assert_eq!(
            f,
            Faults {
                loss: 0.1,
                dup: 0.05,
                reorder: 0.02,
                corrupt: 0.01,
                delay: Duration::from_millis(2),
                seed: 7
            }
        );
        assert!("loss=2".parse::<Faults>().is_err());
        assert!("lose=0.1".parse::<Faults>().is_err());
        assert!("delay=3h".parse::<Faults>().is_err());
    }

    #[test]
    fn rates_come_out_near_what_was_asked() {
        let mut inj = Injector::new("loss=0.1,dup=0.05,seed=3".parse().unwrap());
        let now = std::time::Instant::now();
        let mut out = Vec::new();
        for _ in 0..100_000 {
            inj.apply(
                now,
                (IpAddr::from([127, 0, 0, 1]), 4791),
                &[1, 2, 3],
                &mut out,
            );
        }
        let c = inj.counters;
        assert!((9_000..11_000).contains(&c.lost), "{c:?}");
        assert!((4_000..5_000).contains(&c.duplicated), "{c:?}");
        assert_eq!(out.len() as u64, 100_000 - c.lost + c.duplicated);
    }

    #[test]
    fn the_same_seed_does_the_same() {
        let run = || {
            let mut inj = Injector::new("loss=0.3,reorder=0.2,corrupt=0.1,seed=9".parse().unwrap());
            let mut out = Vec::new();
            let now = std::time::Instant::now();
            for i in 0..1000u32 {
                inj.apply(
                    now,
                    (IpAddr::from([127, 0, 0, 1]), 4791),
                    &i.to_be_bytes(),
                    &mut out,
                );
            }
            out
        };
        assert_eq!(run(), run());
    }
}
