//! `ROCEX_PRIVATE_1`'s one struct: the CM event rocex's libibverbs fills in
//! `rocex_cm_poll` and rocex's librdmacm reads, defined once so that both libraries of a
//! build agree on it (`docs/verbs.md`). Not a public interface.

/// The most private data an event carries: a REP's 196 bytes (IBTA table 104), the
/// largest of REQ 56, REP 196, REJ 148, SIDR_REQ 180 and SIDR_REP 136.
pub const ROCEX_CM_PRIVATE_DATA_LEN: usize = 196;

/// A CM event as rocex's `rocex_cm_poll` returns it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rocex_cm_event {
    /// 1 connect request, 2 established, 3 rejected, 4 unreachable, 5 disconnected.
    pub kind: u32,
    /// The daemon's connection id.
    pub id: u32,
    /// `AF_INET` or `AF_INET6`.
    pub family: u32,
    /// The peer's address (IPv4 in the first 4 bytes).
    pub addr: [u8; 16],
    /// The listening port of a request.
    pub port: u16,
    /// A rejection's reason.
    pub reason: u16,
    /// Bytes of private data.
    pub private_data_len: u32,
    /// The private data of the peer's REQ (56 bytes), REP (196), REJ (148), SIDR_REQ (180)
    /// or SIDR_REP (136).
    pub private_data: [u8; ROCEX_CM_PRIVATE_DATA_LEN],
    /// The port space: 0x0106 (TCP: REQ and REP) or 0x0111 (UDP: SIDR).
    pub ps: u16,
    /// The peer's rdma_cm port (a request's), or 0.
    pub peer_port: u16,
    /// The peer's Q_Key (a SIDR_REP's), or 0.
    pub qkey: u32,
    /// The peer's QPN.
    pub remote_qpn: u32,
    /// The local QP's first send PSN.
    pub sq_psn: u32,
    /// The local QP's expected PSN.
    pub rq_psn: u32,
    /// Path MTU (`ibv_mtu`).
    pub path_mtu: u8,
    /// Initiator depth.
    pub max_rd_atomic: u8,
    /// Responder resources.
    pub max_dest_rd_atomic: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// The path's traffic class.
    pub traffic_class: u8,
}

impl Default for rocex_cm_event {
    fn default() -> Self {
        Self {
            kind: 0,
            id: 0,
            family: 0,
            addr: [0; 16],
            port: 0,
            reason: 0,
            private_data_len: 0,
            private_data: [0; ROCEX_CM_PRIVATE_DATA_LEN],
            ps: 0,
            peer_port: 0,
            qkey: 0,
            remote_qpn: 0,
            sq_psn: 0,
            rq_psn: 0,
            path_mtu: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            timeout: 0,
            traffic_class: 0,
        }
    }
}
