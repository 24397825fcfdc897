//! A client given no socket finds the daemon by one rule (docs/daemon.md, "How clients find
//! the daemon"): `rocexd` started without `--socket` serves `<addr>.sock` in
//! `$ROCEX_SOCKET_DIR`, and `rocex stat` / `rocex devinfo` given no `--socket` use the only
//! daemon answering there, refuse with the directory and how to start one when none does
//! (a stale socket file counts for nothing), and list every daemon with its address when
//! several do, or, on a terminal, list them and ask which one. `Context::open` on a socket
//! no daemon serves names the socket.
//!
//! Each test has a directory of its own under the temporary directory and its own
//! addresses (127.0.9.61 to 127.0.9.63).

mod common;
mod run;

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Daemon, Rocexd};

const LIMIT: Duration = Duration::from_secs(30);

/// A fresh socket directory for `tag`.
fn socket_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocex-discovery-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `rocexd --addr addr` with `ROCEX_SOCKET_DIR=dir` and no `--socket`, killed on drop.
fn daemon(dir: &Path, addr: &str) -> Daemon {
    Rocexd::new(addr).in_socket_dir(dir).start()
}

/// `rocex args` with `ROCEX_SOCKET_DIR=dir` and no `ROCEX_SOCKET`.
fn rocex_in(dir: &Path, args: &[&str]) -> run::Ran {
    run::finish(
        run::spawn(run::rocex().args(args).env("ROCEX_SOCKET_DIR", dir)),
        LIMIT,
    )
}

#[test]
fn no_daemon_says_where_it_looked_and_how_to_start_one() {
    let dir = socket_dir("none");
    // A socket file left by a daemon that was killed: nothing answers on it.
    drop(UnixListener::bind(dir.join("127.0.9.60.sock")).unwrap());
    for cmd in ["stat", "devinfo"] {
        let r = rocex_in(&dir, &[cmd]);
        assert_eq!(r.code, Some(1), "{cmd}: {r}");
        let want = format!(
            "rocex {cmd}: no rocexd answers in {}: start one with `rocexd --addr IP` (it \
             serves {}/IP.sock)",
            dir.display(),
            dir.display()
        );
        assert!(r.stderr.contains(&want), "{cmd}: no {want:?} in {r}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_only_daemon_is_used() {
    let dir = socket_dir("one");
    let _d = daemon(&dir, "127.0.9.61");
    let r = rocex_in(&dir, &["stat", "--json"]);
    assert_eq!(r.code, Some(0), "{r}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let sock = dir.join("127.0.9.61.sock");
    assert_eq!(v["socket"], sock.to_str().unwrap(), "{r}");
    let r = rocex_in(&dir, &["devinfo"]);
    assert_eq!(r.code, Some(0), "{r}");
    assert!(r.stdout.contains("GID[  0]:\t\t127.0.9.61, RoCE v2"), "{r}");
    // $ROCEX_SOCKET names the daemon whatever the directory holds.
    let named = run::finish(
        run::spawn(
            Command::new(env!("CARGO_BIN_EXE_rocex"))
                .args(["stat", "--json"])
                .env("ROCEX_SOCKET", &sock)
                .env("ROCEX_SOCKET_DIR", "/nonexistent"),
        ),
        LIMIT,
    );
    assert_eq!(named.code, Some(0), "{named}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn several_daemons_are_listed_to_choose_from() {
    let dir = socket_dir("two");
    let _a = daemon(&dir, "127.0.9.62");
    let _b = daemon(&dir, "127.0.9.63");
    let r = rocex_in(&dir, &["stat"]);
    assert_eq!(r.code, Some(1), "{r}");
    let head = format!(
        "rocex stat: 2 rocexd answer in {}; choose one with --socket PATH or \
         ROCEX_SOCKET=PATH:",
        dir.display()
    );
    assert!(r.stderr.contains(&head), "{r}");
    for addr in ["127.0.9.62", "127.0.9.63"] {
        let line = format!("  {}/{addr}.sock  (address {addr})", dir.display());
        assert!(r.stderr.lines().any(|l| l == line), "no {line:?} in {r}");
    }
    let chosen = dir.join("127.0.9.63.sock");
    let r = rocex_in(&dir, &["devinfo", "--socket", chosen.to_str().unwrap()]);
    assert!(r.stdout.contains("127.0.9.63, RoCE v2"), "{r}");

    // At a terminal (script(1) gives it one, and types the answer) it asks.
    let test = "several_daemons_are_listed_to_choose_from";
    if let Some(script) = rocex_testkit::require_tool(test, "script") {
        let cmd = format!("'{}' devinfo", env!("CARGO_BIN_EXE_rocex"));
        let child = Command::new(script)
            .args(["-qfec", &cmd, "/dev/null"])
            .env_remove("ROCEX_SOCKET")
            .env("ROCEX_SOCKET_DIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run script");
        child.stdin.as_ref().unwrap().write_all(b"2\n").unwrap();
        let r = run::finish(child, LIMIT);
        assert_eq!(r.code, Some(0), "{r}");
        let asked = format!("  2) {}  (address 127.0.9.63)", chosen.display());
        assert!(r.stdout.contains(&asked), "{r}");
        assert!(r.stdout.contains("which one? [1-2] "), "{r}");
        assert!(r.stdout.contains("127.0.9.63, RoCE v2"), "{r}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn opening_a_socket_no_daemon_serves_names_it() {
    let sock = socket_dir("open").join("d.sock");
    let e = rocex_verbs::Context::open(&sock).unwrap_err();
    assert!(matches!(e, rocex_verbs::Error::Connect { .. }), "{e:?}");
    let want = format!("no rocexd at {} (", sock.display());
    assert!(e.to_string().contains(&want), "{e}");
    let r = run::run(&["stat", "--socket", sock.to_str().unwrap()], LIMIT);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(r.stderr.contains(&format!("rocex stat: {want}")), "{r}");
}
