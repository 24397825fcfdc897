//! ConnectReject (REJ, attribute 0x0012; IBTA Vol. 1 §12.6, table 108) and the
//! reason codes rdma_cm meets.

use crate::bits::{blocks, fields, view};
use crate::{Part, check_widths};

/// Bytes of the additional reject information.
pub const ARI_LEN: usize = 72;
/// Bytes of a REJ's private data.
pub const PRIVATE_DATA_LEN: usize = 148;
const ARI: usize = 12;
const PRIVATE: usize = ARI + ARI_LEN;

/// Which message a REJ or MRA answers (IBTA tables 107 and 108: 2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgKind {
    /// The REQ.
    Req = 0,
    /// The REP.
    Rep = 1,
    /// Something else (a LAP, or no message in particular).
    Other = 2,
}

impl MsgKind {
    /// The kind of a 2-bit code (3 is reserved).
    pub const fn from_bits(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::Req),
            1 => Some(Self::Rep),
            2 => Some(Self::Other),
            _ => None,
        }
    }
}

/// REJ reason: no QP is available (code 1).
pub const REASON_NO_QP: u16 = 1;
/// REJ reason: the service ID is not served (code 8).
pub const REASON_INVALID_SERVICE_ID: u16 = 8;
/// REJ reason: stale connection (code 10).
pub const REASON_STALE_CONN: u16 = 10;
/// REJ reason: the REP or REQ timed out (code 26).
pub const REASON_TIMEOUT: u16 = 26;
/// REJ reason: the consumer refused (code 28).
pub const REASON_CONSUMER: u16 = 28;

view!(
    /// A zero-copy view of a REJ (the MAD's data, after the common header).
    Rej,
    Part::Rej,
    PRIVATE + PRIVATE_DATA_LEN
);

fields!(Rej {
    /// The sender's communication ID (0 when rejecting a REQ it never accepted).
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// The receiver's communication ID.
    remote_comm_id / set_remote_comm_id: u32 = (4, 0, 32);
    /// Which message is rejected (2 bits).
    message_rejected / set_message_rejected: u8 = (8, 0, 2);
    /// Bytes of ARI that are meaningful (7 bits).
    reject_info_length / set_reject_info_length: u8 = (9, 0, 7);
    /// Reason.
    reason / set_reason: u16 = (10, 0, 16);
});

blocks!(Rej {
    /// Additional reject information.
    ari / set_ari: [u8; ARI_LEN] = ARI;
    /// The private data.
    private_data / set_private_data: [u8; PRIVATE_DATA_LEN] = PRIVATE;
});

/// A REJ's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Which message is rejected.
    pub message_rejected: MsgKind,
    /// Bytes of ARI that are meaningful.
    pub reject_info_length: u8,
    /// Reason code.
    pub reason: u16,
    /// Additional reject information.
    pub ari: [u8; ARI_LEN],
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// A REJ without ARI or private data.
    pub const fn new(local: u32, remote: u32, rejected: MsgKind, reason: u16) -> Self {
        Self {
            local_comm_id: local,
            remote_comm_id: remote,
            message_rejected: rejected,
            reject_info_length: 0,
            reason,
            ari: [0; ARI_LEN],
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    /// Reads a REJ.
    pub fn parse<T: AsRef<[u8]>>(r: &Rej<T>) -> crate::Result<Self> {
        r.check_len()?;
        let message_rejected =
            MsgKind::from_bits(r.message_rejected()).ok_or(crate::Error::new(
                Part::Rej,
                8,
                crate::ErrorKind::BadValue("message rejected 3 is reserved"),
            ))?;
        Ok(Self {
            local_comm_id: r.local_comm_id(),
            remote_comm_id: r.remote_comm_id(),
            message_rejected,
            reject_info_length: r.reject_info_length(),
            reason: r.reason(),
            ari: r.ari(),
            private_data: r.private_data(),
        })
    }

    /// Writes a REJ (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut Rej<T>) -> crate::Result<()> {
        r.check_len()?;
        check_widths(
            Part::Rej,
            &[(9, self.reject_info_length.into(), 7, "reject info length")],
        )?;
        r.buffer.as_mut()[..ARI].fill(0);
        r.set_local_comm_id(self.local_comm_id);
        r.set_remote_comm_id(self.remote_comm_id);
        r.set_message_rejected(self.message_rejected as u8);
        r.set_reject_info_length(self.reject_info_length);
        r.set_reason(self.reason);
        r.set_ari(&self.ari);
        r.set_private_data(&self.private_data);
        Ok(())
    }
}
