//! Counters, named as rxe names its hw_counters where rxe has the counter, and a named
//! reason for every packet the engine drops.

macro_rules! counters {
    (
        $(#[$sdoc:meta])* struct $counters:ident;
        $( $(#[$doc:meta])* $name:ident ),* $(,)?
    ) => {
        $(#[$sdoc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $counters {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl $counters {
            /// Every counter with its name, in a fixed order.
            pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($name), self.$name) ),*].into_iter()
            }
        }
    };
}

counters! {
    /// Engine counters; `iter` yields them by name.
    struct Counters;
    /// Packets sent.
    sent_pkts,
    /// Packets received and parsed.
    rcvd_pkts,
    /// Requests received with a PSN already seen.
    duplicate_request,
    /// Requests received ahead of the expected PSN.
    out_of_seq_request,
    /// Selective repeat: READs answered past a hole that holds only READs.
    sr_reads_early,
    /// RNR NAKs received.
    rcvd_rnr_err,
    /// RNR NAKs sent.
    send_rnr_err,
    /// PSN sequence NAKs received.
    rcvd_seq_err,
    /// Retries after a timeout, a sequence NAK or a lost response.
    completer_retry_err,
    /// Requests failed with RETRY_EXC_ERR.
    retry_exceeded_err,
    /// Requests failed with RNR_RETRY_EXC_ERR.
    retry_rnr_exceeded_err,
    /// Work requests that completed in error.
    send_err,
    /// SEND messages sent.
    rdma_sends,
    /// SEND messages received.
    rdma_recvs,
    /// Packets sent again by go-back-N.
    retransmitted_pkts,
    /// NAKs sent: invalid request.
    nak_invalid_request,
    /// NAKs sent: remote access error.
    nak_remote_access,
    /// NAKs sent: remote operational error.
    nak_remote_operation,
    /// NAKs sent: PSN sequence error.
    nak_psn_sequence,
    /// Dropped: the transport headers did not parse.
    drop_malformed,
    /// Dropped: the ICRC did not match.
    drop_icrc,
    /// Dropped: no QP with the destination QPN.
    drop_no_qp,
    /// Dropped: the QP's state does not accept packets.
    drop_qp_state,
    /// Dropped: the opcode's transport does not match the QP type.
    drop_wrong_transport,
    /// Dropped: not from the connected peer's address.
    drop_wrong_source,
    /// Dropped: an acknowledgement of PSNs never sent.
    drop_ghost_ack,
    /// Dropped: an acknowledgement of PSNs already acknowledged.
    drop_duplicate_ack,
    /// Dropped: a response that fits no outstanding request.
    drop_unexpected_response,
    /// Dropped: out-of-sequence requests after the one PSN NAK per gap.
    drop_out_of_seq,
    /// Dropped: a duplicate READ or atomic with no saved resource.
    drop_no_resource,
    /// Dropped: UD packet with the wrong Q_Key.
    drop_bad_qkey,
    /// Dropped: UC/UD packet that could not be placed (no receive WQE, length, key).
    drop_unreliable,
    /// CE-marked packets received by RC and UC QPs (mlx5's name, as the next three).
    np_ecn_marked_roce_packets,
    /// CNPs sent (DCQCN's notification point).
    np_cnp_sent,
    /// CNPs received that slowed a QP down (DCQCN's reaction point).
    rp_cnp_handled,
    /// CNPs received for a QP that does not react (UD, or the reaction point off).
    rp_cnp_ignored,
}

counters! {
    /// One QP's share of the transport's retransmissions, RNR and sequence NAKs and duplicate
    /// requests, under the names of the device counters that count the same events, since the
    /// QP was created ([`QpStatus::counters`](crate::QpStatus::counters)).
    #[derive(Copy)]
    struct QpCounters;
    /// Packets sent again: after a timeout, a sequence NAK or an RNR NAK (go-back-N).
    retransmitted_pkts,
    /// RNR NAKs received.
    rcvd_rnr_err,
    /// RNR NAKs sent.
    send_rnr_err,
    /// PSN sequence NAKs received.
    rcvd_seq_err,
    /// PSN sequence NAKs sent.
    nak_psn_sequence,
    /// Requests received with a PSN already seen.
    duplicate_request,
}
