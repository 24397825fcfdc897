//! libibverbs' names: the statuses `--expect` takes, and what `ibv_wc_status_str` and the C
//! probe print for a completion, so that both probes' output reads the same.

use rocex_proto::verbs::{WcOpcode, WcStatus};

use super::plan::parse_num;
use super::{Res, fatal};

/// `IBV_WC_WITH_IMM`, `IBV_WC_WITH_INV`.
pub(super) const WC_WITH_IMM: u32 = 1 << 1;
pub(super) const WC_WITH_INV: u32 = 1 << 3;

pub(super) fn status_from_name(s: &str) -> Res<i32> {
    let named = [
        ("rem_access", WcStatus::RemAccessErr),
        ("rem_inv_req", WcStatus::RemInvReqErr),
        ("rem_op", WcStatus::RemOpErr),
        ("retry_exc", WcStatus::RetryExcErr),
        ("rnr_retry_exc", WcStatus::RnrRetryExcErr),
        ("loc_prot", WcStatus::LocProtErr),
        ("wr_flush", WcStatus::WrFlushErr),
    ];
    if let Some((_, v)) = named.iter().find(|(n, _)| *n == s) {
        return Ok(*v as i32);
    }
    match parse_num(s) {
        Ok(v) => Ok(v as i32),
        Err(_) => fatal(format!("unknown status {s}")),
    }
}

/// `ibv_wc_status_str`.
pub(super) fn status_str(s: i32) -> &'static str {
    const NAMES: [&str; 22] = [
        "success",
        "local length error",
        "local QP operation error",
        "local EE context operation error",
        "local protection error",
        "Work Request Flushed Error",
        "memory management operation error",
        "bad response error",
        "local access error",
        "remote invalid request error",
        "remote access error",
        "remote operation error",
        "transport retry counter exceeded",
        "RNR retry counter exceeded",
        "local RDD violation error",
        "remote invalid RD request",
        "operation aborted",
        "invalid EE context number",
        "invalid EE context state",
        "fatal error",
        "response timeout error",
        "general error",
    ];
    usize::try_from(s)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("unknown")
}

pub(super) fn opcode_str(o: WcOpcode) -> &'static str {
    match o {
        WcOpcode::Send => "SEND",
        WcOpcode::RdmaWrite => "RDMA_WRITE",
        WcOpcode::RdmaRead => "RDMA_READ",
        WcOpcode::CompSwap => "COMP_SWAP",
        WcOpcode::FetchAdd => "FETCH_ADD",
        WcOpcode::BindMw => "BIND_MW",
        WcOpcode::LocalInv => "LOCAL_INV",
        WcOpcode::Flush => "FLUSH",
        WcOpcode::AtomicWrite => "ATOMIC_WRITE",
        WcOpcode::Recv => "RECV",
        WcOpcode::RecvRdmaWithImm => "RECV_RDMA_WITH_IMM",
    }
}
