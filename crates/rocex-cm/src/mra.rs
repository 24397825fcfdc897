//! MessageReceiptAcknowledgement (MRA, attribute 0x0011; IBTA Vol. 1 §12.6, table 107):
//! "I have your message; give me this long to answer it".

use crate::bits::{blocks, fields, view};
use crate::rej::MsgKind;
use crate::{Part, check_widths};

/// Bytes of an MRA's private data.
pub const PRIVATE_DATA_LEN: usize = 222;
const PRIVATE: usize = 10;

view!(
    /// A zero-copy view of an MRA (the MAD's data, after the common header).
    Mra,
    Part::Mra,
    PRIVATE + PRIVATE_DATA_LEN
);

fields!(Mra {
    /// The sender's communication ID.
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// The receiver's communication ID.
    remote_comm_id / set_remote_comm_id: u32 = (4, 0, 32);
    /// Which message is acknowledged (2 bits).
    message_mraed / set_message_mraed: u8 = (8, 0, 2);
    /// How long the sender needs (exponent, 5 bits).
    service_timeout / set_service_timeout: u8 = (9, 0, 5);
});

blocks!(Mra {
    /// The private data.
    private_data / set_private_data: [u8; PRIVATE_DATA_LEN] = PRIVATE;
});

/// An MRA's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The receiver's communication ID.
    pub remote_comm_id: u32,
    /// Which message is acknowledged.
    pub message_mraed: MsgKind,
    /// How long the sender needs (4.096 µs × 2^timeout).
    pub service_timeout: u8,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads an MRA.
    pub fn parse<T: AsRef<[u8]>>(m: &Mra<T>) -> crate::Result<Self> {
        m.check_len()?;
        let message_mraed = MsgKind::from_bits(m.message_mraed()).ok_or(crate::Error::new(
            Part::Mra,
            8,
            crate::ErrorKind::BadValue("message MRAed 3 is reserved"),
        ))?;
        Ok(Self {
            local_comm_id: m.local_comm_id(),
            remote_comm_id: m.remote_comm_id(),
            message_mraed,
            service_timeout: m.service_timeout(),
            private_data: m.private_data(),
        })
    }

    /// Writes an MRA (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, m: &mut Mra<T>) -> crate::Result<()> {
        m.check_len()?;
        check_widths(
            Part::Mra,
            &[(9, self.service_timeout.into(), 5, "service timeout")],
        )?;
        m.buffer.as_mut()[..PRIVATE].fill(0);
        m.set_local_comm_id(self.local_comm_id);
        m.set_remote_comm_id(self.remote_comm_id);
        m.set_message_mraed(self.message_mraed as u8);
        m.set_service_timeout(self.service_timeout);
        m.set_private_data(&self.private_data);
        Ok(())
    }
}
