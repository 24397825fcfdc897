//! Set-up the CM tests share.

use rocex_cm::cma;
use rocex_cm::conn::ConnectParams;
use rocex_proto::verbs::Mtu;

/// What rdma_cm's `rdma_connect` asks for from QP `qpn` to port 7174 of the TCP port space
/// (one READ each way, seven retries, a 1024-byte MTU), its private data led by rdma_cm's
/// header `hdr`.
pub(crate) fn connect_params(qpn: u32, starting_psn: u32, hdr: &cma::Repr) -> ConnectParams {
    let mut private_data = [0u8; rocex_cm::req::PRIVATE_DATA_LEN];
    hdr.emit(&mut cma::Hdr::new_unchecked(&mut private_data[..]))
        .unwrap();
    ConnectParams {
        qpn,
        starting_psn,
        service_id: cma::service_id(cma::PS_TCP, 7174),
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        path_mtu: Mtu::M1024,
        traffic_class: 0,
        private_data,
    }
}
