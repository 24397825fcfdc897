//! ConnectRequest (REQ, attribute 0x0010; IBTA Vol. 1 §12.6, table 106): the active
//! side's QP, starting PSN, limits and path, and the private data rdma_cm fills with its
//! addressing header ([`crate::cma`]).

use crate::bits::{blocks, fields, view};
use crate::path::{self, Path};
use crate::{Part, check_widths};

/// Bytes of a REQ's private data.
pub const PRIVATE_DATA_LEN: usize = 92;
const PRIMARY: usize = 52;
const ALTERNATE: usize = 96;
const PRIVATE: usize = 140;

view!(
    /// A zero-copy view of a REQ (the MAD's data, after the common header).
    Req,
    Part::Req,
    PRIVATE + PRIVATE_DATA_LEN
);

fields!(Req {
    /// The sender's communication ID.
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// Vendor ID (24 bits).
    vendor_id / set_vendor_id: u32 = (5, 0, 24);
    /// Service ID: rdma_cm's port space and port.
    service_id / set_service_id: u64 = (8, 0, 64);
    /// The sender's CA GUID.
    local_ca_guid / set_local_ca_guid: u64 = (16, 0, 64);
    /// The sender's Q_Key.
    local_qkey / set_local_qkey: u32 = (28, 0, 32);
    /// The sender's QPN (24 bits).
    local_qpn / set_local_qpn: u32 = (32, 0, 24);
    /// READ/atomic requests the sender accepts as responder.
    responder_resources / set_responder_resources: u8 = (35, 0, 8);
    /// Local EECN (24 bits).
    local_eecn / set_local_eecn: u32 = (36, 0, 24);
    /// READ/atomic requests the sender issues at once.
    initiator_depth / set_initiator_depth: u8 = (39, 0, 8);
    /// Remote EECN (24 bits).
    remote_eecn / set_remote_eecn: u32 = (40, 0, 24);
    /// How long the passive side may take to answer (exponent, 5 bits).
    remote_cm_response_timeout / set_remote_cm_response_timeout: u8 = (43, 0, 5);
    /// Transport service type (2 bits; 0 = RC).
    transport_service_type / set_transport_service_type: u8 = (43, 5, 2);
    /// End-to-end flow control.
    end_to_end_flow_control / set_end_to_end_flow_control: u8 = (43, 7, 1);
    /// The sender's starting PSN (24 bits).
    starting_psn / set_starting_psn: u32 = (44, 0, 24);
    /// How long the active side may take to answer (exponent, 5 bits).
    local_cm_response_timeout / set_local_cm_response_timeout: u8 = (47, 0, 5);
    /// Transport retry count (3 bits).
    retry_count / set_retry_count: u8 = (47, 5, 3);
    /// Partition key.
    partition_key / set_partition_key: u16 = (48, 0, 16);
    /// Path MTU (4 bits, IBTA's encoding: 1 = 256 .. 5 = 4096).
    path_mtu / set_path_mtu: u8 = (50, 0, 4);
    /// RDC exists.
    rdc_exists / set_rdc_exists: u8 = (50, 4, 1);
    /// RNR retry count (3 bits).
    rnr_retry_count / set_rnr_retry_count: u8 = (50, 5, 3);
    /// How often the CM resends a message (4 bits).
    max_cm_retries / set_max_cm_retries: u8 = (51, 0, 4);
    /// SRQ.
    srq / set_srq: u8 = (51, 4, 1);
    /// Extended transport type (3 bits).
    extended_transport_type / set_extended_transport_type: u8 = (51, 5, 3);
    /// Alternate path: SAP supported.
    sap_supported / set_sap_supported: u8 = (139, 5, 1);
});

impl<T: AsRef<[u8]>> Req<T> {
    /// The primary path.
    pub fn primary_path(&self) -> Path<&[u8]> {
        Path::new_unchecked(&self.buffer.as_ref()[PRIMARY..ALTERNATE])
    }
    /// The alternate path.
    pub fn alternate_path(&self) -> Path<&[u8]> {
        Path::new_unchecked(&self.buffer.as_ref()[ALTERNATE..PRIVATE])
    }
}

blocks!(Req {
    /// The private data.
    private_data / set_private_data: [u8; PRIVATE_DATA_LEN] = PRIVATE;
});

impl<T: AsRef<[u8]> + AsMut<[u8]>> Req<T> {
    fn path_mut(&mut self, at: usize) -> Path<&mut [u8]> {
        Path::new_unchecked(&mut self.buffer.as_mut()[at..at + 44])
    }
}

/// A REQ's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// Vendor ID.
    pub vendor_id: u32,
    /// Service ID.
    pub service_id: u64,
    /// The sender's CA GUID.
    pub local_ca_guid: u64,
    /// The sender's Q_Key.
    pub local_qkey: u32,
    /// The sender's QPN.
    pub local_qpn: u32,
    /// READ/atomic requests the sender accepts.
    pub responder_resources: u8,
    /// Local EECN.
    pub local_eecn: u32,
    /// READ/atomic requests the sender issues.
    pub initiator_depth: u8,
    /// Remote EECN.
    pub remote_eecn: u32,
    /// Passive side's response timeout exponent.
    pub remote_cm_response_timeout: u8,
    /// Transport service type (0 = RC, 1 = UC).
    pub transport_service_type: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// The sender's starting PSN.
    pub starting_psn: u32,
    /// Active side's response timeout exponent.
    pub local_cm_response_timeout: u8,
    /// Transport retry count.
    pub retry_count: u8,
    /// Partition key.
    pub partition_key: u16,
    /// Path MTU (IBTA encoding).
    pub path_mtu: u8,
    /// RDC exists.
    pub rdc_exists: bool,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// CM retries.
    pub max_cm_retries: u8,
    /// SRQ.
    pub srq: bool,
    /// Extended transport type.
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary_path: path::Repr,
    /// Alternate path (all zero when there is none).
    pub alternate_path: path::Repr,
    /// SAP supported.
    pub sap_supported: bool,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a REQ.
    pub fn parse<T: AsRef<[u8]>>(r: &Req<T>) -> crate::Result<Self> {
        r.check_len()?;
        Ok(Self {
            local_comm_id: r.local_comm_id(),
            vendor_id: r.vendor_id(),
            service_id: r.service_id(),
            local_ca_guid: r.local_ca_guid(),
            local_qkey: r.local_qkey(),
            local_qpn: r.local_qpn(),
            responder_resources: r.responder_resources(),
            local_eecn: r.local_eecn(),
            initiator_depth: r.initiator_depth(),
            remote_eecn: r.remote_eecn(),
            remote_cm_response_timeout: r.remote_cm_response_timeout(),
            transport_service_type: r.transport_service_type(),
            end_to_end_flow_control: r.end_to_end_flow_control() != 0,
            starting_psn: r.starting_psn(),
            local_cm_response_timeout: r.local_cm_response_timeout(),
            retry_count: r.retry_count(),
            partition_key: r.partition_key(),
            path_mtu: r.path_mtu(),
            rdc_exists: r.rdc_exists() != 0,
            rnr_retry_count: r.rnr_retry_count(),
            max_cm_retries: r.max_cm_retries(),
            srq: r.srq() != 0,
            extended_transport_type: r.extended_transport_type(),
            primary_path: path::Repr::parse(&r.primary_path())?,
            alternate_path: path::Repr::parse(&r.alternate_path())?,
            sap_supported: r.sap_supported() != 0,
            private_data: r.private_data(),
        })
    }

    /// Writes a REQ (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut Req<T>) -> crate::Result<()> {
        r.check_len()?;
        check_widths(
            Part::Req,
            &[
                (5, self.vendor_id.into(), 24, "vendor ID"),
                (32, self.local_qpn.into(), 24, "local QPN"),
                (36, self.local_eecn.into(), 24, "local EECN"),
                (40, self.remote_eecn.into(), 24, "remote EECN"),
                (
                    43,
                    self.remote_cm_response_timeout.into(),
                    5,
                    "remote CM response timeout",
                ),
                (
                    43,
                    self.transport_service_type.into(),
                    2,
                    "transport service type",
                ),
                (44, self.starting_psn.into(), 24, "starting PSN"),
                (
                    47,
                    self.local_cm_response_timeout.into(),
                    5,
                    "local CM response timeout",
                ),
                (47, self.retry_count.into(), 3, "retry count"),
                (50, self.path_mtu.into(), 4, "path MTU"),
                (50, self.rnr_retry_count.into(), 3, "RNR retry count"),
                (51, self.max_cm_retries.into(), 4, "max CM retries"),
                (
                    51,
                    self.extended_transport_type.into(),
                    3,
                    "extended transport type",
                ),
            ],
        )?;
        self.primary_path
            .emit(&mut r.path_mut(PRIMARY))
            .map_err(|e| e.shifted(PRIMARY))?;
        self.alternate_path
            .emit(&mut r.path_mut(ALTERNATE))
            .map_err(|e| e.shifted(ALTERNATE))?;
        r.buffer.as_mut()[..PRIMARY].fill(0);
        r.set_local_comm_id(self.local_comm_id);
        r.set_vendor_id(self.vendor_id);
        r.set_service_id(self.service_id);
        r.set_local_ca_guid(self.local_ca_guid);
        r.set_local_qkey(self.local_qkey);
        r.set_local_qpn(self.local_qpn);
        r.set_responder_resources(self.responder_resources);
        r.set_local_eecn(self.local_eecn);
        r.set_initiator_depth(self.initiator_depth);
        r.set_remote_eecn(self.remote_eecn);
        r.set_remote_cm_response_timeout(self.remote_cm_response_timeout);
        r.set_transport_service_type(self.transport_service_type);
        r.set_end_to_end_flow_control(u8::from(self.end_to_end_flow_control));
        r.set_starting_psn(self.starting_psn);
        r.set_local_cm_response_timeout(self.local_cm_response_timeout);
        r.set_retry_count(self.retry_count);
        r.set_partition_key(self.partition_key);
        r.set_path_mtu(self.path_mtu);
        r.set_rdc_exists(u8::from(self.rdc_exists));
        r.set_rnr_retry_count(self.rnr_retry_count);
        r.set_max_cm_retries(self.max_cm_retries);
        r.set_srq(u8::from(self.srq));
        r.set_extended_transport_type(self.extended_transport_type);
        r.set_sap_supported(u8::from(self.sap_supported));
        r.set_private_data(&self.private_data);
        Ok(())
    }
}
