//! An in-process engine beside a `rocexd` on the same address is refused at once, with the
//! address and the daemon that holds it, instead of sharing UDP port 4791 with it and
//! losing half its packets: a `rocex pingpong` server whose out-of-band connection arrives
//! on the daemon's address (127.0.9.92) exits 1 naming the daemon.

mod common;
mod run;

use std::time::Duration;

use common::daemon;
use run::{finish, rocex, serve, spawn};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn an_engine_on_a_daemons_address_is_refused_naming_the_daemon() {
    let d = daemon("127.0.9.92", &[]);
    let (server, port) = serve(rocex().args(["pingpong", "-n", "3"]));
    // The server's engine takes the address the client reached it on: the daemon's.
    let client = finish(
        spawn(rocex().args(["pingpong", "-n", "3", "-p", &port, "127.0.9.92"])),
        LIMIT,
    );
    let server = finish(server, LIMIT);
    assert_eq!(server.code, Some(1), "{server}");
    let want = "rocex pingpong: UDP 127.0.9.92:4791 is already in use by pid ";
    assert!(server.stderr.contains(want), "{server}");
    assert!(
        server
            .stderr
            .contains(&format!("--socket {}", d.sock.display())),
        "the daemon's command line is named: {server}"
    );
    assert_ne!(client.code, Some(0), "{client}");
}
