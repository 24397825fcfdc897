//! Debian's rdma_xclient and rdma_xserver (RC) on two rocex hosts (`common::Hosts`), each
//! under `rocex run`. rdma_xclient creates its QP with one send SGE and no inline data,
//! then posts its 16-byte message with `IBV_SEND_INLINE`: rxe sizes a send WQE to hold the
//! larger of the SGEs and the inline data (`rxe_init_sq`), so one SGE grants 16 inline
//! bytes, and the drop-in libibverbs grants what rxe does (docs/verbs.md). The server ends
//! only once that message has completed on its receive queue.

mod common;

use common::Hosts;

#[test]
fn rdma_xclient_sends_sixteen_bytes_inline_on_a_one_sge_qp() {
    let Some(h) = Hosts::up(20, &["rdma_xserver", "rdma_xclient"]) else {
        return;
    };
    let (c, s) = h.server_and_client(("rdma_xserver", &[]), ("rdma_xclient", &["-s", &h.addr[1]]));
    let (ct, st) = (common::text(&c), common::text(&s));
    // Refused inline data would print rdma_post_send's perror and end with EINVAL (22).
    assert!(
        c.status.success() && ct.contains("rdma_xclient: end 0") && !ct.contains("post_send"),
        "{ct}\n{st}"
    );
    assert!(
        s.status.success() && st.contains("rdma_xserver: end 0"),
        "{ct}\n{st}"
    );
}
