//! `ibv_resize_cq` (`resize_cq.c`, built against the system's verbs.h with `-libverbs` and
//! run under `rocex run`): rxe's EINVAL cases (no entries, beyond `max_cqe`, fewer than
//! the completions waiting), completions that waited in the old ring polled first and in
//! order, and a CQ made with 4 entries grown to 64 taking 40 more receives.

mod common;

use common::run_loopback;

#[test]
fn resize_cq_keeps_waiting_completions_and_grows() {
    let Some(t) = run_loopback("resize_cq", include_str!("resize_cq.c"), &[], "127.0.44.1") else {
        return;
    };
    assert_eq!(t.trim(), "ok", "{t}");
}
