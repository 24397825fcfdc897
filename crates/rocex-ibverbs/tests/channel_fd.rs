//! A completion channel driven by an event loop (`channel_fd.c`, built against the system's
//! verbs.h with `-libverbs` and run under `rocex run`): the channel's fd reads as ready
//! exactly while an event is owed, so that a program which polls it (tgtd's epoll) and then
//! calls `ibv_get_cq_event` never blocks there.

mod common;

use common::run_loopback;

#[test]
fn channel_fd_is_ready_only_while_an_event_is_owed() {
    let Some(t) = run_loopback(
        "channel_fd",
        include_str!("channel_fd.c"),
        &[],
        "127.0.41.2",
    ) else {
        return;
    };
    assert_eq!(t.trim(), "ok 50", "{t}");
}
