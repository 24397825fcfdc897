//! `rocex perf` between two daemons: the `rocex` next to `rocexd`
//! (`rocex_testkit::bins::rocex`), a server on one daemon listening on a port the kernel
//! picks and a client on the other exchanging over 127.0.0.1, and the JSON each prints.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rocex_testkit::listen::{self, Proto};

use super::Daemon;

/// How long one side of one test may take: a stalled side gives up after 30 s of no
/// progress on its own.
const LIMIT: Duration = Duration::from_secs(180);

/// The one JSON object `rocex perf --json` printed, as its keys and raw values. The
/// object is flat and its strings hold no commas or colons, so splitting parses it.
fn perf_json(o: &Output, who: &str) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{who} failed: {}{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{who} printed more than one line: {text}");
    let body = lines[0]
        .trim()
        .strip_prefix('{')
        .and_then(|b| b.strip_suffix('}'))
        .unwrap_or_else(|| panic!("{who}: not a JSON object: {text}"));
    body.split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once(':')
                .unwrap_or_else(|| panic!("{who}: bad JSON member {kv:?}"));
            (k.trim().trim_matches('"').to_owned(), v.trim().to_owned())
        })
        .collect()
}

/// `rocex perf OP TEST -n ITERS ARGS --verify --json` with its server on daemon 1 and its
/// client on daemon 0; the exchange runs over 127.0.0.1 in the root namespace. Both ends
/// must have verified every iteration, except the server of a READ or atomic latency
/// test, which is passive and counts none (`rocex perf`'s `lat.rs`).
pub(crate) fn perf(d: &[Daemon; 2], op: &str, test: &str, args: &[&str], iters: u64) {
    let iters_arg = iters.to_string();
    let cmd = |sock: &Path| {
        let mut c = Command::new(rocex_testkit::bins::rocex());
        c.args(["perf", op, test, "-n", &iters_arg])
            .args(args)
            .args(["--verify", "--json", "--socket"])
            .arg(sock)
            .env_remove("ROCEX_SOCKET")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    let what = format!("{op} {test}");
    let mut server = cmd(&d[1].sock)
        .args(["-p", "0"])
        .spawn()
        .expect("start the perf server");
    let who = format!("{what} server");
    let port = listen::wait_bound(&mut server, Proto::Tcp, LIMIT, &who)
        .port()
        .to_string();
    let client = cmd(&d[0].sock)
        .args(["-p", &port, "127.0.0.1"])
        .spawn()
        .expect("start the perf client");
    let c = rocex_testkit::finish(client, LIMIT, &format!("{what} client"));
    let s = rocex_testkit::finish(server, LIMIT, &format!("{what} server"));
    let c = perf_json(&c, &format!("{what} client"));
    let s = perf_json(&s, &format!("{what} server"));
    let passive = test == "lat" && matches!(op, "read" | "atomic");
    for (who, v) in [("client", &c), ("server", &s)] {
        let counted = if who == "server" && passive { 0 } else { iters };
        let want = [
            ("op", format!("\"{op}\"")),
            ("test", format!("\"{test}\"")),
            ("verified", "true".into()),
            ("errors", "0".into()),
            ("iters", counted.to_string()),
        ];
        for (k, val) in &want {
            assert_eq!(v.get(*k), Some(val), "{what} {who}: {k} in {v:?}");
        }
    }
}
