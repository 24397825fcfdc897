//! A QP's traffic class (DSCP and ECN, as rdma-core's `grh.traffic_class` gives them) and
//! its DCQCN rate, for the caller that sets the one and shows the other.

use super::{Engine, VerbsError};
use crate::qp::RateState;

impl Engine {
    /// Sets the IP traffic class byte of a QP's packets: the DSCP in the upper six bits,
    /// the ECN field in the lower two (an application's `grh.traffic_class`, which
    /// `ibv_modify_qp` and `rdma_create_ah` pass whole; `modify_qp` with `AttrMask::AV`
    /// sets it from `QpAttr::traffic_class`). With ECN bits 0 and
    /// `Config::congestion.ecn`, the QP's packets are marked ECT(0).
    pub fn set_traffic_class(&mut self, qpn: u32, traffic_class: u8) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        qp.attr.traffic_class = traffic_class;
        Ok(())
    }

    /// A QP's DCQCN state: `None` while it sends at line rate (no CNP, or recovered).
    pub fn qp_rate(&self, qpn: u32) -> Result<Option<RateState>, VerbsError> {
        let qp = self.qps.get(&qpn).ok_or(VerbsError::NoSuchQp(qpn))?;
        Ok(qp.rate.state())
    }
}
