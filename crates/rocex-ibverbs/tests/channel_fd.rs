//! A completion channel driven by an event loop (`channel_fd.c`, built against the system's
//! verbs.h with `-libverbs` and run under `rocex run`): the channel's fd reads as ready
//! exactly while an event is owed, so that a program which polls it (tgtd's epoll) and then
//! calls `ibv_get_cq_event` never blocks there.

mod common;

use common::{Daemon, build_c, finish, ready, text, under_rocex};

#[test]
fn channel_fd_is_ready_only_while_an_event_is_owed() {
    if !ready(&[]) {
        return;
    }
    let Some(prog) = build_c(
        "channel_fd",
        concat!(include_str!("rc_loopback.h"), include_str!("channel_fd.c")),
        &["-O1", "-libverbs"],
    ) else {
        return;
    };
    let d = Daemon::start("127.0.41.2");
    let o = finish(
        under_rocex(&d.sock, prog.exe.to_str().unwrap(), &[])
            .spawn()
            .unwrap(),
        "channel_fd",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert_eq!(t.trim(), "ok 50", "{t}");
}
