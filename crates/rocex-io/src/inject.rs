//! Fault injection on the way out, so that applications can test themselves against a bad
//! network with nothing but a flag (`loss=0.05,dup=0.01,seed=7`): rocex-faults' model
//! ([`Link`], the one the simulated fabric uses), applied by its [`Injector`] to every
//! packet sent. `docs/faults.md` describes the model and the syntax.
//!
//! [`Injected`] wraps any [`Backend`]. Neither it nor the model reads a clock: the caller
//! tells it the engine's time ([`Backend::tick`], as `rocex_io::Driver` and rocexd do each
//! turn), a packet is sent at the time last told, and a held packet's due time
//! ([`Backend::next_due`]) is on the engine's clock too. A corrupted packet keeps its wrong
//! ICRC through the backend (a GSO segment's ICRC fix is an XOR), so the receiver's ICRC
//! check drops it wherever the receiver can check.

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::str::FromStr;
use std::time::Duration;

use rocex_faults::{FaultCounters, Injector, Link};
use rocex_proto::Instant;

use crate::{Backend, BackendCounters, BackendKind, RxMeta};

/// Where and how a packet goes: the destination address, the UDP source port and the
/// traffic class.
pub type To = (IpAddr, u16, u8);

/// What to do to outgoing packets (`--inject`): the fault model and its seed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Loss, duplication, reordering, corruption, delay and jitter.
    pub link: Link,
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

    /// `loss=P,dup=P,reorder=P,reorder_by=DURATION,corrupt=P,delay=DURATION,
    /// jitter=DURATION,seed=N` in any order, any subset; durations as `500us`, `2ms` or `1s`.
    fn from_str(s: &str) -> Result<Self, FaultsError> {
        let mut f = Self::default();
        let l = &mut f.link;
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
                "loss" => l.loss = prob()?,
                "dup" => l.duplicate = prob()?,
                "reorder" => l.reorder = prob()?,
                "reorder_by" => l.reorder_by = duration(v)?,
                "corrupt" => l.corrupt = prob()?,
                "delay" => l.delay = duration(v)?,
                "jitter" => l.jitter = duration(v)?,
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

/// A backend whose sends pass through an [`Injector`] first; everything else is the inner
/// backend's.
#[derive(Debug)]
pub struct Injected<B> {
    inner: B,
    injector: Option<Injector<To>>,
    /// The engine's time, as the caller last told it.
    now: Instant,
    out: Vec<(To, Vec<u8>)>,
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
            now: Instant::ZERO,
            out: Vec::new(),
        }
    }

    /// Applies `faults` from now on, with fresh counters.
    pub(crate) fn set_faults(&mut self, faults: Faults) {
        self.injector = Some(Injector::new(faults.link, faults.seed));
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }

    fn send_out(&mut self) -> io::Result<()> {
        for ((dest, src_port, tclass), p) in self.out.drain(..) {
            self.inner.send(dest, src_port, tclass, &p)?;
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

    fn send(&mut self, dest: IpAddr, src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()> {
        let Some(inj) = &mut self.injector else {
            return self.inner.send(dest, src_port, tclass, payload);
        };
        inj.apply(self.now, (dest, src_port, tclass), payload, &mut self.out);
        self.send_out()
    }

    /// In place only when no fault is injected: faults work on copies.
    fn room(&mut self) -> Option<&mut [u8]> {
        match self.injector {
            None => self.inner.room(),
            Some(_) => None,
        }
    }

    fn commit(&mut self, dest: IpAddr, src_port: u16, tclass: u8, len: usize) -> io::Result<()> {
        self.inner.commit(dest, src_port, tclass, len)
    }

    /// Sends what is queued, and the held packets due by the time last told.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(inj) = &mut self.injector {
            inj.release(self.now, &mut self.out);
            self.send_out()?;
        }
        self.inner.flush()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.inner.fd()
    }

    /// Time passes for the injector and for whatever the inner backend holds.
    fn tick(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.inner.tick(now);
    }

    fn next_due(&self) -> Option<Instant> {
        let mine = self.injector.as_ref().and_then(Injector::next_due);
        match (mine, self.inner.next_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> BackendCounters {
        self.inner.counters()
    }

    fn kernel_dropped(&self) -> u64 {
        self.inner.kernel_dropped()
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

    /// A backend that keeps what it is asked to send.
    #[derive(Debug)]
    struct Recorder {
        sent: Vec<(To, Vec<u8>)>,
        fd: std::fs::File,
    }

    impl Recorder {
        fn new() -> Self {
            let fd = std::fs::File::open("/dev/null").expect("/dev/null");
            Self {
                sent: Vec::new(),
                fd,
            }
        }
    }

    impl Backend for Recorder {
        fn kind(&self) -> BackendKind {
            BackendKind::Udp
        }
        fn local(&self) -> IpAddr {
            IpAddr::from([198, 18, 0, 1])
        }
        fn fixed_source_port(&self) -> Option<u16> {
            None
        }
        fn recv(&mut self, _: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
            Ok(0)
        }
        fn send(&mut self, dest: IpAddr, port: u16, tclass: u8, p: &[u8]) -> io::Result<()> {
            self.sent.push(((dest, port, tclass), p.to_vec()));
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn fd(&self) -> BorrowedFd<'_> {
            use std::os::fd::AsFd;
            self.fd.as_fd()
        }
        fn counters(&self) -> BackendCounters {
            BackendCounters::default()
        }
    }

    /// `--inject` is the model and nothing else: on the times its caller tells it, the
    /// backend sends exactly what rocex-faults' injector (the fabric's model) lets through,
    /// in the same order, and waits for the same due times.
    #[test]
    fn injects_what_the_model_decides_on_the_callers_time() {
        let faults: Faults = "loss=0.1,dup=0.05,reorder=0.1,reorder_by=300us,corrupt=0.05,\
                              delay=50us,jitter=20us,seed=5"
            .parse()
            .unwrap();
        let mut model = Injector::new(faults.link, faults.seed);
        let mut want = Vec::new();
        let mut b = Injected::new(Recorder::new(), faults);
        let to = |i: u32| (IpAddr::from([198, 18, 0, 2]), 49152 + (i % 7) as u16, 0);
        for i in 0..2000u32 {
            let now = Instant::from_micros(u64::from(i) * 10);
            let packet = i.to_be_bytes().repeat(16);
            b.tick(now);
            b.send(to(i).0, to(i).1, to(i).2, &packet).unwrap();
            b.flush().unwrap();
            model.apply(now, to(i), &packet, &mut want);
            assert_eq!(b.next_due(), model.next_due(), "packet {i}");
        }
        let end = Instant::from_millis(30);
        b.tick(end);
        b.flush().unwrap();
        model.release(end, &mut want);
        assert_eq!(b.next_due(), None);
        assert_eq!(b.inner().sent, want);
        assert_eq!(b.fault_counters(), Some(model.counters));
        let c = model.counters;
        assert!(c.lost > 0 && c.duplicated > 0 && c.reordered > 0 && c.corrupted > 0);
    }

    /// Without being told the time, nothing held is ever due: the injector reads no clock.
    #[test]
    fn held_packets_wait_for_the_callers_time() {
        let faults: Faults = "delay=2ms".parse().unwrap();
        let mut b = Injected::new(Recorder::new(), faults);
        b.tick(Instant::from_millis(10));
        b.send(IpAddr::from([198, 18, 0, 2]), 49152, 0, &[1])
            .unwrap();
        b.flush().unwrap();
        assert!(b.inner().sent.is_empty());
        assert_eq!(b.next_due(), Some(Instant::from_millis(12)));
        std::thread::sleep(Duration::from_millis(3));
        b.flush().unwrap();
        assert!(
            b.inner().sent.is_empty(),
            "the wall clock moved, the engine's did not"
        );
        b.tick(Instant::from_millis(12));
        b.flush().unwrap();
        assert_eq!(b.inner().sent.len(), 1);
    }

    #[test]
    fn parses_every_key() {
        let f: Faults = "loss=0.1,dup=0.05,reorder=0.02,corrupt=0.01,delay=2ms,seed=7"
            .parse()
            .unwrap();
        assert_eq!(
            f,
            Faults {
                link: Link {
                    loss: 0.1,
                    duplicate: 0.05,
                    reorder: 0.02,
                    corrupt: 0.01,
                    delay: Duration::from_millis(2),
                    ..Link::default()
                },
                seed: 7
            }
        );
        let f: Faults = "reorder=0.1,reorder_by=3ms,jitter=500us".parse().unwrap();
        assert_eq!(
            (f.link.reorder_by, f.link.jitter),
            (Duration::from_millis(3), Duration::from_micros(500))
        );
        assert!("loss=2".parse::<Faults>().is_err());
        assert!("lose=0.1".parse::<Faults>().is_err());
        assert!("delay=3h".parse::<Faults>().is_err());
    }
}
