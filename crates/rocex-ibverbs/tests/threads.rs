//! Verbs from several threads of one process (`threads.c`, built against the system's
//! verbs.h with `-libverbs -lpthread` and run under `rocex run`): four threads run their
//! own checked SEND ping-pongs in one context while another sleeps in `ibv_get_cq_event`
//! on a CQ the main thread feeds.

mod common;

use common::{Daemon, build_c, finish, ready, text, under_rocex};

#[test]
fn verbs_from_several_threads_of_one_context() {
    if !ready(&[]) {
        return;
    }
    let Some(prog) = build_c(
        "threads",
        concat!(include_str!("rc_loopback.h"), include_str!("threads.c")),
        &["-O1", "-libverbs", "-lpthread"],
    ) else {
        return;
    };
    let d = Daemon::start("127.0.41.1");
    let o = finish(
        under_rocex(&d.sock, prog.exe.to_str().unwrap(), &[])
            .spawn()
            .unwrap(),
        "threads",
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // 4 threads x 300 checked messages, and at least one event per fed message.
    assert_eq!(t.trim(), "ok 1200 1", "{t}");
}
