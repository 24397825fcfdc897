//! The process's rdma_cm state behind one mutex: the rocex devices (each opened once, as
//! rdma-core's librdmacm does, so that every id of a device shares its `ibv_context` and
//! default protection domain), which id owns each daemon connection and listening port,
//! and the local ports ids hold.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::{Mutex, MutexGuard};

use crate::abi::*;
use crate::id::Id;
use crate::verbs::{Verbs, verbs};

/// A rocex device: its context, address and (once asked for) default PD.
pub struct Dev {
    /// The device's context, open for the process's life.
    pub ctx: *mut ibv_context,
    /// The address rocexd serves it on.
    pub addr: IpAddr,
    /// The PD ids of this device get as `pd` (allocated at first use).
    pub pd: *mut ibv_pd,
    /// The port's active MTU (`enum ibv_mtu`).
    pub mtu: u8,
}

/// Everything the entry points and the poller share.
#[derive(Default)]
pub struct Registry {
    devs: Option<Vec<Dev>>,
    /// Daemon connection `(device, id)` to the rdma_cm id it belongs to.
    pub conns: HashMap<(usize, u32), *mut Id>,
    /// Listening `(device, port space, port)` to its id (the port space rocexd's CM
    /// serves: TCP or UDP, [`Id::daemon_ps`]).
    pub listeners: HashMap<(usize, u16, u16), *mut Id>,
    /// `(device, port space, port)` the daemon listens on for this process, until the last
    /// id listening there is destroyed ([`crate::id::destroy_id`]).
    pub listening: HashSet<(usize, u16, u16)>,
    /// Local ports held by ids, with how each id holds it.
    ports: HashMap<u16, Vec<PortUse>>,
    next_port: u16,
    /// The process whose poller thread runs (a forked child has none).
    pub poller: Option<u32>,
}

// SAFETY: the raw pointers are objects of this library and of libibverbs that every thread
// may use; the registry is only reached under its mutex.
unsafe impl Send for Registry {}

static REG: Mutex<Option<Registry>> = Mutex::new(None);

/// The registry, locked (a panic elsewhere does not poison it for C callers).
pub fn lock() -> Guard {
    let mut g = REG.lock().unwrap_or_else(|p| p.into_inner());
    g.get_or_insert_with(Registry::default);
    Guard(g)
}

/// The locked registry.
pub struct Guard(MutexGuard<'static, Option<Registry>>);

impl core::ops::Deref for Guard {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        self.0.as_ref().expect("made by lock")
    }
}

impl core::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Registry {
        self.0.as_mut().expect("made by lock")
    }
}

/// How an id holds a local port: what decides whether two ids may hold one port, and
/// which devices a wildcard listen takes, as the kernel's rdma_cm decides them
/// (`cma_check_port`, and the address family check of `cma_match_private_data`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortUse {
    /// Bound with `RDMA_OPTION_ID_REUSEADDR`.
    pub reuse: bool,
    /// Bound to an IPv6 address.
    pub v6: bool,
    /// Takes its own address family only (`RDMA_OPTION_ID_AFONLY`; unless set, IPv4 ids
    /// always and IPv6 ids per `net.ipv6.bindv6only`, as `rdma_bind_addr` decides).
    pub afonly: bool,
}

impl PortUse {
    /// Whether two ids may hold one port: both with `REUSEADDR`, or both family-only and
    /// of different families (tgtd listens on `[::]` with AFONLY and on `0.0.0.0`, both
    /// on 3260).
    pub fn shares_with(self, other: Self) -> bool {
        (self.reuse && other.reuse) || (self.afonly && other.afonly && self.v6 != other.v6)
    }

    /// Whether a wildcard listen held so takes requests to an address like `ip`: its own
    /// family, and IPv4 too for an IPv6 id that is not family-only.
    pub fn takes(self, ip: IpAddr) -> bool {
        ip.is_ipv6() == self.v6 || (self.v6 && !self.afonly)
    }
}

/// The first of the ephemeral ports this library hands out (Linux's default range).
const EPHEMERAL: (u16, u16) = (32768, 60999);

impl Registry {
    /// The devices, opened at the first call.
    pub fn devs(&mut self, v: &Verbs) -> &[Dev] {
        self.devs.get_or_insert_with(|| open_all(v))
    }

    /// Device `i` (opened before).
    pub fn dev(&self, i: usize) -> &Dev {
        &self.devs.as_ref().expect("devices are open")[i]
    }

    /// The device serving `ip`.
    pub fn dev_at(&mut self, v: &Verbs, ip: IpAddr) -> Option<usize> {
        self.devs(v).iter().position(|d| d.addr == ip)
    }

    /// The device's default PD, allocated at first use.
    pub fn pd(&mut self, v: &Verbs, i: usize) -> *mut ibv_pd {
        let d = &mut self.devs.as_mut().expect("devices are open")[i];
        if d.pd.is_null() {
            // SAFETY: an open context of the bound libibverbs.
            d.pd = unsafe { (v.ibv_alloc_pd)(d.ctx) };
        }
        d.pd
    }

    /// The device that reaches `dst`: the one whose address the kernel's route to `dst`
    /// leaves from, or `dst`'s own device; with a single device (daemons on loopback
    /// addresses, whose route leaves from 127.0.0.1), that one. An errno when none.
    pub fn route(&mut self, v: &Verbs, dst: IpAddr) -> Result<usize, i32> {
        if let Some(i) = self.dev_at(v, dst) {
            return Ok(i);
        }
        let src = route_source(dst).map_err(|e| e.raw_os_error().unwrap_or(libc::ENETUNREACH))?;
        if let Some(i) = self.dev_at(v, src) {
            return Ok(i);
        }
        match self.devs(v).len() {
            1 if src.is_loopback() => Ok(0),
            _ => Err(libc::ENODEV),
        }
    }

    /// Holds local port `want`, or a free ephemeral one when `want` is 0; `EADDRINUSE`
    /// when an id holds it that may not share it ([`PortUse::shares_with`]).
    pub fn take_port(&mut self, want: u16, u: PortUse) -> Result<u16, i32> {
        if want != 0 {
            let held = self.ports.entry(want).or_default();
            if held.iter().any(|h| !h.shares_with(u)) {
                return Err(libc::EADDRINUSE);
            }
            held.push(u);
            return Ok(want);
        }
        let span = EPHEMERAL.1 - EPHEMERAL.0 + 1;
        if self.next_port == 0 {
            self.next_port = EPHEMERAL.0 + (std::process::id() % u32::from(span)) as u16;
        }
        for _ in 0..span {
            let p = self.next_port;
            self.next_port = if p == EPHEMERAL.1 { EPHEMERAL.0 } else { p + 1 };
            let held = self.ports.entry(p).or_default();
            if held.is_empty() {
                held.push(u);
                return Ok(p);
            }
        }
        Err(libc::EADDRINUSE)
    }

    /// An id holding `port` as `was` holds it as `now` (an option set after binding, which
    /// the kernel applies without checking the port again).
    pub fn retag_port(&mut self, port: u16, was: PortUse, now: PortUse) {
        if let Some(h) = self
            .ports
            .get_mut(&port)
            .and_then(|v| v.iter_mut().find(|h| **h == was))
        {
            *h = now;
        }
    }

    /// Lets go of a port [`take_port`](Self::take_port) gave to an id holding it as `u`.
    pub fn free_port(&mut self, port: u16, u: PortUse) {
        if let Some(held) = self.ports.get_mut(&port) {
            if let Some(i) = held.iter().position(|h| *h == u) {
                held.swap_remove(i);
            }
            if held.is_empty() {
                self.ports.remove(&port);
            }
        }
    }

    /// The devices that have connections or listeners, for the poller.
    pub fn busy_devs(&self) -> Vec<(usize, usize)> {
        let mut v: Vec<usize> = self
            .conns
            .keys()
            .map(|k| k.0)
            .chain(self.listening.iter().map(|k| k.0))
            .collect();
        v.sort_unstable();
        v.dedup();
        v.into_iter()
            .map(|i| (i, self.dev(i).ctx as usize))
            .collect()
    }
}

/// The source address the kernel's routing table picks for `dst`.
fn route_source(dst: IpAddr) -> std::io::Result<IpAddr> {
    let s = UdpSocket::bind(SocketAddr::new(crate::sockaddr::any_like(dst), 0))?;
    s.connect(SocketAddr::new(dst, 4791))?;
    Ok(s.local_addr()?.ip())
}

/// Opens every rocex device and asks each for its address.
fn open_all(v: &Verbs) -> Vec<Dev> {
    let mut n = 0;
    // SAFETY: the bound libibverbs; `n` is writable.
    let list = unsafe { (v.ibv_get_device_list)(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut devs = Vec::new();
    for i in 0..n.max(0) as usize {
        // A direct context when rocexd grants a slot: its QPs are this process's, moved
        // with what rocexd's CM settles. SAFETY: the list holds `n` devices.
        let ctx = unsafe { (v.ibv_open_device)(*list.add(i)) };
        if ctx.is_null() {
            continue;
        }
        let mut raw = [0u8; 16];
        // SAFETY: an open context; `raw` is 16 writable bytes.
        let family = unsafe { (v.rocex_context_addr)(ctx, &mut raw) };
        let addr = if family == libc::AF_INET {
            IpAddr::from([raw[0], raw[1], raw[2], raw[3]])
        } else {
            IpAddr::from(raw)
        };
        let mut pa = ibv_port_attr::default();
        // SAFETY: an open context; `pa` has room for the whole port attribute struct.
        let mtu = if unsafe { (v.ibv_query_port)(ctx, 1, &mut pa) } == 0 {
            pa.active_mtu as u8
        } else {
            0
        };
        devs.push(Dev {
            ctx,
            addr,
            pd: core::ptr::null_mut(),
            mtu,
        });
    }
    // SAFETY: the list from ibv_get_device_list; the contexts stay open.
    unsafe { (v.ibv_free_device_list)(list) };
    devs
}

/// The bound libibverbs and the locked registry, or `None` with errno `ENOSYS`.
pub fn enter() -> Option<(&'static Verbs, Guard)> {
    Some((verbs()?, lock()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V4: PortUse = PortUse {
        reuse: false,
        v6: false,
        afonly: true,
    };
    const V6: PortUse = PortUse {
        reuse: false,
        v6: true,
        afonly: false,
    };

    #[test]
    fn ports_are_held_once_unless_both_reuse() {
        let mut r = Registry::default();
        let reuse = PortUse { reuse: true, ..V4 };
        assert_eq!(r.take_port(7471, V4), Ok(7471));
        assert_eq!(r.take_port(7471, V4), Err(libc::EADDRINUSE));
        assert_eq!(r.take_port(7471, reuse), Err(libc::EADDRINUSE));
        r.free_port(7471, V4);
        assert_eq!(r.take_port(7471, reuse), Ok(7471));
        assert_eq!(r.take_port(7471, reuse), Ok(7471));
        assert_eq!(r.take_port(7471, V4), Err(libc::EADDRINUSE));
        r.free_port(7471, reuse);
        assert_eq!(
            r.take_port(7471, V4),
            Err(libc::EADDRINUSE),
            "one reuser is left"
        );
        r.free_port(7471, reuse);
        assert_eq!(r.take_port(7471, V4), Ok(7471));
    }

    #[test]
    fn family_only_ids_of_two_families_share_a_port() {
        let mut r = Registry::default();
        let v6_only = PortUse { afonly: true, ..V6 };
        assert_eq!(r.take_port(3260, v6_only), Ok(3260));
        assert_eq!(r.take_port(3260, V4), Ok(3260));
        assert_eq!(r.take_port(3260, v6_only), Err(libc::EADDRINUSE));
        r.free_port(3260, v6_only);
        assert_eq!(
            r.take_port(3260, V6),
            Err(libc::EADDRINUSE),
            "[::] takes IPv4 too"
        );
        r.retag_port(3260, V4, PortUse { reuse: true, ..V4 });
        assert_eq!(r.take_port(3260, PortUse { reuse: true, ..V6 }), Ok(3260));
    }

    #[test]
    fn a_wildcard_listen_takes_its_family() {
        let (v4, v6): (IpAddr, IpAddr) = ([198, 18, 0, 1].into(), "2001:db8::1".parse().unwrap());
        assert!(V4.takes(v4) && !V4.takes(v6));
        assert!(V6.takes(v4) && V6.takes(v6));
        let v6_only = PortUse { afonly: true, ..V6 };
        assert!(!v6_only.takes(v4) && v6_only.takes(v6));
    }

    #[test]
    fn ephemeral_ports_are_distinct_and_in_range() {
        let mut r = Registry::default();
        let a = r.take_port(0, V4).unwrap();
        let b = r.take_port(0, V4).unwrap();
        assert_ne!(a, b);
        for p in [a, b] {
            assert!((EPHEMERAL.0..=EPHEMERAL.1).contains(&p), "{p}");
        }
    }
}
