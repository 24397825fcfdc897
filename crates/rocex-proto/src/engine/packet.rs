//! The packet path: a received packet to its QP, and the next packet out of the QP whose
//! turn it is, with its ICRC.

use std::net::{IpAddr, SocketAddr};

use rocex_wire::opcode::Service;
use rocex_wire::{Ecn, IcrcForm, Opcode, PacketRepr, ROCE_V2_PORT, icrc, udp_source_port};

use super::{Engine, IcrcStatus, Transmit};
use crate::time::Instant;
use crate::verbs::{QpState, QpType};

/// What a QP handed `poll_transmit`.
pub(crate) struct Outgoing {
    pub(crate) len: usize,
    pub(crate) dest: IpAddr,
    pub(crate) local_qpn: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) tclass: u8,
}

impl Engine {
    /// Checks the ICRC of a packet from a sender that builds IP headers as rocex does
    /// (IPv4 identification 0): lets a UDP-socket path check packets from rocex peers.
    pub fn check_icrc_from_rocex(src: SocketAddr, dst: IpAddr, payload: &[u8]) -> IcrcStatus {
        let Some(body) = payload.len().checked_sub(4) else {
            return IcrcStatus::Invalid;
        };
        let form = IcrcForm::for_opcode(Opcode(payload.first().copied().unwrap_or(0)));
        let found = icrc::from_wire(payload[body..].try_into().expect("four bytes"));
        match icrc::compute_for(
            src.ip(),
            dst,
            src.port(),
            ROCE_V2_PORT,
            &payload[..body],
            form,
        ) {
            Ok(c) if c == found => IcrcStatus::Valid,
            _ => IcrcStatus::Invalid,
        }
    }

    /// Handles a received UDP payload (BTH through ICRC) from `src` to `dst`, from a path
    /// that cannot see the IP header's ECN field.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        src: SocketAddr,
        dst: IpAddr,
        payload: &[u8],
        icrc: IcrcStatus,
    ) {
        self.handle_packet_ecn(now, src, dst, payload, icrc, Ecn::NotEct);
    }

    /// Handles a received UDP payload whose IP header carried `ecn`: a CE mark on a
    /// connected QP's packet asks its peer for a CNP (`docs/congestion.md`).
    pub fn handle_packet_ecn(
        &mut self,
        now: Instant,
        src: SocketAddr,
        dst: IpAddr,
        payload: &[u8],
        icrc: IcrcStatus,
        ecn: Ecn,
    ) {
        let Ok((pkt, _)) = PacketRepr::parse(payload) else {
            self.counters.drop_malformed += 1;
            return;
        };
        if icrc == IcrcStatus::Invalid {
            self.counters.drop_icrc += 1;
            return;
        }
        self.counters.rcvd_pkts += 1;
        let info = pkt.info().expect("parsed opcodes are in the table");
        let qpn = pkt.bth.dest_qp;
        let Some(qp) = self.qps.get(&qpn) else {
            self.counters.drop_no_qp += 1;
            return;
        };
        if info.service == Service::Cnp {
            if qp.attr.ah_attr.is_none_or(|av| av.dest != src.ip()) {
                self.counters.drop_wrong_source += 1;
            } else {
                self.with_qp(qpn, now, |qp, ctx| qp.handle_cnp(ctx));
            }
            return;
        }
        let transport_ok = matches!(
            (info.service, qp.qp_type),
            (Service::Rc, QpType::Rc) | (Service::Uc, QpType::Uc) | (Service::Ud, QpType::Ud)
        );
        if !transport_ok {
            self.counters.drop_wrong_transport += 1;
            return;
        }
        if qp.qp_type != QpType::Ud && qp.attr.ah_attr.is_none_or(|av| av.dest != src.ip()) {
            self.counters.drop_wrong_source += 1;
            return;
        }
        let response = info.operation.is_response();
        self.with_qp(qpn, now, |qp, ctx| {
            qp.note_ecn(ctx, ecn);
            if response {
                if matches!(qp.state, QpState::Rts | QpState::Sqd) {
                    qp.handle_response(ctx, &pkt);
                } else {
                    ctx.counters.drop_qp_state += 1;
                }
            } else {
                qp.handle_request(ctx, &pkt, src.ip(), dst);
            }
        });
    }

    /// Writes the next packet to send into `buf` (which must hold a packet of the path
    /// MTU plus 80 bytes), or returns `None` when nothing is ready. Call again until `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // Each QP gets a turn or two; one that keeps failing to produce cannot spin us.
        let mut turns = self.ready.len() * 2;
        while let Some(qpn) = self.ready.pop_front() {
            if turns == 0 {
                self.ready.push_front(qpn);
                return None;
            }
            turns -= 1;
            let local = self.config.local;
            let mut sampled = None;
            let requests_first = self.requests_first;
            let out = self.with_qp(qpn, now, |qp, ctx| {
                qp.scheduling.queued = false;
                // A CNP goes first: it is about the peer's sending now.
                if qp.notify.pending {
                    return qp.next_cnp(ctx, buf);
                }
                // With `requests_first`, a request waiting with a bare ACK goes first:
                // the peer acts on the request, while the ACK only frees its send queue.
                let request_first = requests_first && qp.resp.ack_can_wait(qp.requester_ready());
                if qp.resp.has_output() && !request_first {
                    let len = qp.next_reply(ctx, buf)?;
                    let dest = qp.attr.ah_attr?.dest;
                    return Some(Outgoing {
                        len,
                        dest,
                        local_qpn: qp.qpn,
                        dest_qpn: qp.attr.dest_qp_num,
                        tclass: qp.wire_tclass(ctx),
                    });
                }
                let out = qp.next_request(ctx, buf);
                sampled = qp.req.sampled.take();
                out
            });
            let Some(Some(out)) = out else { continue };
            let body = out.len - 4;
            let src_port = self
                .config
                .udp_source_port
                .unwrap_or_else(|| udp_source_port(out.local_qpn, out.dest_qpn));
            let form = IcrcForm::for_opcode(Opcode(buf[0]));
            let Ok(crc) = self.icrc_prefixes.compute_for(
                local,
                out.dest,
                src_port,
                ROCE_V2_PORT,
                &buf[..body],
                form,
            ) else {
                continue;
            };
            buf[body..out.len].copy_from_slice(&icrc::to_wire(crc));
            self.counters.sent_pkts += 1;
            if let Some(t) = sampled {
                self.sends.on_built(t);
            }
            return Some(Transmit {
                dest: out.dest,
                src_port,
                len: out.len,
                tclass: out.tclass,
            });
        }
        None
    }

    /// Lets a QP's request packet leave before a positive ACK of the same QP that waits
    /// with it (the ACK follows right after; it waits for one packet at most). For a
    /// caller that posts its answer between receiving and sending (a busy-polling
    /// ping-pong), the answer then reaches the peer first. Positive ACKs queued back to
    /// back then also coalesce into the last, which covers them all. Off by default, as
    /// rxe sends every ACK in order.
    pub fn requests_before_acks(&mut self, on: bool) {
        self.requests_first = on;
    }
}
