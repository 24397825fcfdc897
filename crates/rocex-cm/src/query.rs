/*! One SIDR exchange, sans-IO ([`crate::sidr`]): the active side sends a SIDR_REQ and
resends it every response timeout until a SIDR_REP or the last retry, as the kernel's CM
does for `ib_send_cm_sidr_req` (rdma_cm gives it `CMA_CM_RESPONSE_TIMEOUT` and
`CMA_MAX_CM_RETRIES`); the passive side answers with [`answer`], and answers a repeated
SIDR_REQ with the same SIDR_REP.
*/

use core::net::IpAddr;
use core::time::Duration;
use std::collections::VecDeque;

use rocex_proto::Instant;

use crate::conn::{CM_RESPONSE_TIMEOUT, MAX_CM_RETRIES, ROCE_PACKET_LIFETIME, timeout};
use crate::sidr::{self, RepRepr, ReqRepr};
use crate::{Mad, Message};

/// How a SIDR exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The service answered with status 0: its QPN, Q_Key and private data.
    Resolved(RepRepr),
    /// The service answered with another status (the SIDR_REP says which).
    Refused(RepRepr),
    /// No SIDR_REP came before the retries ran out.
    TimedOut,
}

/// The active side of one SIDR exchange.
#[derive(Debug)]
pub struct Query {
    peer: IpAddr,
    req: Mad,
    request_id: u32,
    at: Option<Instant>,
    left: u8,
    interval: Duration,
    out: VecDeque<Mad>,
    outcome: Option<Outcome>,
}

impl Query {
    /// Asks `peer` for `service_id` with `private_data` (rdma_cm: its address header,
    /// then the application's bytes); the SIDR_REQ is queued at once. `tid` and
    /// `request_id` should be unpredictable (the caller's random source).
    pub fn start(
        now: Instant,
        peer: IpAddr,
        service_id: u64,
        private_data: [u8; sidr::REQ_PRIVATE_DATA_LEN],
        tid: u64,
        request_id: u32,
    ) -> Self {
        let req = Mad {
            tid,
            msg: Message::SidrReq(ReqRepr {
                request_id,
                partition_key: 0xffff,
                service_id,
                private_data,
            }),
        };
        let interval = timeout(CM_RESPONSE_TIMEOUT) + timeout(ROCE_PACKET_LIFETIME) * 2;
        Self {
            peer,
            req,
            request_id,
            at: Some(now + interval),
            left: MAX_CM_RETRIES,
            interval,
            out: VecDeque::from([req]),
            outcome: None,
        }
    }

    /// The peer asked.
    pub const fn peer(&self) -> IpAddr {
        self.peer
    }

    /// Whether `mad` from `from` answers this query.
    pub fn owns(&self, from: IpAddr, mad: &Mad) -> bool {
        from == self.peer
            && matches!(mad.msg, Message::SidrRep(r) if r.request_id == self.request_id)
    }

    /// Takes the SIDR_REP the caller found this query [`owns`](Query::owns); a repeat
    /// after the first is ignored.
    pub fn handle(&mut self, mad: &Mad) {
        let Message::SidrRep(rep) = mad.msg else {
            return;
        };
        if self.at.take().is_none() {
            return;
        }
        self.outcome = Some(if rep.status == sidr::STATUS_OK {
            Outcome::Resolved(rep)
        } else {
            Outcome::Refused(rep)
        });
    }

    /// The next message to send to [`Query::peer`]'s QP1.
    pub fn poll_transmit(&mut self) -> Option<Mad> {
        self.out.pop_front()
    }

    /// When [`Query::handle_timeout`] has work.
    pub const fn poll_timeout(&self) -> Option<Instant> {
        self.at
    }

    /// Resends the SIDR_REQ, or gives up after the last retry.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(at) = self.at else { return };
        if now < at {
            return;
        }
        if self.left == 0 {
            self.at = None;
            self.outcome = Some(Outcome::TimedOut);
            return;
        }
        self.left -= 1;
        self.at = Some(now + self.interval);
        self.out.push_back(self.req);
    }

    /// How the exchange ended, once it has (taken once).
    pub fn poll_outcome(&mut self) -> Option<Outcome> {
        self.outcome.take()
    }
}

/// The SIDR_REP answering `req` (received in a MAD with transaction ID `tid`) with
/// `status`, the service's `qpn` and `qkey`, and up to 136 bytes of `private_data` (the
/// rest of the field zero, more cut off).
pub fn answer(
    tid: u64,
    req: &ReqRepr,
    status: u8,
    qpn: u32,
    qkey: u32,
    private_data: &[u8],
) -> Mad {
    let mut rep = RepRepr::answer(req, status, qpn, qkey);
    let n = private_data.len().min(rep.private_data.len());
    rep.private_data[..n].copy_from_slice(&private_data[..n]);
    Mad {
        tid,
        msg: Message::SidrRep(rep),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HEADER_LEN, MAD_LEN, cma};

    const PEER: IpAddr = IpAddr::V4(core::net::Ipv4Addr::new(198, 18, 0, 2));

    fn query(now: Instant) -> Query {
        let mut pd = [0u8; sidr::REQ_PRIVATE_DATA_LEN];
        pd[36] = 0xa5;
        Query::start(
            now,
            PEER,
            cma::service_id(cma::PS_UDP, 7174),
            pd,
            0x1234,
            0xd528_3501,
        )
    }

    #[test]
    fn sidr_messages_sit_at_the_offsets_of_ibta_tables_113_and_114() {
        let mut q = query(Instant::from_nanos(0));
        let req = q.poll_transmit().unwrap();
        let mut b = [0u8; MAD_LEN];
        req.emit(&mut b).unwrap();
        // MAD header: CM class 7, version 2, Send, attribute 0x0017.
        assert_eq!(b[..4], [1, 7, 2, 3]);
        assert_eq!(b[16..18], [0x00, 0x17]);
        let d = &b[HEADER_LEN..];
        assert_eq!(d[..8], [0xd5, 0x28, 0x35, 0x01, 0xff, 0xff, 0, 0]);
        assert_eq!(d[8..16], [0, 0, 0, 0, 0x01, 0x11, 0x1c, 0x06]);
        assert_eq!(d[16 + 36], 0xa5, "private data from byte 16");
        assert_eq!(Mad::parse(&b), Ok(req));
        let Message::SidrReq(r) = req.msg else {
            panic!("{req}")
        };
        let rep = answer(
            req.tid,
            &r,
            sidr::STATUS_OK,
            0x23_6fb9,
            0x0123_4567,
            &[9; 3],
        );
        rep.emit(&mut b).unwrap();
        assert_eq!(b[16..18], [0x00, 0x18]);
        let d = &b[HEADER_LEN..];
        assert_eq!(d[..4], [0xd5, 0x28, 0x35, 0x01], "the request's ID");
        assert_eq!(d[4..8], [0, 0, 0, 0], "status 0, no additional information");
        assert_eq!(d[8..12], [0x23, 0x6f, 0xb9, 0], "QPN, then a reserved byte");
        assert_eq!(d[12..20], [0, 0, 0, 0, 0x01, 0x11, 0x1c, 0x06]);
        assert_eq!(d[20..24], [0x01, 0x23, 0x45, 0x67]);
        assert!(d[24..96].iter().all(|&x| x == 0), "ClassPortInfo");
        assert_eq!(d[96..100], [9, 9, 9, 0], "private data from byte 96");
        assert_eq!(Mad::parse(&b), Ok(rep));
        assert!(q.owns(PEER, &rep));
        assert!(!q.owns(IpAddr::from([198, 18, 0, 3]), &rep));
        q.handle(&rep);
        let Some(Outcome::Resolved(got)) = q.poll_outcome() else {
            panic!("not resolved")
        };
        assert_eq!((got.qpn, got.qkey), (0x23_6fb9, 0x0123_4567));
        assert_eq!(q.poll_timeout(), None, "nothing left to resend");
    }

    #[test]
    fn an_unanswered_sidr_req_is_resent_then_times_out() {
        let t0 = Instant::from_nanos(0);
        let mut q = query(t0);
        let first = q.poll_transmit().unwrap();
        let mut sent = 1;
        while let Some(at) = q.poll_timeout() {
            q.handle_timeout(at);
            while let Some(m) = q.poll_transmit() {
                assert_eq!(m, first, "the same SIDR_REQ");
                sent += 1;
            }
        }
        assert_eq!(sent, 1 + usize::from(crate::conn::MAX_CM_RETRIES));
        assert_eq!(q.poll_outcome(), Some(Outcome::TimedOut));
    }

    #[test]
    fn a_refusal_carries_its_status_and_a_bad_length_is_an_error() {
        let mut q = query(Instant::from_nanos(0));
        let Message::SidrReq(r) = q.poll_transmit().unwrap().msg else {
            panic!("not a SIDR_REQ")
        };
        q.handle(&answer(1, &r, sidr::STATUS_UNSUPPORTED, 0, 0, &[]));
        assert!(matches!(
            q.poll_outcome(),
            Some(Outcome::Refused(rep)) if rep.status == sidr::STATUS_UNSUPPORTED
        ));
        let mut b = [0u8; MAD_LEN];
        answer(1, &r, 0, 1, 1, &[]).emit(&mut b).unwrap();
        b[HEADER_LEN + 5] = 73; // more additional information than ClassPortInfo holds
        let e = Mad::parse(&b).unwrap_err();
        assert_eq!((e.part, e.offset), (crate::Part::SidrRep, HEADER_LEN + 5));
    }
}
