//! `ibv_resize_cq` (`resize_cq.c`, built against the system's verbs.h with `-libverbs` and
//! run under `rocex run`): rxe's EINVAL cases (no entries, beyond `max_cqe`, fewer than
//! the completions waiting), completions that waited in the old ring polled first and in
//! order, and a CQ made with 4 entries grown to 64 taking 40 more receives.

mod common;

use common::loopback_program;

#[test]
fn resize_cq_keeps_waiting_completions_and_grows() {
    let Some(prog) = loopback_program("resize_cq", include_str!("resize_cq.c"), &[]) else {
        return;
    };
    let t = prog.run_ok("127.0.44.1");
    assert_eq!(t.trim(), "ok", "{t}");
}
