//! The daemon's own capture (`--pcap`): every datagram sent and received, rebuilt as the
//! Ethernet + IPv4 + UDP frame a wire capture would show, so Wireshark and
//! `rocex dump --check` read it. The UDP socket never sees real Ethernet or IP headers:
//! the MACs are fixed placeholders and the IP header is the one the kernel sends (ID 0,
//! DF, TTL 64), which is what the ICRC was computed over, with the packet's TOS: the one a
//! sent packet leaves with, the one the backend reported for a received one.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use rocex_wire::{FrameRepr, PacketRepr};

/// Placeholder MAC of the local side (locally administered).
const LOCAL_MAC: [u8; 6] = [0x02, 0x72, 0x6f, 0x63, 0x65, 0x01];
/// Placeholder MAC of the peer.
const PEER_MAC: [u8; 6] = [0x02, 0x72, 0x6f, 0x63, 0x65, 0x02];

/// The capture file, shared between the pcap writer and [`Tap::flush`] (the writer does
/// not give its inner writer back except by value).
#[derive(Clone)]
struct Sink(Rc<RefCell<BufWriter<File>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().flush()
    }
}

/// A pcap file being written.
pub(crate) struct Tap {
    w: PcapWriter<Sink>,
    sink: Sink,
    buf: Vec<u8>,
    /// Datagrams that could not be rebuilt as frames (not RoCE, or IPv6).
    pub(crate) skipped: u64,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap")
            .field("skipped", &self.skipped)
            .finish()
    }
}

impl Tap {
    /// Creates (truncates) `path`.
    pub(crate) fn create(path: &Path) -> io::Result<Self> {
        let sink = Sink(Rc::new(RefCell::new(BufWriter::new(File::create(path)?))));
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ..PcapHeader::default()
        };
        let w = PcapWriter::with_header(sink.clone(), header).map_err(io::Error::other)?;
        Ok(Self {
            w,
            sink,
            buf: vec![0; 70_000],
            skipped: 0,
        })
    }

    /// Records one datagram `payload` (BTH through ICRC) from `src` to `dst` with IP TOS
    /// `tos`.
    pub(crate) fn record(
        &mut self,
        src: (IpAddr, u16),
        dst: IpAddr,
        outgoing: bool,
        tos: u8,
        payload: &[u8],
    ) {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (src.0, dst) else {
            self.skipped += 1;
            return;
        };
        let Ok((packet, _icrc)) = PacketRepr::parse(payload) else {
            self.skipped += 1;
            return;
        };
        let macs = if outgoing {
            (LOCAL_MAC, PEER_MAC)
        } else {
            (PEER_MAC, LOCAL_MAC)
        };
        let Ok(mut frame) = FrameRepr::ipv4(macs, (s.octets(), d.octets()), src.1, packet) else {
            self.skipped += 1;
            return;
        };
        frame.set_tos(tos);
        let Ok(n) = frame.emit(&mut self.buf) else {
            self.skipped += 1;
            return;
        };
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let p = PcapPacket::new(ts, n as u32, &self.buf[..n]);
        if self.w.write_packet(&p).is_err() {
            self.skipped += 1;
        }
    }

    /// Flushes buffered frames to the file.
    pub(crate) fn flush(&mut self) {
        let _ = self.sink.flush();
    }
}
