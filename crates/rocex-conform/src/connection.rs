//! Finding the RC connections of a capture.
//!
//! A connection is a requester address, a responder address and the responder's QPN: the
//! request direction is the one carrying request opcodes to that QPN. Its responses come
//! back from the responder address to the requester's QPN. An RC request does not carry the
//! requester's QPN, so a response is tied to its connection by the UDP source port, which
//! rxe derives from both QPNs and so uses in both directions, and by the requester's QPN
//! once known: from the capture's CM REQ and REP when it holds them ([`crate::cm_pairs`]),
//! else from the first response.
//!
//! Everything else in the capture (non-RoCE frames, UD and UC traffic, CM MADs on QP1,
//! CNPs, frames that do not parse or were truncated by the capture) is skipped and counted.
//! A RoCE frame whose ICRC fails is dropped, as rxe drops it (`rxe_rcv` checks the ICRC
//! before anything else), and listed with the frames that do not parse as [`Damage`]: the
//! capture cannot say what such a frame was, so the replay cannot vouch for what follows.

use core::net::IpAddr;

use rocex_dump::capture::Captured;
use rocex_wire::frame::{Frame, IcrcCheck, IpRepr};
use rocex_wire::opcode::Service;
use rocex_wire::{Error, ErrorKind, Layer, OpcodeInfo, PacketRepr, Psn};

use crate::cm_pairs::CmPairs;

/// One captured RC packet of a connection.
#[derive(Debug, Clone)]
pub struct Pkt {
    /// Frame number in the capture, from 1.
    pub frame: u64,
    /// Capture time, seconds since the epoch.
    pub ts: f64,
    /// UDP source port.
    pub sport: u16,
    /// The UDP payload: BTH through ICRC (whose ICRC is valid, in the spec's form or in
    /// rxe's FLUSH form).
    pub udp: Vec<u8>,
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
    /// The requester's QPN, from the capture's CM MADs or else the first response seen
    /// (none if neither was seen).
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
    /// RoCE packets whose ICRC fails.
    pub icrc_bad: u64,
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
            + self.icrc_bad
            + self.cm
            + self.ud
            + self.uc
            + self.cnp
            + self.orphan_responses
    }
}

/// A RoCE frame the replay had to drop because the capture holds it damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Frame number in the capture, from 1.
    pub frame: u64,
    /// Its addresses, when the IP header still parses.
    pub between: Option<(IpAddr, IpAddr)>,
    /// What is wrong with it.
    pub why: String,
}

impl Damage {
    /// Whether the frame may have belonged to `conn`: it went either way between the
    /// connection's two addresses, or its addresses are unknown.
    pub fn touches(&self, conn: &Connection) -> bool {
        self.between.is_none_or(|(a, b)| {
            (a, b) == (conn.requester, conn.responder) || (b, a) == (conn.requester, conn.responder)
        })
    }
}

/// The connections of a capture and what was skipped.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// RC connections in order of their first request.
    pub connections: Vec<Connection>,
    /// Frames skipped.
    pub skipped: Skipped,
    /// RoCE frames dropped as damaged (a failed ICRC, or not parseable), in capture order.
    pub damaged: Vec<Damage>,
    /// Frames that were RoCE (UDP to a RoCE port), whole or not.
    pub roce_frames: u64,
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

/// Why a frame is not replayed.
enum Unusable {
    /// Not RoCE at all.
    NotRoce,
    /// RoCE, but cut short by the capture's snap length.
    Snapped,
    /// RoCE, but damaged: it does not parse or its ICRC fails.
    Damaged(Damage, bool),
}

/// Parses one frame.
fn parse(
    index: u64,
    c: &Captured,
    is_roce_port: &impl Fn(u16) -> bool,
) -> Result<Addressed, Unusable> {
    let damaged = |between, why: String, icrc: bool| {
        Unusable::Damaged(
            Damage {
                frame: index,
                between,
                why,
            },
            icrc,
        )
    };
    let snapped = (c.data.len() as u64) < u64::from(c.orig_len);
    let frame = match Frame::parse_with(&c.data, is_roce_port) {
        Ok(f) => f,
        Err(e) if not_roce(&e) => return Err(Unusable::NotRoce),
        Err(_) if snapped => return Err(Unusable::Snapped),
        Err(e) => return Err(damaged(outer_addrs(&c.data), e.to_string(), false)),
    };
    if snapped {
        return Err(Unusable::Snapped);
    }
    let (src, dst) = ip_addrs(&frame.repr.ip);
    let between = Some((src, dst));
    let info = match frame.repr.packet.info() {
        Ok(i) => i,
        Err(e) => return Err(damaged(between, e.to_string(), false)),
    };
    if let IcrcCheck::Invalid { computed, found } = frame.check_icrc() {
        let why = format!("ICRC mismatch: computed {computed:#010x}, found {found:#010x}");
        return Err(damaged(between, why, true));
    }
    let bytes = frame.bytes();
    let start = frame.repr.link.header_len() + frame.repr.ip.header_len() + 8;
    let end = start + frame.repr.udp.length as usize - 8;
    let Some(udp) = bytes.get(start..end) else {
        return Err(damaged(between, "UDP length past the frame".into(), false));
    };
    let pkt = Pkt {
        frame: index,
        ts: c.ts,
        sport: frame.repr.udp.source_port,
        dest_qpn: frame.repr.packet.bth.dest_qp,
        psn: frame.repr.packet.bth.psn,
        info,
        udp: udp.to_vec(),
    };
    Ok(Addressed { src, dst, pkt })
}

/// The IP addresses of a frame whose RoCE part does not parse.
fn outer_addrs(data: &[u8]) -> Option<(IpAddr, IpAddr)> {
    let s = rocex_dump::FrameSummary::outer(0, 0.0, data);
    Some((s.src?.parse().ok()?, s.dst?.parse().ok()?))
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
    let mut cm = CmPairs::default();
    for (i, c) in frames.iter().enumerate() {
        let a = match parse(i as u64 + 1, c, &is_roce_port) {
            Ok(a) => a,
            Err(Unusable::NotRoce) => {
                out.skipped.non_roce += 1;
                continue;
            }
            Err(Unusable::Snapped) => {
                out.roce_frames += 1;
                out.skipped.malformed += 1;
                continue;
            }
            Err(Unusable::Damaged(d, icrc)) => {
                out.roce_frames += 1;
                if icrc {
                    out.skipped.icrc_bad += 1;
                } else {
                    out.skipped.malformed += 1;
                }
                out.damaged.push(d);
                continue;
            }
        };
        out.roce_frames += 1;
        match a.pkt.info.service {
            Service::Ud if a.pkt.dest_qpn == 1 => {
                out.skipped.cm += 1;
                cm.see(a.src, a.dst, &a.pkt);
            }
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
    for c in &mut out.connections {
        c.req_qpn = cm.peer_qpn(c.responder, c.resp_qpn, c.requester);
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
