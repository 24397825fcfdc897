/*! A simulated fabric for rocex engines: virtual time, and per-link loss, duplication,
reordering, corruption and delay drawn from a seeded generator, so every run replays
exactly. The faults are the [`faults`] model, the one `--inject` applies to real engines.

The fabric carries what [`Engine::poll_transmit`] produces, as a UDP socket would, and
checks each delivered packet's ICRC the way a rocex receiver of rocex traffic can
([`Engine::check_icrc_from_rocex`]); a corrupted packet is therefore dropped and counted
by the receiving engine, never delivered.
*/
#![forbid(unsafe_code)]

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};

use rocex_proto::{Ecn, Engine, Instant};

mod bottleneck;

use bottleneck::Port;
pub use bottleneck::{Bottleneck, BottleneckStats};
pub use rocex_faults as faults;
use rocex_faults::Dice;
pub use rocex_faults::{FaultCounters, Injector, Link};

/// Bytes below the UDP payload on the wire (Ethernet, IPv4, UDP), which a bottleneck
/// carries too.
const HEADERS: usize = 14 + 20 + 8;

/// What the fabric did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Packets engines sent.
    pub sent: u64,
    /// Packets lost.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Packets held back.
    pub reordered: u64,
    /// Packets with a flipped bit.
    pub corrupted: u64,
    /// Packets delivered.
    pub delivered: u64,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Delivery {
    at: Instant,
    seq: u64,
    to: usize,
    src: SocketAddr,
    dst: IpAddr,
    /// The ECN bits the packet arrives with.
    ecn: u8,
    bytes: Vec<u8>,
}

/// A function that sees each packet sent (source node, destination node, bytes) and
/// returns false to drop it.
pub type Interceptor = Box<dyn FnMut(usize, usize, &mut Vec<u8>) -> bool>;

/// Engines joined by simulated links.
pub struct Fabric {
    nodes: Vec<Engine>,
    now: Instant,
    dice: Dice,
    queue: BinaryHeap<Reverse<Delivery>>,
    seq: u64,
    links: HashMap<(usize, usize), Link>,
    default_link: Link,
    interceptor: Option<Interceptor>,
    /// Output queues in front of nodes.
    ports: HashMap<usize, Port>,
    /// Counts of what the links did.
    pub stats: Stats,
    buf: Vec<u8>,
}

impl Fabric {
    /// An empty fabric whose impairments draw from `seed`; links default to `link`.
    pub fn new(seed: u64, link: Link) -> Self {
        Self {
            nodes: Vec::new(),
            now: Instant::ZERO,
            dice: Dice::new(seed),
            queue: BinaryHeap::new(),
            seq: 0,
            links: HashMap::new(),
            default_link: link,
            interceptor: None,
            ports: HashMap::new(),
            stats: Stats::default(),
            buf: vec![0; 9000],
        }
    }

    /// Adds an engine; returns its index.
    pub fn add(&mut self, engine: Engine) -> usize {
        self.nodes.push(engine);
        self.nodes.len() - 1
    }

    /// Sets the link from node `from` to node `to`.
    pub fn set_link(&mut self, from: usize, to: usize, link: Link) {
        self.links.insert((from, to), link);
    }

    /// Puts a rate-limited, ECN-marking queue in front of node `to`: every packet to it
    /// waits its turn there, after the link's faults and before the link's delay.
    pub fn set_bottleneck(&mut self, to: usize, b: Bottleneck) {
        self.ports.insert(to, Port::new(b));
    }

    /// What the bottleneck in front of node `to` did.
    pub fn bottleneck_stats(&self, to: usize) -> Option<BottleneckStats> {
        self.ports.get(&to).map(|p| BottleneckStats {
            marked: p.marked,
            dropped: p.dropped,
            max_queue: p.max_queue,
            queued: p.queued(self.now),
        })
    }

    /// Installs a function that sees every packet as it is sent (source and destination
    /// node, bytes) and returns false to drop it.
    pub fn intercept(&mut self, f: impl FnMut(usize, usize, &mut Vec<u8>) -> bool + 'static) {
        self.interceptor = Some(Box::new(f));
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A node's engine.
    pub fn node(&mut self, i: usize) -> &mut Engine {
        &mut self.nodes[i]
    }

    /// Moves every packet the engines have to send onto the links.
    fn pump(&mut self) {
        for from in 0..self.nodes.len() {
            loop {
                let mut buf = std::mem::take(&mut self.buf);
                let sent = self.nodes[from].poll_transmit(self.now, &mut buf);
                let bytes = sent.map(|t| (t, buf[..t.len].to_vec()));
                self.buf = buf;
                let Some((t, mut bytes)) = bytes else { break };
                self.stats.sent += 1;
                let Some(to) = self.nodes.iter().position(|n| n.config().local == t.dest) else {
                    self.stats.lost += 1;
                    continue;
                };
                if let Some(f) = &mut self.interceptor {
                    if !f(from, to, &mut bytes) {
                        self.stats.lost += 1;
                        continue;
                    }
                }
                let link = self
                    .links
                    .get(&(from, to))
                    .copied()
                    .unwrap_or(self.default_link);
                let Some(carried) = link.carry(&mut self.dice, &mut bytes) else {
                    self.stats.lost += 1;
                    continue;
                };
                self.stats.corrupted += u64::from(carried.corrupted);
                self.stats.duplicated += carried.copies().len() as u64 - 1;
                for copy in carried.copies() {
                    let (left, ecn) = match self.ports.get_mut(&to) {
                        Some(port) => {
                            let sent = Ecn::from_tos(t.tclass);
                            let Some(out) = port.enqueue(self.now, bytes.len() + HEADERS, sent)
                            else {
                                self.stats.lost += 1;
                                continue;
                            };
                            out
                        }
                        None => (self.now, Ecn::from_tos(t.tclass)),
                    };
                    self.stats.reordered += u64::from(copy.held_back);
                    let src = SocketAddr::new(self.nodes[from].config().local, t.src_port);
                    self.seq += 1;
                    let d = Delivery {
                        at: left + copy.after,
                        seq: self.seq,
                        to,
                        src,
                        dst: t.dest,
                        ecn: ecn.bits(),
                        bytes: bytes.clone(),
                    };
                    self.queue.push(Reverse(d));
                }
            }
        }
    }

    /// Runs until the next event (a delivery or a timer), handles everything due then, and
    /// sends what follows. Returns false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.pump();
        let next_delivery = self.queue.peek().map(|Reverse(d)| d.at);
        let next_timer = self.nodes.iter().filter_map(Engine::poll_timeout).min();
        let Some(at) = [next_delivery, next_timer].into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(at);
        while self.queue.peek().is_some_and(|Reverse(d)| d.at <= self.now) {
            let Reverse(d) = self.queue.pop().expect("peeked");
            self.stats.delivered += 1;
            let status = Engine::check_icrc_from_rocex(d.src, d.dst, &d.bytes);
            self.nodes[d.to].handle_packet_ecn(
                self.now,
                d.src,
                d.dst,
                &d.bytes,
                status,
                Ecn::from_tos(d.ecn),
            );
        }
        for n in &mut self.nodes {
            if n.poll_timeout().is_some_and(|t| t <= self.now) {
                n.handle_timeout(self.now);
            }
        }
        self.pump();
        true
    }

    /// Steps until `done` holds (true), nothing is left to do, or virtual time passes
    /// `limit` (false).
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > limit || !self.step() {
                return done(self);
            }
        }
    }
}
