//! The QPN pairs a capture's connection management shows.
//!
//! An RC request does not carry its requester's QPN, so a response is tied to its
//! connection by the UDP source port and, once one response has been seen, by its
//! destination QPN ([`crate::connection`]). Two connections between the same two hosts
//! whose packets leave from the same port (perftest's `-R`, whose rdma_cm connections
//! against rxe both use port 4791) cannot be told apart that way: the first response
//! names the requester QPN of whichever connection came first. The CM MADs on QP1 name
//! both QPNs: a REQ carries its sender's (the active side's) QPN and communication ID, the
//! REP answering it (its remote communication ID the REQ's) the passive side's
//! (IBTA §12.6.5 and §12.6.8).

use core::net::IpAddr;

use rocex_cm::{Mad, Message};

use crate::connection::Pkt;

/// One side of a connection: its address and QPN.
type End = (IpAddr, u32);

/// The REQs seen and the pairs their REPs completed.
#[derive(Debug, Default)]
pub(crate) struct CmPairs {
    /// REQs: the sender, its communication ID and its QPN.
    reqs: Vec<(IpAddr, u32, u32)>,
    /// Connected ends, active side first.
    pairs: Vec<(End, End)>,
}

impl CmPairs {
    /// Takes note of a UD packet to QP1 from `src` to `dst`, if it holds a REQ or a REP.
    /// Anything else, or a MAD that does not parse, says nothing about QPNs.
    pub(crate) fn see(&mut self, src: IpAddr, dst: IpAddr, pkt: &Pkt) {
        let Some(mad) = pkt.packet().and_then(|p| Mad::parse(p.payload).ok()) else {
            return;
        };
        match mad.msg {
            Message::Req(r) => self.reqs.push((src, r.local_comm_id, r.local_qpn)),
            Message::Rep(r) => {
                let req = self
                    .reqs
                    .iter()
                    .rev()
                    .find(|&&(a, id, _)| a == dst && id == r.remote_comm_id);
                if let Some(&(_, _, active_qpn)) = req {
                    let pair = ((dst, active_qpn), (src, r.local_qpn));
                    if !self.pairs.contains(&pair) {
                        self.pairs.push(pair);
                    }
                }
            }
            _ => {}
        }
    }

    /// The QPN at `peer` connected to QP `qpn` at `addr`, when the capture's CM says.
    pub(crate) fn peer_qpn(&self, addr: IpAddr, qpn: u32, peer: IpAddr) -> Option<u32> {
        self.pairs.iter().find_map(|&(a, p)| {
            if a == (addr, qpn) && p.0 == peer {
                Some(p.1)
            } else if p == (addr, qpn) && a.0 == peer {
                Some(a.1)
            } else {
                None
            }
        })
    }
}
