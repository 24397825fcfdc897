//! RoCE v2 over a UDP socket driven by io_uring.
//!
//! The socket is set up as the UDP backend's (`IP_PMTUDISC_DO`: DF and IPv4 identification
//! 0, the header the engine's ICRC assumes; 8 MiB buffers; bound to port 4791, which every
//! datagram leaves from), without GSO or GRO. [`RX_DEPTH`] receive operations stay in
//! flight, each into its own buffer, and are re-armed as they complete; [`Backend::send`]
//! copies a payload into a free send buffer and queues its `sendmsg`, and
//! [`Backend::flush`] submits everything queued with one `io_uring_enter`. The descriptor
//! polled is an eventfd registered with the ring: readable when completions arrive.
//!
//! A re-armed receive waits in the submission queue for the next flush, so that it costs
//! no system call of its own; but only a submitted receive can complete and wake the
//! eventfd. [`Backend::recv`] therefore submits at once when fewer than half of the
//! receives are with the kernel: a port that receives and has nothing to send (a
//! requester taking in ACKs or READ responses, or stale packets of a destroyed QP) would
//! otherwise end a batch with none in the kernel, and sleep on an eventfd that cannot fire
//! while datagrams pile up in the socket until a timer makes it send.
//!
//! As with the UDP backend, the received IP header is hidden: every ICRC is checked by
//! solving for the IPv4 identification it checks under (`udp::ids`).

mod msg;
mod sys;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use io_uring::{IoUring, opcode, squeue, types};
use rocex_wire::ROCE_V2_PORT;

use crate::udp::ids::IdDeltas;
use crate::{Backend, BackendCounters, BackendKind, BackendOptions, RxMeta};
use msg::MsgSlot;

/// Receive operations kept in flight.
const RX_DEPTH: usize = 64;
/// A receive buffer holds the largest UDP datagram.
const RX_SLOT: usize = 1 << 16;
/// Send buffers, and the bytes each holds (a 4096-byte MTU packet with every header).
const TX_SLOTS: usize = 256;
const TX_SLOT: usize = 1 << 13;
/// Submission queue entries: every operation in flight fits (the completion queue is
/// twice as large, so it cannot overflow).
const RING_ENTRIES: u32 = 512;
/// `user_data` of a send: this bit and the slot; of a receive: the slot.
const TX_TAG: u64 = 1 << 32;
const CANCEL_TAG: u64 = u64::MAX;

/// A UDP socket on `local:4791` and the io_uring that drives it.
pub struct UringPort {
    /// First, so that it is dropped (after [`Drop`] cancelled everything in flight)
    /// before the buffers the kernel was pointed at.
    ring: IoUring,
    sock: UdpSocket,
    event: OwnedFd,
    local: IpAddr,
    opts: BackendOptions,
    rx: Box<[MsgSlot]>,
    /// Receive completions reaped but not yet handed over: slot and result.
    rx_done: VecDeque<(usize, i32)>,
    /// Receives pushed and not yet completed, whether submitted or not.
    rx_armed: usize,
    /// Checks received ICRCs, GSO segments' too.
    ids: IdDeltas,
    tx: Box<[MsgSlot]>,
    tx_free: Vec<usize>,
    /// Entries pushed since the last submit, and how many of them are sends (the others
    /// are receives, until [`Drop`] pushes its cancel).
    unsubmitted: usize,
    unsubmitted_sends: usize,
    counters: BackendCounters,
}

// SAFETY: the raw pointers inside the message slots point only into this port's own slots,
// which live in boxed slices that never move or grow; moving the port to another thread
// moves them all together.
unsafe impl Send for UringPort {}

impl std::fmt::Debug for UringPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringPort")
            .field("local", &self.local)
            .field("rx_armed", &self.rx_armed)
            .field("tx_free", &self.tx_free.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl UringPort {
    /// Binds `local:4791` and sets up the ring.
    pub fn open(local: IpAddr, opts: BackendOptions) -> io::Result<Self> {
        // Blocking: io_uring waits for readiness itself, whereas on a non-blocking socket it
        // completes a receive with EAGAIN at once and a send into a full buffer with EAGAIN.
        let sock: UdpSocket = crate::udp::roce_socket(local, opts)?.into();
        let ring = IoUring::new(RING_ENTRIES).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("io_uring_setup for the uring backend: {e}"),
            )
        })?;
        let event = sys::eventfd()?;
        ring.submitter().register_eventfd(event.as_raw_fd())?;
        let mut port = Self {
            ring,
            sock,
            event,
            local,
            opts,
            rx: (0..RX_DEPTH).map(|_| MsgSlot::new(RX_SLOT)).collect(),
            rx_done: VecDeque::new(),
            rx_armed: 0,
            ids: IdDeltas::default(),
            tx: (0..TX_SLOTS).map(|_| MsgSlot::new(TX_SLOT)).collect(),
            tx_free: (0..TX_SLOTS).rev().collect(),
            unsubmitted: 0,
            unsubmitted_sends: 0,
            counters: BackendCounters::default(),
        };
        for slot in 0..RX_DEPTH {
            port.arm_recv(slot)?;
        }
        port.submit()?;
        Ok(port)
    }

    /// Pushes `entry`, submitting what is queued first if the submission queue is full.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry points into a slot of this port that stays put
            // and untouched until its completion is reaped (or [`Drop`] has waited for it).
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                self.unsubmitted += 1;
                return Ok(());
            }
            self.submit()?;
        }
    }

    fn arm_recv(&mut self, slot: usize) -> io::Result<()> {
        let fd = types::Fd(self.sock.as_raw_fd());
        let entry = opcode::RecvMsg::new(fd, self.rx[slot].for_recv())
            .build()
            .user_data(slot as u64);
        self.push(&entry)?;
        self.rx_armed += 1;
        Ok(())
    }

    /// Armed receives the kernel has seen: those not still in the submission queue.
    fn rx_submitted(&self) -> usize {
        self.rx_armed - (self.unsubmitted - self.unsubmitted_sends)
    }

    /// Hands everything queued to the kernel. A busy kernel (EBUSY: completions pending)
    /// keeps the entries for the next submit.
    fn submit(&mut self) -> io::Result<()> {
        if self.unsubmitted == 0 {
            return Ok(());
        }
        match self.ring.submit() {
            Ok(_) => {
                if self.unsubmitted_sends > 0 {
                    self.counters.tx_batches += 1;
                }
                self.unsubmitted = 0;
                self.unsubmitted_sends = 0;
                Ok(())
            }
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    || e.kind() == io::ErrorKind::WouldBlock =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Takes every completion off the ring: sends free their slots and are counted;
    /// receives wait in `rx_done` for [`Backend::recv`].
    fn reap(&mut self) {
        for cqe in self.ring.completion() {
            let (data, res) = (cqe.user_data(), cqe.result());
            if data == CANCEL_TAG {
                continue;
            }
            if data & TX_TAG != 0 {
                if res >= 0 {
                    self.counters.tx_packets += 1;
                } else {
                    self.counters.tx_dropped += 1;
                }
                self.tx_free.push((data & !TX_TAG) as usize);
            } else {
                self.rx_armed -= 1;
                self.rx_done.push_back((data as usize, res));
            }
        }
    }
}

impl Backend for UringPort {
    fn kind(&self) -> BackendKind {
        BackendKind::Uring
    }

    fn local(&self) -> IpAddr {
        self.local
    }

    fn fixed_source_port(&self) -> Option<u16> {
        Some(ROCE_V2_PORT)
    }

    fn recv(&mut self, f: &mut dyn FnMut(RxMeta, &[u8])) -> io::Result<usize> {
        // Drain the eventfd before reaping, so a completion that lands in between wakes
        // the next poll.
        sys::drain(&self.event)?;
        self.reap();
        let mut handed = 0;
        let batch = self.rx_done.len();
        for _ in 0..batch {
            let Some((slot, res)) = self.rx_done.pop_front() else {
                break;
            };
            match usize::try_from(res) {
                Ok(len) if len > 0 => {
                    let (src, payload) = self.rx[slot].received(len);
                    match src {
                        Some(src) => {
                            let strict = self.opts.peers_are_rocex;
                            let icrc = self.ids.status(
                                src,
                                self.local,
                                payload,
                                strict,
                                &mut self.counters,
                            );
                            handed += 1;
                            f(
                                RxMeta {
                                    src,
                                    dst: self.local,
                                    icrc,
                                    tos: 0,
                                },
                                payload,
                            );
                        }
                        None => self.counters.rx_ignored += 1,
                    }
                }
                // An empty datagram, or a failed receive (counted, then re-armed).
                _ => self.counters.rx_ignored += 1,
            }
            self.arm_recv(slot)?;
        }
        if batch > 0 {
            self.counters.rx_batches += 1;
            self.counters.rx_packets += handed as u64;
        }
        // Re-armed receives go with the next flush, unless too few are with the kernel.
        if self.rx_submitted() < RX_DEPTH / 2 {
            self.submit()?;
        }
        Ok(handed)
    }

    fn send(&mut self, dest: IpAddr, _src_port: u16, tclass: u8, payload: &[u8]) -> io::Result<()> {
        if self.tx_free.is_empty() {
            self.submit()?;
            self.reap();
        }
        let Some(slot) = self.tx_free.pop() else {
            // Every send buffer is in flight: dropped as a full queue drops it.
            self.counters.tx_dropped += 1;
            return Ok(());
        };
        // A control message only where the TOS is not the socket's.
        let tos = Some(self.opts.tos(tclass)).filter(|&t| t != self.opts.tos(0));
        let to = SocketAddr::new(dest, ROCE_V2_PORT);
        let Some(msg) = self.tx[slot].for_send(to, tos, payload) else {
            self.tx_free.push(slot);
            self.counters.tx_dropped += 1;
            return Ok(());
        };
        let entry = opcode::SendMsg::new(types::Fd(self.sock.as_raw_fd()), msg)
            .build()
            .user_data(TX_TAG | slot as u64);
        self.push(&entry)?;
        self.unsubmitted_sends += 1;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.submit()
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }

    fn counters(&self) -> BackendCounters {
        self.counters
    }

    fn kernel_dropped(&self) -> u64 {
        crate::udp::kernel_drops(&self.sock)
    }
}

impl Drop for UringPort {
    /// Cancels every operation in flight and waits for their completions, so that the
    /// kernel holds no pointer into the buffers when they are freed.
    fn drop(&mut self) {
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_TAG);
        if self.push(&cancel).is_err() {
            return;
        }
        let in_flight = |p: &Self| p.rx_armed + (TX_SLOTS - p.tx_free.len());
        // Each round waits for at least one completion; a bound keeps a kernel that never
        // completes from hanging the drop.
        for _ in 0..4 * (RX_DEPTH + TX_SLOTS) {
            if in_flight(self) == 0 {
                return;
            }
            if self.ring.submit_and_wait(1).is_err() {
                return;
            }
            self.unsubmitted = 0;
            self.unsubmitted_sends = 0;
            self.reap();
        }
    }
}
