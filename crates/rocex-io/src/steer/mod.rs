//! Kernel steering of received RoCE packets to the process that owns their destination QP
//! (`docs/architecture.md`, "The direct data path").
//!
//! A [`SteerGroup`] is the `SO_REUSEPORT` group of UDP sockets bound to one `addr:4791`,
//! one per QPN slot (an engine with `Config::qpn_slot` gives every QP it makes the slot's
//! low bits). The kernel runs the group's classic BPF program on each datagram and hands
//! it to the socket at the index the program returns (`reuseport_select_sock`): the
//! socket of the datagram's slot when that slot is granted, else slot 0's, the daemon's,
//! which also takes QP1 (the CM). A group's index is a socket's place in join order, and a
//! socket that leaves hands its index to the last one (`reuseport_detach_sock`), so the
//! group makes its sockets in slot order and keeps a descriptor of each for its whole
//! life: a socket's index is its slot.
//!
//! A granted socket goes out locked (`SO_LOCK_FILTER`): its holder can neither attach a
//! program of its own to the group nor change its socket's own filter, which keeps its
//! slot's QPNs only. The kernel lets any member remove the group's program
//! (`SO_DETACH_REUSEPORT_BPF` does not look at the lock); datagrams are then spread by
//! hash, and the filter keeps the holder from reading any other slot's. A slot given back
//! is granted again only when no other process still holds its socket (`/proc/<pid>/fd`):
//! a process that kept it would read the next holder's packets (its filter keeps that
//! slot's), so until then the slot is skipped and its QPNs stay the daemon's.
//!
//! A group's sockets take UDP GRO only where each handed-out socket's filter checks every
//! datagram of a coalesced run (`segments`) and the address's link does not join datagrams
//! before the program steers them ([`SteerGroup::no_coalescing`]).

mod program;
mod segments;

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, UdpSocket};

use socket2::SockRef;

use crate::udp::unbound_roce_socket;
use crate::udp::{bind_roce_port, bound_elsewhere, configure, held_elsewhere, socket_inode};
use crate::{BackendOptions, UdpPort};

/// Most slot bits a group takes: 32 slots, whose program stays a short list of compares.
/// A sender joins packets into one GSO send only for QPNs that agree in these bits
/// (`udp::batch`), and an engine alone on its address fixes them (`QpnSlot::ALONE`), so
/// every bit more would cost each QPN a random bit.
pub const MAX_SLOT_BITS: u8 = 5;

/// A slot handed to a client: its number and a descriptor of its socket, locked.
#[derive(Debug)]
pub struct Granted {
    /// The QPN slot: every QPN whose low bits are this reaches `socket`.
    pub slot: u32,
    /// The slot's socket, bound to the group's `addr:4791`.
    pub socket: UdpSocket,
}

/// The sockets of one `SO_REUSEPORT` group on `addr:4791` and the program that steers
/// among them.
#[derive(Debug)]
pub struct SteerGroup {
    local: IpAddr,
    bits: u8,
    opts: BackendOptions,
    /// The group's sockets in join order, which is slot order.
    members: Vec<UdpSocket>,
    /// Slots granted now.
    granted: Vec<bool>,
    /// Slots whose socket has been handed out.
    handed: Vec<bool>,
    /// Datagrams found in sockets when their slot was granted or given back.
    drained: u64,
    /// Why the sockets take no UDP GRO, when they do not.
    no_coalescing: Option<String>,
}

impl SteerGroup {
    /// Makes the group of `2^bits` sockets on `local:4791`, slot order = join order,
    /// each made as [`UdpPort::open`] makes its socket with `opts`, UDP GRO only where
    /// [`no_coalescing`] allows it. The address must be free: another group of this user
    /// would otherwise join this one.
    pub fn open(local: IpAddr, bits: u8, opts: BackendOptions) -> io::Result<Self> {
        if !(1..=MAX_SLOT_BITS).contains(&bits) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{bits} slot bits: a group takes 1..={MAX_SLOT_BITS}"),
            ));
        }
        bound_elsewhere(local, &[])?;
        let slots = 1 << bits;
        let no_coalescing = no_coalescing(local, bits, opts);
        let mut g = Self {
            local,
            bits,
            opts: BackendOptions {
                no_gro: no_coalescing.is_some(),
                ..opts
            },
            members: Vec::with_capacity(slots),
            granted: vec![false; slots],
            handed: vec![false; slots],
            drained: 0,
            no_coalescing,
        };
        for slot in 0..slots as u32 {
            g.join(slot)?;
        }
        g.attach()?;
        let ours = g
            .members
            .iter()
            .map(socket_inode)
            .collect::<io::Result<Vec<_>>>()?;
        bound_elsewhere(local, &ours)?;
        Ok(g)
    }

    /// The group's address.
    pub fn local(&self) -> IpAddr {
        self.local
    }

    /// Low QPN bits that name a slot.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// The options every socket of the group was made with, for the ports built on them.
    pub fn options(&self) -> BackendOptions {
        self.opts
    }

    /// Slots granted now.
    pub fn in_use(&self) -> u32 {
        self.granted.iter().filter(|&&g| g).count() as u32
    }

    /// The slot a QP number names: its low [`bits`](Self::bits), as the program reads them.
    pub fn slot_of(&self, qpn: u32) -> u32 {
        qpn & ((1 << self.bits) - 1)
    }

    /// Whether `slot` is granted now.
    pub fn is_granted(&self, slot: u32) -> bool {
        self.granted.get(slot as usize).copied().unwrap_or(false)
    }

    /// Datagrams found waiting in a socket when its slot was granted or given back.
    pub fn drained(&self) -> u64 {
        self.drained
    }

    /// Why the group's sockets take datagrams one by one (no UDP GRO), or `None` when they
    /// take coalesced runs.
    pub fn no_coalescing(&self) -> Option<&str> {
        self.no_coalescing.as_deref()
    }

    /// A port on slot 0's socket, the group's owner's.
    pub fn port(&self) -> io::Result<UdpPort> {
        UdpPort::from_socket(self.members[0].try_clone()?, self.local, self.opts)
    }

    /// Grants the lowest free slot whose socket no other process holds: routes its QPNs
    /// to its socket and hands out a locked descriptor of it. `None` when there is none.
    pub fn grant(&mut self) -> io::Result<Option<Granted>> {
        let free = (1..self.members.len()).filter(|&s| !self.granted[s]);
        let given_back = free
            .clone()
            .filter(|&s| self.handed[s])
            .map(|s| socket_inode(&self.members[s]))
            .collect::<io::Result<Vec<_>>>()?;
        let held = held_elsewhere(&given_back);
        for slot in free {
            let sock = &self.members[slot];
            if self.handed[slot] && held.contains(&socket_inode(sock)?) {
                continue;
            }
            self.drained += drain(sock);
            set_flag(sock, libc::SO_LOCK_FILTER)?;
            let socket = sock.try_clone()?;
            self.granted[slot] = true;
            if let Err(e) = self.attach() {
                self.granted[slot] = false;
                return Err(e);
            }
            self.handed[slot] = true;
            return Ok(Some(Granted {
                slot: slot as u32,
                socket,
            }));
        }
        Ok(None)
    }

    /// Gives `slot` back: its QPNs go to slot 0 again and its socket is drained; returns
    /// the datagrams drained.
    pub fn free(&mut self, slot: u32) -> io::Result<u64> {
        if !self.is_granted(slot) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("slot {slot} is not granted"),
            ));
        }
        self.granted[slot as usize] = false;
        self.attach()?;
        let n = drain(&self.members[slot as usize]);
        self.drained += n;
        Ok(n)
    }

    /// Attaches the program for the slots granted now, through slot 0's socket (never
    /// locked); also what puts the program back after a member removed it.
    pub fn attach(&self) -> io::Result<()> {
        let granted: Vec<u32> = (0..self.members.len() as u32)
            .filter(|&s| self.granted[s as usize])
            .collect();
        let prog = program::steering(self.bits, &granted);
        set_program(&self.members[0], libc::SO_ATTACH_REUSEPORT_CBPF, prog)
    }

    /// The socket of `slot` joins the group, at that index.
    fn join(&mut self, slot: u32) -> io::Result<()> {
        let s = unbound_roce_socket(self.local, self.opts)?;
        s.set_reuse_port(true)?;
        bind_roce_port(&s, self.local)?;
        let sock: UdpSocket = s.into();
        configure(&sock, self.local.is_ipv4(), self.opts)?;
        if slot != 0 && self.no_coalescing.is_some() {
            let filter = program::slot_filter(self.bits, slot);
            set_program(&sock, libc::SO_ATTACH_FILTER, filter)?;
        } else if slot != 0 {
            let filter = segments::load(&segments::program(self.bits, slot))?;
            segments::attach(&sock, &filter)?;
        }
        self.members.push(sock);
        Ok(())
    }
}

/// Why a group on `local` must take datagrams one by one, if it must: UDP GRO off in
/// `opts`; no eBPF filter to check each datagram of a run (loading one takes `CAP_BPF`);
/// or a link that joins datagrams itself. A NIC's GRO (or a veth pair's, when on) joins
/// consecutive same-size datagrams of one flow before the program steers the run by its
/// first: a rocex peer sends every QP's packets from port 4791, so a run may hold several
/// slots' packets, which the filter would then drop whole, a loss for each of them.
fn no_coalescing(local: IpAddr, bits: u8, opts: BackendOptions) -> Option<String> {
    if opts.no_gro {
        return Some("UDP GRO is off".into());
    }
    if let Err(e) = segments::load(&segments::program(bits, 1)) {
        return Some(format!("no segment filter ({e})"));
    }
    match crate::link::link_gro(local) {
        Ok(Some(false)) => None,
        Ok(Some(true)) => Some(format!("the link of {local} joins datagrams (GRO on)")),
        Ok(None) => Some(format!("no interface holds {local}")),
        Err(e) => Some(format!("the GRO flag of {local}'s link: {e}")),
    }
}

/// Sets a program option (`SO_ATTACH_FILTER`, `SO_ATTACH_REUSEPORT_CBPF`) of `sock`.
fn set_program(
    sock: &UdpSocket,
    name: libc::c_int,
    mut prog: Vec<libc::sock_filter>,
) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as libc::c_ushort,
        filter: prog.as_mut_ptr(),
    };
    crate::sockopt::set(sock, libc::SOL_SOCKET, name, &fprog)
}

fn set_flag(sock: &UdpSocket, name: libc::c_int) -> io::Result<()> {
    crate::sockopt::set(sock, libc::SOL_SOCKET, name, &(1 as libc::c_int))
}

/// Reads and drops what waits in `sock`, at most a full receive buffer of the smallest
/// datagrams; returns how many. `MSG_DONTWAIT`: a holder may have made the shared file
/// blocking.
fn drain(sock: &UdpSocket) -> u64 {
    const MOST: u64 = 1 << 16;
    let mut buf = [MaybeUninit::<u8>::uninit(); 64];
    let s = SockRef::from(sock);
    let flags = libc::MSG_DONTWAIT | libc::MSG_TRUNC;
    (0..MOST)
        .take_while(|_| s.recv_with_flags(&mut buf, flags).is_ok())
        .count() as u64
}
