//! A completion channel driven by an event loop (`channel_fd.c`, built against the system's
//! verbs.h with `-libverbs` and run under `rocex run`): the channel's fd reads as ready
//! exactly while an event is owed, so that a program which polls it (tgtd's epoll) and then
//! calls `ibv_get_cq_event` never blocks there.

mod common;

use common::loopback_program;

#[test]
fn channel_fd_is_ready_only_while_an_event_is_owed() {
    let Some(prog) = loopback_program("channel_fd", include_str!("channel_fd.c"), &[]) else {
        return;
    };
    let t = prog.run_ok("127.0.41.2");
    assert_eq!(t.trim(), "ok 50", "{t}");
}
