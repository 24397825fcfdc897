//! Verbs from several threads of one process (`threads.c`, built against the system's
//! verbs.h with `-libverbs -lpthread` and run under `rocex run`): four threads run their
//! own checked SEND ping-pongs in one context while another sleeps in `ibv_get_cq_event`
//! on a CQ the main thread feeds.

mod common;

use std::process::Command;

use common::{Daemon, finish, ready, text, under_rocex};

#[test]
fn verbs_from_several_threads_of_one_context() {
    if !ready(&[]) {
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists()
        || Command::new("cc").arg("--version").output().is_err()
    {
        assert!(!ci, "needs cc and libibverbs-dev");
        println!("SKIPPED: needs cc and libibverbs-dev");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocex-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("threads");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/threads.c");
    let cc = Command::new("cc")
        .args([src, "-O1", "-o"])
        .arg(&exe)
        .args(["-libverbs", "-lpthread"])
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let d = Daemon::start("127.0.41.1");
    let o = finish(
        under_rocex(&d.sock, exe.to_str().unwrap(), &[])
            .spawn()
            .unwrap(),
        "threads",
    );
    let _ = std::fs::remove_dir_all(&dir);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // 4 threads x 300 checked messages, and at least one event per fed message.
    assert_eq!(t.trim(), "ok 1200 1", "{t}");
}
