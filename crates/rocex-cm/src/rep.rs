//! ConnectReply (REP, attribute 0x0013; IBTA Vol. 1 §12.6, table 110): the passive
//! side's QP, starting PSN and limits.

use crate::bits::{blocks, fields, view};
use crate::{Part, check_widths};

/// Bytes of a REP's private data.
pub const PRIVATE_DATA_LEN: usize = 196;
const PRIVATE: usize = 36;

view!(
    /// A zero-copy view of a REP (the MAD's data, after the common header).
    Rep,
    Part::Rep,
    PRIVATE + PRIVATE_DATA_LEN
);

fields!(Rep {
    /// The sender's communication ID.
    local_comm_id / set_local_comm_id: u32 = (0, 0, 32);
    /// The REQ sender's communication ID.
    remote_comm_id / set_remote_comm_id: u32 = (4, 0, 32);
    /// The sender's Q_Key.
    local_qkey / set_local_qkey: u32 = (8, 0, 32);
    /// The sender's QPN (24 bits).
    local_qpn / set_local_qpn: u32 = (12, 0, 24);
    /// Vendor ID, high byte.
    vendor_id_h / set_vendor_id_h: u8 = (15, 0, 8);
    /// Local EE context (24 bits).
    local_eecn / set_local_eecn: u32 = (16, 0, 24);
    /// Vendor ID, middle byte.
    vendor_id_m / set_vendor_id_m: u8 = (19, 0, 8);
    /// The sender's starting PSN (24 bits).
    starting_psn / set_starting_psn: u32 = (20, 0, 24);
    /// Vendor ID, low byte.
    vendor_id_l / set_vendor_id_l: u8 = (23, 0, 8);
    /// READ/atomic requests the sender accepts as responder.
    responder_resources / set_responder_resources: u8 = (24, 0, 8);
    /// READ/atomic requests the sender issues at once.
    initiator_depth / set_initiator_depth: u8 = (25, 0, 8);
    /// Target ACK delay (5 bits).
    target_ack_delay / set_target_ack_delay: u8 = (26, 0, 5);
    /// Failover accepted (2 bits).
    failover_accepted / set_failover_accepted: u8 = (26, 5, 2);
    /// End-to-end flow control.
    end_to_end_flow_control / set_end_to_end_flow_control: u8 = (26, 7, 1);
    /// RNR retry count (3 bits).
    rnr_retry_count / set_rnr_retry_count: u8 = (27, 0, 3);
    /// SRQ.
    srq / set_srq: u8 = (27, 3, 1);
    /// The sender's CA GUID.
    local_ca_guid / set_local_ca_guid: u64 = (28, 0, 64);
});

blocks!(Rep {
    /// The private data.
    private_data / set_private_data: [u8; PRIVATE_DATA_LEN] = PRIVATE;
});

/// A REP's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The sender's communication ID.
    pub local_comm_id: u32,
    /// The REQ sender's communication ID.
    pub remote_comm_id: u32,
    /// The sender's Q_Key.
    pub local_qkey: u32,
    /// The sender's QPN.
    pub local_qpn: u32,
    /// Local EE context.
    pub local_eecn: u32,
    /// The sender's starting PSN.
    pub starting_psn: u32,
    /// Vendor ID (24 bits, spread over three bytes).
    pub vendor_id: u32,
    /// READ/atomic requests the sender accepts.
    pub responder_resources: u8,
    /// READ/atomic requests the sender issues.
    pub initiator_depth: u8,
    /// Target ACK delay.
    pub target_ack_delay: u8,
    /// Failover accepted.
    pub failover_accepted: u8,
    /// End-to-end flow control.
    pub end_to_end_flow_control: bool,
    /// RNR retry count.
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// The sender's CA GUID.
    pub local_ca_guid: u64,
    /// Private data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Reads a REP.
    pub fn parse<T: AsRef<[u8]>>(r: &Rep<T>) -> crate::Result<Self> {
        r.check_len()?;
        Ok(Self {
            local_comm_id: r.local_comm_id(),
            remote_comm_id: r.remote_comm_id(),
            local_qkey: r.local_qkey(),
            local_qpn: r.local_qpn(),
            local_eecn: r.local_eecn(),
            starting_psn: r.starting_psn(),
            vendor_id: u32::from(r.vendor_id_h()) << 16
                | u32::from(r.vendor_id_m()) << 8
                | u32::from(r.vendor_id_l()),
            responder_resources: r.responder_resources(),
            initiator_depth: r.initiator_depth(),
            target_ack_delay: r.target_ack_delay(),
            failover_accepted: r.failover_accepted(),
            end_to_end_flow_control: r.end_to_end_flow_control() != 0,
            rnr_retry_count: r.rnr_retry_count(),
            srq: r.srq() != 0,
            local_ca_guid: r.local_ca_guid(),
            private_data: r.private_data(),
        })
    }

    /// Writes a REP (its reserved bits zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, r: &mut Rep<T>) -> crate::Result<()> {
        r.check_len()?;
        check_widths(
            Part::Rep,
            &[
                (12, self.local_qpn.into(), 24, "local QPN"),
                (15, self.vendor_id.into(), 24, "vendor ID"),
                (16, self.local_eecn.into(), 24, "local EECN"),
                (20, self.starting_psn.into(), 24, "starting PSN"),
                (26, self.target_ack_delay.into(), 5, "target ACK delay"),
                (26, self.failover_accepted.into(), 2, "failover accepted"),
                (27, self.rnr_retry_count.into(), 3, "RNR retry count"),
            ],
        )?;
        r.buffer.as_mut()[..PRIVATE].fill(0);
        r.set_local_comm_id(self.local_comm_id);
        r.set_remote_comm_id(self.remote_comm_id);
        r.set_local_qkey(self.local_qkey);
        r.set_local_qpn(self.local_qpn);
        r.set_vendor_id_h((self.vendor_id >> 16) as u8);
        r.set_local_eecn(self.local_eecn);
        r.set_vendor_id_m((self.vendor_id >> 8) as u8);
        r.set_starting_psn(self.starting_psn);
        r.set_vendor_id_l(self.vendor_id as u8);
        r.set_responder_resources(self.responder_resources);
        r.set_initiator_depth(self.initiator_depth);
        r.set_target_ack_delay(self.target_ack_delay);
        r.set_failover_accepted(self.failover_accepted);
        r.set_end_to_end_flow_control(u8::from(self.end_to_end_flow_control));
        r.set_rnr_retry_count(self.rnr_retry_count);
        r.set_srq(u8::from(self.srq));
        r.set_local_ca_guid(self.local_ca_guid);
        r.set_private_data(&self.private_data);
        Ok(())
    }
}
