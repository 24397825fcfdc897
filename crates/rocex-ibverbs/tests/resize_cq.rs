//! `ibv_resize_cq` (`resize_cq.c`, built against the system's verbs.h with `-libverbs` and
//! run under `rocex run`): rxe's EINVAL cases (no entries, beyond `max_cqe`, fewer than
//! the completions waiting), completions that waited in the old ring polled first and in
//! order, and a CQ made with 4 entries grown to 64 taking 40 more receives.

mod common;

use common::{Daemon, build_c, finish, ready, text, under_rocex};

#[test]
fn resize_cq_keeps_waiting_completions_and_grows() {
    if !ready(&[]) {
        return;
    }
    let Some(prog) = build_c(
        "resize_cq",
        concat!(include_str!("rc_loopback.h"), include_str!("resize_cq.c")),
        &["-O1", "-libverbs"],
    ) else {
        return;
    };
    let d = Daemon::start("127.0.44.1");
    let o = finish(
        under_rocex(&d.sock, prog.exe.to_str().unwrap(), &[])
            .spawn()
            .unwrap(),
        "resize_cq",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(t.trim(), "ok", "{t}");
}
