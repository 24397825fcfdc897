//! Verbs from several threads of one process (`threads.c`, built against the system's
//! verbs.h with `-libverbs -lpthread` and run under `rocex run`): four threads run their
//! own checked SEND ping-pongs in one context while another sleeps in `ibv_get_cq_event`
//! on a CQ the main thread feeds.

mod common;

use common::run_loopback;

#[test]
fn verbs_from_several_threads_of_one_context() {
    let Some(t) = run_loopback(
        "threads",
        include_str!("threads.c"),
        &["-lpthread"],
        "127.0.41.1",
    ) else {
        return;
    };
    // 4 threads x 300 checked messages, and every fed message taken by the thread that
    // sleeps in ibv_get_cq_event, woken only by events.
    assert_eq!(t.trim(), "ok 1200 1", "{t}");
}
