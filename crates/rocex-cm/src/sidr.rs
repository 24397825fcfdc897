//! Service ID Resolution (IBTA Vol. 1 §12.11): how rdma_cm over UD (`RDMA_PS_UDP`) finds
//! the QPN and Q_Key of the datagram service behind a service ID. The active side sends a
//! SIDR_REQ (attribute 0x0017, table 113) with rdma_cm's address header in its private
//! data; the service answers with a SIDR_REP (attribute 0x0018, table 114) carrying its
//! QPN and Q_Key, or a status saying why not. No connection follows: each side keeps its
//! UD QP and addresses the other with an address handle.

use crate::bits::{blocks, fields, view};
use crate::{Error, ErrorKind, Part, check_widths};

/// Bytes of a SIDR_REQ's private data.
pub const REQ_PRIVATE_DATA_LEN: usize = 216;
/// Bytes of a SIDR_REP's private data.
pub const REP_PRIVATE_DATA_LEN: usize = 136;
/// Bytes of a SIDR_REP's ClassPortInfo (redirection information).
pub const CLASS_PORT_INFO_LEN: usize = 72;
const REQ_PRIVATE: usize = 16;
const REP_INFO: usize = 24;
const REP_PRIVATE: usize = REP_INFO + CLASS_PORT_INFO_LEN;

/// SIDR_REP status: the QPN and Q_Key are valid (table 114).
pub const STATUS_OK: u8 = 0;
/// SIDR_REP status: the service ID is not supported (nothing listens on it).
pub const STATUS_UNSUPPORTED: u8 = 1;
/// SIDR_REP status: the service provider rejected the request.
pub const STATUS_REJECT: u8 = 2;
/// SIDR_REP status: no QP is available.
pub const STATUS_NO_QP: u8 = 3;

view!(
    /// A zero-copy view of a SIDR_REQ (the MAD's data, after the common header).
    SidrReq,
    Part::SidrReq,
    REQ_PRIVATE + REQ_PRIVATE_DATA_LEN
);

fields!(SidrReq {
    /// The sender's request ID, which the SIDR_REP echoes.
    request_id / set_request_id: u32 = (0, 0, 32);
    /// Partition key.
    partition_key / set_partition_key: u16 = (4, 0, 16);
    /// Service ID: rdma_cm's port space and port.
    service_id / set_service_id: u64 = (8, 0, 64);
});

blocks!(SidrReq {
    /// The private data.
    private_data / set_private_data: [u8; REQ_PRIVATE_DATA_LEN] = REQ_PRIVATE;
});

/// A SIDR_REQ's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqRepr {
    /// The sender's request ID.
    pub request_id: u32,
    /// Partition key.
    pub partition_key: u16,
    /// Service ID.
    pub service_id: u64,
    /// Private data (rdma_cm: its address header, then the application's bytes).
    pub private_data: [u8; REQ_PRIVATE_DATA_LEN],
}

impl ReqRepr {
    /// Reads a SIDR_REQ.
    pub fn parse<T: AsRef<[u8]>>(r: &SidrReq<T>) -> crate::Result<Self> {
        r.check_len()?;
        Ok(Self {
            request_id: r.request_id(),
            partition_key: r.partition_key(),
            service_id: r.service_id(),
            private_data: r.private_data(),
        })
    }

    /// Writes a SIDR_REQ (its reserved bytes zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut SidrReq<T>) -> crate::Result<()> {
        r.check_len()?;
        r.buffer.as_mut()[..REQ_PRIVATE].fill(0);
        r.set_request_id(self.request_id);
        r.set_partition_key(self.partition_key);
        r.set_service_id(self.service_id);
        r.set_private_data(&self.private_data);
        Ok(())
    }
}

view!(
    /// A zero-copy view of a SIDR_REP (the MAD's data, after the common header).
    SidrRep,
    Part::SidrRep,
    REP_PRIVATE + REP_PRIVATE_DATA_LEN
);

fields!(SidrRep {
    /// The request ID of the SIDR_REQ answered.
    request_id / set_request_id: u32 = (0, 0, 32);
    /// Status (0: the QPN and Q_Key are valid).
    status / set_status: u8 = (4, 0, 8);
    /// Bytes of additional information that are meaningful.
    additional_info_length / set_additional_info_length: u8 = (5, 0, 8);
    /// The service's QPN (24 bits).
    qpn / set_qpn: u32 = (8, 0, 24);
    /// Service ID.
    service_id / set_service_id: u64 = (12, 0, 64);
    /// The service's Q_Key.
    qkey / set_qkey: u32 = (20, 0, 32);
});

blocks!(SidrRep {
    /// ClassPortInfo (redirection; zero unless the status is a redirect).
    class_port_info / set_class_port_info: [u8; CLASS_PORT_INFO_LEN] = REP_INFO;
    /// The private data.
    private_data / set_private_data: [u8; REP_PRIVATE_DATA_LEN] = REP_PRIVATE;
});

/// A SIDR_REP's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepRepr {
    /// The request ID of the SIDR_REQ answered.
    pub request_id: u32,
    /// Status (table 114: [`STATUS_OK`], [`STATUS_UNSUPPORTED`], ...).
    pub status: u8,
    /// Bytes of additional information that are meaningful.
    pub additional_info_length: u8,
    /// The service's QPN.
    pub qpn: u32,
    /// Service ID.
    pub service_id: u64,
    /// The service's Q_Key.
    pub qkey: u32,
    /// ClassPortInfo.
    pub class_port_info: [u8; CLASS_PORT_INFO_LEN],
    /// Private data.
    pub private_data: [u8; REP_PRIVATE_DATA_LEN],
}

impl RepRepr {
    /// An answer to `req` with `status`, QPN `qpn` and Q_Key `qkey`, no private data.
    pub const fn answer(req: &ReqRepr, status: u8, qpn: u32, qkey: u32) -> Self {
        Self {
            request_id: req.request_id,
            status,
            additional_info_length: 0,
            qpn,
            service_id: req.service_id,
            qkey,
            class_port_info: [0; CLASS_PORT_INFO_LEN],
            private_data: [0; REP_PRIVATE_DATA_LEN],
        }
    }

    /// Reads a SIDR_REP.
    pub fn parse<T: AsRef<[u8]>>(r: &SidrRep<T>) -> crate::Result<Self> {
        r.check_len()?;
        if usize::from(r.additional_info_length()) > CLASS_PORT_INFO_LEN {
            return Err(Error::new(
                Part::SidrRep,
                5,
                ErrorKind::BadValue("additional information longer than ClassPortInfo"),
            ));
        }
        Ok(Self {
            request_id: r.request_id(),
            status: r.status(),
            additional_info_length: r.additional_info_length(),
            qpn: r.qpn(),
            service_id: r.service_id(),
            qkey: r.qkey(),
            class_port_info: r.class_port_info(),
            private_data: r.private_data(),
        })
    }

    /// Writes a SIDR_REP (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut SidrRep<T>) -> crate::Result<()> {
        r.check_len()?;
        check_widths(Part::SidrRep, &[(8, self.qpn.into(), 24, "QPN")])?;
        r.buffer.as_mut()[..REP_INFO].fill(0);
        r.set_request_id(self.request_id);
        r.set_status(self.status);
        r.set_additional_info_length(self.additional_info_length);
        r.set_qpn(self.qpn);
        r.set_service_id(self.service_id);
        r.set_qkey(self.qkey);
        r.set_class_port_info(&self.class_port_info);
        r.set_private_data(&self.private_data);
        Ok(())
    }
}
