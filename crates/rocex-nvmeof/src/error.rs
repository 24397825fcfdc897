//! Every way the host can fail, each naming the queue (and the command where one is
//! involved), so that a report says where.

use core::fmt;

use rocex_verbs::verbs::WcStatus;

use crate::wire::Status;
use crate::wire::identify::IdentifyError;

/// The host's errors.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A verbs call to rocexd failed.
    Verbs {
        /// The queue being set up or used.
        qid: u16,
        /// The call.
        what: &'static str,
        /// rocexd's error.
        source: rocex_verbs::Error,
    },
    /// The target refused the rdma_cm connection of a queue (CM REJ reason, IBTA
    /// table 112; 28 is the consumer's reject, which NVMe-oF targets send with the
    /// binding's reject private data).
    Rejected {
        /// The queue.
        qid: u16,
        /// The REJ reason.
        reason: u16,
        /// The binding's STS from the reject's private data, when there was some.
        status: Option<u16>,
    },
    /// The target's accept private data does not fit the binding or the queue.
    BadAccept {
        /// The queue.
        qid: u16,
        /// What is wrong.
        why: String,
    },
    /// The target did not answer the connect request, or the connection ended before it
    /// was up.
    Unreachable {
        /// The queue.
        qid: u16,
    },
    /// The connection of a queue ended (the target disconnected).
    Disconnected {
        /// The queue.
        qid: u16,
    },
    /// No response arrived within the timeout.
    Timeout {
        /// The queue.
        qid: u16,
        /// The oldest outstanding command, if any.
        cid: Option<u16>,
        /// What was being waited for.
        what: &'static str,
    },
    /// A command completed with an error status.
    Command {
        /// The queue.
        qid: u16,
        /// The command identifier.
        cid: u16,
        /// The command's opcode (and fabrics type for opcode 7Fh).
        op: &'static str,
        /// The status the target returned.
        status: Status,
    },
    /// A response capsule that does not fit: wrong length, another queue's SQ ID, a
    /// command identifier with no command outstanding.
    BadResponse {
        /// The queue it arrived on.
        qid: u16,
        /// The command identifier it named (none when it could not be read).
        cid: Option<u16>,
        /// What is wrong.
        why: String,
    },
    /// An RDMA work request failed (the QP went to error: lost link, the target's QP
    /// torn down, a protection error on the host's memory).
    Transport {
        /// The queue.
        qid: u16,
        /// The work request ("send", "receive").
        what: &'static str,
        /// The completion status.
        status: WcStatus,
    },
    /// The controller does not behave as required (not ready in time, fatal status,
    /// unusable Identify data).
    Controller(String),
    /// The caller's request cannot be carried (too long for a slot, too many queues).
    Invalid(String),
}

impl From<IdentifyError> for Error {
    fn from(e: IdentifyError) -> Self {
        Self::Controller(e.0)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Verbs { qid, what, source } => write!(f, "queue {qid}: {what}: {source}"),
            Self::Rejected {
                qid,
                reason,
                status: None,
            } => write!(
                f,
                "queue {qid}: the target rejected the connection (CM REJ reason {reason})"
            ),
            Self::Rejected {
                qid,
                reason,
                status: Some(sts),
            } => write!(
                f,
                "queue {qid}: the target rejected the connection (CM REJ reason {reason}): {} \
                 (NVMe-oF RDMA STS {sts})",
                crate::wire::cm::rej_status_name(*sts)
            ),
            Self::BadAccept { qid, why } => write!(f, "queue {qid}: the target's accept: {why}"),
            Self::Unreachable { qid } => {
                write!(
                    f,
                    "queue {qid}: the target did not answer the connect request"
                )
            }
            Self::Disconnected { qid } => write!(f, "queue {qid}: the target disconnected"),
            Self::Timeout {
                qid,
                cid: Some(cid),
                what,
            } => write!(
                f,
                "queue {qid}: command {cid}: no {what} within the timeout"
            ),
            Self::Timeout {
                qid,
                cid: None,
                what,
            } => {
                write!(f, "queue {qid}: no {what} within the timeout")
            }
            Self::Command {
                qid,
                cid,
                op,
                status,
            } => write!(f, "queue {qid}: command {cid} ({op}) failed: {status}"),
            Self::BadResponse {
                qid,
                cid: Some(cid),
                why,
            } => write!(f, "queue {qid}: response for command {cid}: {why}"),
            Self::BadResponse {
                qid,
                cid: None,
                why,
            } => {
                write!(f, "queue {qid}: malformed response: {why}")
            }
            Self::Transport { qid, what, status } => {
                write!(f, "queue {qid}: RDMA {what} failed: {status:?}")
            }
            Self::Controller(why) => write!(f, "controller: {why}"),
            Self::Invalid(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Verbs { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The crate's result.
pub type Result<T> = core::result::Result<T, Error>;
