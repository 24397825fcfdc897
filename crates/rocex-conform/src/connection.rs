//! Finding the RC connections of a capture.
//!
//! A connection is a requester address, a responder address and the responder's QPN: the
//! request direction is the one carrying request opcodes to that QPN. Its responses come
//! back from the responder address to the requester's QPN. An RC request does not carry the
//! requester's QPN, so a response is tied to its connection by the UDP source port, which
//! rxe derives from both QPNs and so uses in both directions.
//!
//! Everything else in the capture (non-RoCE frames, UD and UC traffic, CM MADs on QP1,
//! CNPs, frames that do not parse or were truncated by the capture) is skipped and counted.

use core::net::IpAddr;

use rocex_dump::capture::Captured;
use rocex_wire::frame::{Frame, IpRepr};
use rocex_wire::opcode::Service;
use rocex_wire::{Error, ErrorKind, Layer, OpcodeInfo, PacketRepr, Psn};

/// One captured RC packet of a connection.
#[derive(Debug, Clone)]
pub struct Pkt {
    /// Frame number in the capture, from 1.
    pub frame: u64,
    /// Capture time, seconds since the epoch.
    pub ts: f64,
    /// UDP source port.
    pub sport: u16,
    /// The UDP payload: BTH through ICRC.
    pub udp: Vec<u8>,
    /// Whether the ICRC is valid (in the spec's form or rxe's FLUSH form).
    pub icrc_valid: bool,
    /// Destination QPN.
    pub dest_qpn: u32,
    /// PSN.
    pub psn: Psn,
    /// The opcode's table entry.
    pub info: &'static OpcodeInfo,
}

impl Pkt {
    /// The parsed packet. It parsed when the capture was split, so this only fails if the
    /// bytes were changed since.
    pub fn packet(&self) -> Option<PacketRepr<'_>> {
        PacketRepr::parse(&self.udp).ok().map(|(p, _)| p)
    }
}

/// One RC connection: its requests and the responses to them, each in captured order.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The requester's address.
    pub requester: IpAddr,
    /// The responder's address.
    pub responder: IpAddr,
    /// The responder's QPN (the requests' destination QPN).
    pub resp_qpn: u32,
    /// The requester's QPN, from the first response seen (none if no response was seen).
    pub req_qpn: Option<u32>,
    /// UDP source port of the requests.
    pub sport: u16,
    /// Request packets.
    pub requests: Vec<Pkt>,
    /// Response packets.
    pub responses: Vec<Pkt>,
}

impl Connection {
    /// How reports name the connection.
    pub fn label(&self) -> String {
        format!(
            "{}->{} qp={:#x}",
            self.requester, self.responder, self.resp_qpn
        )
    }
}

/// Frames that are not part of an RC connection, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Not UDP to a RoCE port.
    pub non_roce: u64,
    /// To a RoCE port but not a whole, parseable packet (including truncated captures).
    pub malformed: u64,
    /// UD packets to QP1: connection management MADs.
    pub cm: u64,
    /// Other UD packets.
    pub ud: u64,
    /// UC packets.
    pub uc: u64,
    /// CNPs.
    pub cnp: u64,
    /// RC responses with no captured request on their connection.
    pub orphan_responses: u64,
}

impl Skipped {
    /// Total frames skipped.
    pub fn total(&self) -> u64 {
        self.non_roce
            + self.malformed
            + self.cm
            + self.ud
            + self.uc
            + self.cnp
            + self.orphan_responses
    }
}

/// The connections of a capture and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// RC connections in order of their first request.
    pub connections: Vec<Connection>,
    /// Frames skipped.
    pub skipped: Skipped,
}

/// Where a frame came from and went.
struct Addressed {
    src: IpAddr,
    dst: IpAddr,
    pkt: Pkt,
}

fn ip_addrs(ip: &IpRepr) -> (IpAddr, IpAddr) {
    match ip {
        IpRepr::V4(h) => (h.source.into(), h.destination.into()),
        IpRepr::V6(h) => (h.source.into(), h.destination.into()),
    }
}

/// Parses one frame; `Err(true)` when it is RoCE but unusable, `Err(false)` when not RoCE.
fn parse(index: u64, c: &Captured, is_roce_port: &impl Fn(u16) -> bool) -> Result<Addressed, bool> {
    let frame = match Frame::parse_with(&c.data, is_roce_port) {
        Ok(f) => f,
        Err(e) => return Err(!not_roce(&e)),
    };
    if (c.data.len() as u64) < u64::from(c.orig_len) {
        return Err(true);
    }
    let info = frame.repr.packet.info().map_err(|_| true)?;
    let (src, dst) = ip_addrs(&frame.repr.ip);
    let bytes = frame.bytes();
    let start = frame.repr.link.header_len() + frame.repr.ip.header_len() + 8;
    let end = start + frame.repr.udp.length as usize - 8;
    let udp = bytes.get(start..end).ok_or(true)?.to_vec();
    let pkt = Pkt {
        frame: index,
        ts: c.ts,
        sport: frame.repr.udp.source_port,
        icrc_valid: frame.check_icrc().is_valid(),
        dest_qpn: frame.repr.packet.bth.dest_qp,
        psn: frame.repr.packet.bth.psn,
        info,
        udp,
    };
    Ok(Addressed { src, dst, pkt })
}

/// Whether a parse error says the frame is not RoCE at all, rather than a RoCE frame that
/// is damaged or cut short.
fn not_roce(e: &Error) -> bool {
    match e.kind {
        ErrorKind::NotRoce(_) | ErrorKind::Link(_) => true,
        ErrorKind::Truncated { .. } => matches!(e.layer, Layer::Ethernet | Layer::Vlan),
        _ => false,
    }
}

/// Splits a capture into RC connections.
pub fn split(frames: &[Captured], is_roce_port: impl Fn(u16) -> bool) -> Split {
    let mut out = Split::default();
    let mut responses = Vec::new();
    for (i, c) in frames.iter().enumerate() {
        let a = match parse(i as u64 + 1, c, &is_roce_port) {
            Ok(a) => a,
            Err(true) => {
                out.skipped.malformed += 1;
                continue;
            }
            Err(false) => {
                out.skipped.non_roce += 1;
                continue;
            }
        };
        match a.pkt.info.service {
            Service::Ud if a.pkt.dest_qpn == 1 => out.skipped.cm += 1,
            Service::Ud => out.skipped.ud += 1,
            Service::Uc => out.skipped.uc += 1,
            Service::Cnp => out.skipped.cnp += 1,
            Service::Rc if a.pkt.info.operation.is_response() => responses.push(a),
            Service::Rc => {
                let conns = &mut out.connections;
                let at = conns.iter().position(|k| {
                    k.requester == a.src && k.responder == a.dst && k.resp_qpn == a.pkt.dest_qpn
                });
                let k = match at {
                    Some(k) => k,
                    None => {
                        conns.push(Connection {
                            requester: a.src,
                            responder: a.dst,
                            resp_qpn: a.pkt.dest_qpn,
                            req_qpn: None,
                            sport: a.pkt.sport,
                            requests: Vec::new(),
                            responses: Vec::new(),
                        });
                        conns.len() - 1
                    }
                };
                conns[k].requests.push(a.pkt);
            }
        }
    }
    for a in responses {
        match owner(&out.connections, &a) {
            Some(k) => {
                let conn = &mut out.connections[k];
                conn.req_qpn.get_or_insert(a.pkt.dest_qpn);
                conn.responses.push(a.pkt);
            }
            None => out.skipped.orphan_responses += 1,
        }
    }
    out
}

/// The connection a response belongs to: same address pair reversed; among several, the
/// one whose requests use the response's UDP source port and whose requester QPN (once
/// known) is the response's destination.
fn owner(conns: &[Connection], a: &Addressed) -> Option<usize> {
    let candidates: Vec<usize> = (0..conns.len())
        .filter(|&k| conns[k].responder == a.src && conns[k].requester == a.dst)
        .collect();
    let pick = |f: &dyn Fn(&Connection) -> bool| candidates.iter().copied().find(|&k| f(&conns[k]));
    pick(&|c| c.sport == a.pkt.sport && c.req_qpn.is_none_or(|q| q == a.pkt.dest_qpn))
        .or_else(|| pick(&|c| c.req_qpn == Some(a.pkt.dest_qpn)))
        .or_else(|| (candidates.len() == 1).then(|| candidates[0]))
}
