//! The short messages: ReadyToUse (RTU, 0x0014; IBTA Vol. 1 §12.6, table 111),
//! DisconnectRequest (DREQ, 0x0015; table 112) and DisconnectReply (DREP,
//! 0x0016; table 113): the two communication IDs, DREQ's the peer's QPN, and
//! private data.

use crate::bits::{blocks, fields, view};
use crate::{Part, check_widths};

/// Bytes of an RTU's or DREP's private data.
pub const PRIVATE_DATA_LEN: usize = 224;
/// Bytes of a DREQ's private data.
pub const DREQ_PRIVATE_DATA_LEN: usize = 220;

view!(
    /// A zero-copy view of an RTU or a DREP (the MAD's data, after the common header).
    Ids,
    Part::Rtu,
    8 + PRIVATE_DATA_LEN
);

fields!(Ids {
    /// The sender's communication ID.
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// The receiver's communication ID.
    remote_comm_id / set_remote_comm_id: u32 = (4, 0, 32);
});

blocks!(Ids {
    /// The private data.
    private_data / set_private_data: [u8; PRIVATE_DATA_LEN] = 8;
});

view!(
    /// A zero-copy view of a DREQ (the MAD's data, after the common header).
    Dreq,
    Part::Dreq,
    12 + DREQ_PRIVATE_DATA_LEN
);

fields!(Dreq {
    /// The sender's communication ID.
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// The receiver's communication ID.
    remote_comm_id / set_remote_comm_id: u32 = (4, 0, 32);
    /// The receiver's QPN (24 bits).
    remote_qpn / set_remote_qpn: u32 = (8, 0, 24);
});

blocks!(Dreq {
    /// The private data.
    private_data / set_private_data: [u8; DREQ_PRIVATE_DATA_LEN] = 12;
});

/// An RTU's or DREP's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdsRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl IdsRepr {
    /// The message without private data.
    pub const fn new(local: u32, remote: u32) -> Self {
        Self {
            local_comm_id: local,
            remote_comm_id: remote,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    /// Reads an RTU or DREP.
    pub fn parse<T: AsRef<[u8]>>(m: &Ids<T>) -> crate::Result<Self> {
        m.check_len()?;
        Ok(Self {
            local_comm_id: m.local_comm_id(),
            remote_comm_id: m.remote_comm_id(),
            private_data: m.private_data(),
        })
    }

    /// Writes an RTU or DREP.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut Ids<T>) -> crate::Result<()> {
        m.check_len()?;
        m.set_local_comm_id(self.local_comm_id);
        m.set_remote_comm_id(self.remote_comm_id);
        m.set_private_data(&self.private_data);
        Ok(())
    }
}

/// A DREQ's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DreqRepr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// The receiver's QPN.
    pub remote_qpn: u32,
    /// Private data.
    pub private_data: [u8; DREQ_PRIVATE_DATA_LEN],
}

impl DreqRepr {
    /// A DREQ without private data.
    pub const fn new(local: u32, remote: u32, remote_qpn: u32) -> Self {
        Self {
            local_comm_id: local,
            remote_comm_id: remote,
            remote_qpn,
            private_data: [0; DREQ_PRIVATE_DATA_LEN],
        }
    }

    /// Reads a DREQ.
    pub fn parse<T: AsRef<[u8]>>(m: &Dreq<T>) -> crate::Result<Self> {
        m.check_len()?;
        Ok(Self {
            local_comm_id: m.local_comm_id(),
            remote_comm_id: m.remote_comm_id(),
            remote_qpn: m.remote_qpn(),
            private_data: m.private_data(),
        })
    }

    /// Writes a DREQ (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut Dreq<T>) -> crate::Result<()> {
        m.check_len()?;
        check_widths(Part::Dreq, &[(8, self.remote_qpn.into(), 24, "remote QPN")])?;
        m.buffer.as_mut()[..12].fill(0);
        m.set_local_comm_id(self.local_comm_id);
        m.set_remote_comm_id(self.remote_comm_id);
        m.set_remote_qpn(self.remote_qpn);
        m.set_private_data(&self.private_data);
        Ok(())
    }
}
