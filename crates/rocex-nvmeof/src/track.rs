//! Which commands of a queue are in flight, and the judgement of each response against
//! them: a response capsule of the wrong size, for another queue, for a command not in
//! flight, or with an error status becomes an error naming the queue and the command.
//! Pure bookkeeping, tested here without a target.

use rocex_verbs::verbs::WcOpcode;
use zerocopy::FromBytes;

use crate::error::{Error, Result};
use crate::wire::Cqe;
use crate::wire::cm::{self, CmRej, CmRep};
use crate::wire::cqe::CQE_LEN;
use crate::wire::sqe::{Sqe, opcode};

/// A response: the command it completes and the CQE's result field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The command identifier (also the data slot).
    pub cid: u16,
    /// DW0 and DW1 of the CQE.
    pub result: u64,
}

/// The command identifiers of one queue: free, or in flight with the command's name.
#[derive(Debug)]
pub(crate) struct Tracker {
    qid: u16,
    inflight: Vec<Option<&'static str>>,
    free: Vec<u16>,
}

impl Tracker {
    pub(crate) fn new(qid: u16, depth: u16) -> Self {
        Self {
            qid,
            inflight: vec![None; usize::from(depth)],
            free: (0..depth).rev().collect(),
        }
    }

    /// Commands in flight (identifiers taken count too).
    pub(crate) fn inflight(&self) -> usize {
        self.inflight.len() - self.free.len()
    }

    /// The lowest identifier in flight.
    pub(crate) fn oldest(&self) -> Option<u16> {
        self.inflight
            .iter()
            .position(Option::is_some)
            .map(|c| c as u16)
    }

    pub(crate) fn take(&mut self) -> Option<u16> {
        self.free.pop()
    }

    /// Returns an identifier taken but not submitted.
    pub(crate) fn give_back(&mut self, cid: u16) {
        let i = usize::from(cid);
        if i < self.inflight.len() && self.inflight[i].is_none() && !self.free.contains(&cid) {
            self.free.push(cid);
        }
    }

    /// Marks `cid` (taken) in flight with `sqe`.
    pub(crate) fn start(&mut self, cid: u16, sqe: &Sqe) -> Result<()> {
        let qid = self.qid;
        let slot = self
            .inflight
            .get_mut(usize::from(cid))
            .ok_or_else(|| Error::Invalid(format!("queue {qid}: no command ID {cid}")))?;
        if slot.is_some() {
            return Err(Error::Invalid(format!(
                "queue {qid}: command {cid} is already in flight"
            )));
        }
        *slot = Some(op_name(sqe));
        Ok(())
    }

    /// Marks `cid` not in flight after its capsule could not be posted.
    pub(crate) fn abort(&mut self, cid: u16) {
        if let Some(s) = self.inflight.get_mut(usize::from(cid)) {
            *s = None;
        }
        self.give_back(cid);
    }

    /// Matches a response to its command and frees the identifier.
    pub(crate) fn finish(&mut self, cqe: &Cqe) -> Result<Done> {
        let (qid, cid) = (self.qid, cqe.cid.get());
        let Some(op) = self
            .inflight
            .get_mut(usize::from(cid))
            .and_then(Option::take)
        else {
            return Err(Error::BadResponse {
                qid,
                cid: Some(cid),
                why: "no command with this identifier is in flight".into(),
            });
        };
        self.free.push(cid);
        if cqe.sq_id.get() != qid {
            return Err(Error::BadResponse {
                qid,
                cid: Some(cid),
                why: format!("SQ ID {} in a response on queue {qid}", cqe.sq_id.get()),
            });
        }
        let status = cqe.status();
        if !status.is_success() {
            return Err(Error::Command {
                qid,
                cid,
                op,
                status,
            });
        }
        Ok(Done {
            cid,
            result: cqe.result.get(),
        })
    }
}

/// The response capsule in a receive of `byte_len` bytes (`bytes`, the receive buffer):
/// exactly one 16-byte CQE sent with SEND.
pub(crate) fn response(qid: u16, op: WcOpcode, byte_len: u32, bytes: &[u8]) -> Result<Cqe> {
    if op != WcOpcode::Recv || byte_len as usize != CQE_LEN || bytes.len() < CQE_LEN {
        return Err(Error::BadResponse {
            qid,
            cid: None,
            why: format!("{op:?} of {byte_len} bytes: a response capsule is a {CQE_LEN}-byte SEND"),
        });
    }
    Ok(Cqe::read_from_bytes(&bytes[..CQE_LEN]).expect("16 bytes"))
}

/// Checks the rdma_cm accept's private data of queue `qid` of `depth` entries and
/// returns the controller's receive queue size (CRQSIZE); `None` when the CM handed no
/// private data on. The record format must be 0, and the controller must take at least
/// `depth` commands at once, or the host could send commands it has no buffer for.
pub(crate) fn accept(qid: u16, depth: u16, pd: &[u8]) -> Result<Option<u16>> {
    if pd.is_empty() {
        return Ok(None);
    }
    let bad = |why: String| Error::BadAccept { qid, why };
    let (rep, _) = CmRep::read_from_prefix(pd).map_err(|_| {
        bad(format!(
            "{} bytes of private data, the binding's accept has {}",
            pd.len(),
            cm::REP_LEN
        ))
    })?;
    if rep.recfmt.get() != cm::RECFMT_1_0 {
        return Err(bad(format!("record format {}", rep.recfmt.get())));
    }
    let crqsize = rep.crqsize.get();
    if crqsize < depth {
        return Err(bad(format!(
            "the controller takes {crqsize} commands at once, the queue has {depth} entries"
        )));
    }
    Ok(Some(crqsize))
}

/// The binding's STS in a CM reject's private data: only a consumer reject (CM reason
/// 28, the target's own refusal) carries it; the CM's own rejects (reason 8, nobody
/// listens) carry zeros that mean nothing.
pub(crate) fn reject_status(reason: u16, pd: &[u8]) -> Option<u16> {
    const REJ_CONSUMER: u16 = 28;
    let (rej, _) = CmRej::read_from_prefix(pd).ok()?;
    (reason == REJ_CONSUMER && rej.recfmt.get() == cm::RECFMT_1_0 && rej.sts.get() != 0)
        .then(|| rej.sts.get())
}

/// The name of an SQE's command, for errors.
fn op_name(sqe: &Sqe) -> &'static str {
    match (sqe.opcode, sqe.fctype()) {
        (opcode::FABRICS, 0x00) => "property set",
        (opcode::FABRICS, 0x01) => "connect",
        (opcode::FABRICS, 0x04) => "property get",
        (opcode::FABRICS, _) => "fabrics",
        (opcode::IDENTIFY, _) => "identify",
        (opcode::READ, _) => "read",
        (opcode::WRITE, _) => "write",
        (opcode::FLUSH, _) => "flush",
        _ => "command",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::KeyedSgl;
    use zerocopy::IntoBytes;

    /// A CQE as a target would send it: result, SQ head, SQ ID, CID, status (phase 0).
    fn cqe(result: u64, sq_id: u16, cid: u16, status: u16) -> Cqe {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&result.to_le_bytes());
        b[10..12].copy_from_slice(&sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&cid.to_le_bytes());
        b[14..16].copy_from_slice(&(status << 1).to_le_bytes());
        Cqe::read_from_bytes(&b).unwrap()
    }

    fn read() -> Sqe {
        Sqe::rw(
            opcode::READ,
            1,
            0,
            1,
            KeyedSgl::new(0x1000, 4096, 7).unwrap(),
        )
    }

    /// A tracker of queue `qid`, `depth` deep, with a READ in flight under the CID it
    /// gives.
    fn one_read(qid: u16, depth: u16) -> (Tracker, u16) {
        let mut t = Tracker::new(qid, depth);
        let cid = t.take().unwrap();
        t.start(cid, &read()).unwrap();
        (t, cid)
    }

    /// The queue and command a `BadResponse` names; `None` for any other error.
    fn bad_response(e: &Error) -> Option<(u16, Option<u16>)> {
        match *e {
            Error::BadResponse { qid, cid, .. } => Some((qid, cid)),
            _ => None,
        }
    }

    #[test]
    fn a_response_completes_its_command_and_frees_it() {
        let (mut t, cid) = one_read(1, 2);
        assert_eq!(t.inflight(), 1);
        let d = t.finish(&cqe(0xabcd, 1, cid, 0)).unwrap();
        assert_eq!(
            d,
            Done {
                cid,
                result: 0xabcd
            }
        );
        assert_eq!(t.inflight(), 0);
    }

    #[test]
    fn a_response_for_no_command_in_flight_is_refused() {
        let mut t = Tracker::new(1, 4);
        let e = t.finish(&cqe(0, 1, 3, 0)).unwrap_err();
        assert_eq!(bad_response(&e), Some((1, Some(3))), "{e}");
        let e = t.finish(&cqe(0, 1, 900, 0)).unwrap_err();
        assert_eq!(bad_response(&e), Some((1, Some(900))), "{e}");
        // A duplicate: the second response for the same command.
        let cid = t.take().unwrap();
        t.start(cid, &read()).unwrap();
        t.finish(&cqe(0, 1, cid, 0)).unwrap();
        let e = t.finish(&cqe(0, 1, cid, 0)).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("queue 1: response for command {cid}")),
            "{e}"
        );
    }

    #[test]
    fn another_queues_sq_id_is_refused_and_frees_the_command() {
        let (mut t, cid) = one_read(2, 4);
        let e = t.finish(&cqe(0, 5, cid, 0)).unwrap_err();
        assert!(
            e.to_string().contains("SQ ID 5 in a response on queue 2"),
            "{e}"
        );
        assert_eq!(t.inflight(), 0);
    }

    #[test]
    fn an_error_status_names_queue_command_and_status() {
        let (mut t, cid) = one_read(1, 4);
        // SCT 0, SC 80h (LBA out of range), DNR.
        let e = t.finish(&cqe(0, 1, cid, 1 << 14 | 0x80)).unwrap_err();
        let Error::Command {
            qid,
            cid: c,
            op,
            status,
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!((*qid, *c, *op), (1, cid, "read"));
        assert_eq!((status.sct(), status.sc(), status.dnr()), (0, 0x80, true));
        assert_eq!(
            e.to_string(),
            format!(
                "queue 1: command {cid} (read) failed: LBA out of range (SCT 0x0, SC 0x80, do not retry)"
            )
        );
        assert_eq!(t.inflight(), 0);
    }

    #[test]
    fn an_identifier_cannot_be_started_twice_or_out_of_range() {
        let (mut t, cid) = one_read(0, 2);
        assert!(t.start(cid, &read()).is_err());
        assert!(t.start(2, &read()).is_err());
        t.abort(cid);
        assert_eq!(t.inflight(), 0);
        assert_eq!(t.oldest(), None);
    }

    #[test]
    fn the_queue_runs_out_of_identifiers_at_its_depth() {
        let mut t = Tracker::new(1, 16);
        let cids: Vec<u16> = (0..16).map(|_| t.take().unwrap()).collect();
        assert_eq!(t.take(), None);
        for &c in &cids {
            t.start(c, &read()).unwrap();
        }
        assert_eq!(t.inflight(), 16);
        assert_eq!(t.oldest(), Some(0));
    }

    #[test]
    fn the_accept_must_be_the_bindings_and_deep_enough() {
        let mut rep = [0u8; 32];
        rep[2] = 16; // CRQSIZE 16
        assert_eq!(accept(1, 16, &rep).unwrap(), Some(16));
        assert_eq!(
            accept(1, 16, &[]).unwrap(),
            None,
            "no private data handed on"
        );
        let e = accept(1, 32, &rep).unwrap_err();
        assert_eq!(
            e.to_string(),
            "queue 1: the target's accept: the controller takes 16 commands at once, the queue has 32 entries"
        );
        let mut v1 = rep;
        v1[0] = 1;
        assert!(
            accept(0, 16, &v1)
                .unwrap_err()
                .to_string()
                .contains("record format 1")
        );
        let e = accept(2, 16, &rep[..10]).unwrap_err();
        assert!(matches!(e, Error::BadAccept { qid: 2, .. }), "{e}");
        // A REP carries 196 bytes of private data: the binding's 32 come first.
        let mut long = [0u8; 196];
        long[2] = 32;
        assert_eq!(accept(0, 32, &long).unwrap(), Some(32));
    }

    #[test]
    fn only_a_consumer_reject_carries_the_bindings_status() {
        let mut pd = [0u8; 148];
        pd[2] = 4; // STS 4: invalid HSQSIZE
        assert_eq!(reject_status(28, &pd), Some(4));
        assert_eq!(reject_status(8, &pd), None, "the CM's own reject");
        assert_eq!(reject_status(28, &[0u8; 148]), None, "STS 0 is no status");
        assert_eq!(reject_status(28, &pd[..3]), None, "too short");
        assert_eq!(reject_status(28, &[]), None);
        let e = Error::Rejected {
            qid: 0,
            reason: 28,
            status: reject_status(28, &pd),
        };
        assert_eq!(
            e.to_string(),
            "queue 0: the target rejected the connection (CM REJ reason 28): invalid host SQ size (NVMe-oF RDMA STS 4)"
        );
    }

    #[test]
    fn a_receive_that_is_not_one_cqe_is_refused() {
        let b = cqe(0, 1, 0, 0);
        let ok = response(1, WcOpcode::Recv, 16, b.as_bytes()).unwrap();
        assert_eq!(ok, b);
        for (op, len) in [
            (WcOpcode::Recv, 15),
            (WcOpcode::Recv, 32),
            (WcOpcode::RecvRdmaWithImm, 16),
        ] {
            let e = response(1, op, len, &[0u8; 64]).unwrap_err();
            assert_eq!(bad_response(&e), Some((1, None)), "{e}");
            assert!(
                e.to_string().starts_with("queue 1: malformed response"),
                "{e}"
            );
        }
    }
}
