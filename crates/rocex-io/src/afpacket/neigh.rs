//! Destination MAC addresses: the kernel's ARP table, else an ARP request (IPv4) or a
//! neighbour solicitation (IPv6, RFC 4861 §7.2) sent on a packet socket and answered
//! within a short wait; what was found is cached per port.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use etherparse::{
    ArpEthIpv4Packet, ArpOperation, ArpPacket, Icmpv6Header, Icmpv6Type, IpNumber, Ipv6FlowLabel,
    Ipv6Header,
};

// The keys are the port's own destinations: a fast hash will do.
use foldhash::{HashMap, HashMapExt};

use super::link::Link;
use super::sys;
use crate::poll::wait_readable;

/// How long a resolved address is trusted before it is looked up again.
const KNOWN_FOR: Duration = Duration::from_secs(60);
/// How long a destination that did not answer is not asked again (its packets are
/// dropped meanwhile; the transport retransmits).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Requests sent, and how long each waits for its answer.
const TRIES: u32 = 3;
const WAIT_MS: i32 = 50;

#[derive(Debug, Clone, Copy)]
enum Entry {
    Known([u8; 6], Duration),
    Unreachable(Duration),
}

/// The coarse monotonic clock (the kernel's last tick, read without the TSC): ages of
/// seconds need no better, and every packet sent asks.
fn coarse_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; CLOCK_MONOTONIC_COARSE always exists on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The neighbour cache of one port.
#[derive(Debug)]
pub(super) struct Neighbours {
    link: Link,
    local: IpAddr,
    cache: HashMap<IpAddr, Entry>,
    /// The last address found, and when: a port mostly sends to one peer.
    last: Option<(IpAddr, [u8; 6], Duration)>,
}

impl Neighbours {
    pub(super) fn new(link: Link, local: IpAddr) -> Self {
        Self {
            link,
            local,
            cache: HashMap::new(),
            last: None,
        }
    }

    /// The MAC address of `ip` on the link, if it has one.
    pub(super) fn lookup(&mut self, ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
        if self.link.noarp {
            return Ok(Some([0; 6]));
        }
        let now = coarse_now();
        let known = |at: Duration| now.saturating_sub(at) < KNOWN_FOR;
        if let Some((last, mac, at)) = self.last
            && last == ip
            && known(at)
        {
            return Ok(Some(mac));
        }
        match self.cache.get(&ip) {
            Some(Entry::Known(mac, at)) if known(*at) => {
                self.last = Some((ip, *mac, *at));
                return Ok(Some(*mac));
            }
            Some(Entry::Unreachable(at)) if now.saturating_sub(*at) < RETRY_AFTER => {
                return Ok(None);
            }
            _ => {}
        }
        let found = match (self.local, ip) {
            (IpAddr::V4(local), IpAddr::V4(ip)) => match self.kernel_arp(ip) {
                Some(mac) => Some(mac),
                None => self.arp(local, ip)?,
            },
            (IpAddr::V6(local), IpAddr::V6(ip)) => self.solicit(local, ip)?,
            _ => None,
        };
        let entry = found.map_or(Entry::Unreachable(now), |m| Entry::Known(m, now));
        self.cache.insert(ip, entry);
        Ok(found)
    }

    /// A complete entry of the kernel's ARP table for `ip` on this link. The thread's own
    /// view (`thread-self`): a thread may live in another network namespace than the
    /// process.
    fn kernel_arp(&self, ip: Ipv4Addr) -> Option<[u8; 6]> {
        const ATF_COM: u32 = 0x2;
        let table = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
        table.lines().skip(1).find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [addr, _, flags, mac, _, dev] = f[..] else {
                return None;
            };
            let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).ok()?;
            (addr.parse() == Ok(ip) && dev == self.link.name && flags & ATF_COM != 0)
                .then(|| parse_mac(mac))
                .flatten()
        })
    }

    /// Asks the link who has `ip` (RFC 826) and waits for the answer.
    fn arp(&self, local: Ipv4Addr, ip: Ipv4Addr) -> io::Result<Option<[u8; 6]>> {
        let request = ArpEthIpv4Packet {
            operation: ArpOperation::REQUEST,
            sender_mac: self.link.mac,
            sender_ipv4: local.octets(),
            target_mac: [0; 6],
            target_ipv4: ip.octets(),
        }
        .to_bytes();
        self.ask(sys::ETH_P_ARP, [0xff; 6], &request, |b| {
            let a = ArpPacket::from_slice(b).ok()?.try_eth_ipv4().ok()?;
            (a.sender_ipv4 == ip.octets()).then_some(a.sender_mac)
        })
    }

    /// Sends a neighbour solicitation for `ip` to its solicited-node multicast address
    /// and waits for the advertisement.
    fn solicit(&self, local: Ipv6Addr, ip: Ipv6Addr) -> io::Result<Option<[u8; 6]>> {
        let t = ip.octets();
        let group = Ipv6Addr::new(
            0xff02,
            0,
            0,
            0,
            0,
            1,
            0xff00 | u16::from(t[13]),
            u16::from_be_bytes([t[14], t[15]]),
        );
        let group_mac = [0x33, 0x33, 0xff, t[13], t[14], t[15]];
        // Target address, then the source link-layer address option (type 1, 8 bytes).
        let mut body = [0u8; 24];
        body[..16].copy_from_slice(&t);
        body[16] = 1;
        body[17] = 1;
        body[18..].copy_from_slice(&self.link.mac);
        let icmp = Icmpv6Header::with_checksum(
            Icmpv6Type::NeighborSolicitation,
            local.octets(),
            group.octets(),
            &body,
        )
        .map_err(|e| io::Error::other(format!("neighbour solicitation for {ip}: {e}")))?;
        let icmp = icmp.to_bytes();
        let ip_header = Ipv6Header {
            traffic_class: 0,
            flow_label: Ipv6FlowLabel::ZERO,
            payload_length: (icmp.len() + body.len()) as u16,
            next_header: IpNumber::IPV6_ICMP,
            hop_limit: 255,
            source: local.octets(),
            destination: group.octets(),
        };
        let mut packet = Vec::with_capacity(Ipv6Header::LEN + icmp.len() + body.len());
        packet.extend_from_slice(&ip_header.to_bytes());
        packet.extend_from_slice(&icmp);
        packet.extend_from_slice(&body);
        self.ask(sys::ETH_P_IPV6, group_mac, &packet, |b| advertised(b, &t))
    }

    /// Sends `request` in frames of `protocol` to `mac` up to [`TRIES`] times, until
    /// `answer` finds the address in a received frame.
    fn ask(
        &self,
        protocol: u16,
        mac: [u8; 6],
        request: &[u8],
        answer: impl Fn(&[u8]) -> Option<[u8; 6]>,
    ) -> io::Result<Option<[u8; 6]>> {
        let s = sys::packet_socket(libc::SOCK_DGRAM)?;
        sys::bind(&s, self.link.ifindex, protocol)?;
        let mut buf = [0u8; 1500];
        for _ in 0..TRIES {
            sys::send_to(&s, self.link.ifindex, protocol, mac, request)?;
            let end = Instant::now() + Duration::from_millis(WAIT_MS as u64);
            loop {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() || !wait_readable(s.as_fd(), left)? {
                    break;
                }
                while let Some(n) = sys::try_recv(&s, &mut buf)? {
                    if let Some(found) = answer(&buf[..n]) {
                        return Ok(Some(found));
                    }
                }
            }
        }
        Ok(None)
    }
}

/// The target link-layer address of a neighbour advertisement (IPv6 packet) for `target`.
fn advertised(packet: &[u8], target: &[u8; 16]) -> Option<[u8; 6]> {
    const NEIGHBOR_ADVERTISEMENT: u8 = 136;
    const TARGET_LINK_ADDR: u8 = 2;
    let (h, rest) = Ipv6Header::from_slice(packet).ok()?;
    if h.next_header != IpNumber::IPV6_ICMP
        || rest.first() != Some(&NEIGHBOR_ADVERTISEMENT)
        || rest.get(8..24)? != target
    {
        return None;
    }
    let mut opts = rest.get(24..)?;
    while let [kind, len, ..] = *opts {
        let len = usize::from(len) * 8;
        if len == 0 {
            return None;
        }
        if kind == TARGET_LINK_ADDR && len >= 8 {
            return opts.get(2..8)?.try_into().ok();
        }
        opts = opts.get(len..)?;
    }
    None
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    (parts.next().is_none() && mac != [0; 6]).then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_macs_as_the_kernel_prints_them() {
        assert_eq!(
            parse_mac("02:00:c6:12:ca:01"),
            Some([2, 0, 0xc6, 0x12, 0xca, 1])
        );
        assert_eq!(parse_mac("00:00:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:c6:12:ca"), None);
    }
}
