//! `rocex perf` and `rocex pingpong` as a user runs them: every option is checked before
//! any exchange or wait (a clear error and exit code 2), a server checks its daemon before
//! it waits for a client, and connection errors say which address they concern.
//!
//! The refusals run as servers, which would otherwise wait for a client: a check made late
//! shows as a run that had to be killed.

mod run;

use std::time::Duration;

use run::run;

/// Long enough for any refusal; a server still waiting then is the failure.
const LIMIT: Duration = Duration::from_secs(30);

/// `args` (a server, with its own port) exit 2 before waiting, saying `why`.
fn refused(args: &[&str], why: &str) {
    let mut all = args.to_vec();
    all.extend(["-p", "0"]);
    let r = run(&all, LIMIT);
    assert_eq!(r.code, Some(2), "rocex {all:?}: {r}");
    assert!(r.stderr.contains(why), "rocex {all:?}: wanted {why:?}: {r}");
    assert!(
        !r.stdout.contains("Waiting for client"),
        "rocex {all:?} waited before refusing: {r}"
    );
}

#[test]
fn perf_options_are_checked_before_the_exchange() {
    for (args, why) in [
        (&["write", "bw", "--tx-depth", "0"][..], "--tx-depth"),
        (&["write", "bw", "-t", "15001"], "--tx-depth"),
        (&["write", "bw", "--cq-mod", "0"], "--cq-mod"),
        (
            &["write", "bw", "--cq-mod", "500"],
            "--cq-mod 500 is more than the TX depth (128)",
        ),
        (
            &["write", "bw", "-t", "64", "-Q", "65"],
            "--cq-mod 65 is more than the TX depth (64)",
        ),
        (&["write", "bw", "--iters", "0"], "--iters"),
        (&["write", "bw", "--inline", "99999999"], "--inline"),
        (&["send", "bw", "--rx-depth", "0"], "--rx-depth"),
        (&["write", "bw", "--size", "0"], "--size"),
        (&["write", "bw", "--qps", "0"], "--qps"),
        (
            &["write", "bw", "--mtu", "1500"],
            "256, 512, 1024, 2048 or 4096",
        ),
        (&["write", "bw", "--duration", "0"], "--duration"),
        (
            &["read", "bw", "--inline", "64"],
            "--inline applies to write and send",
        ),
        (
            &["write", "bw", "--atomic-type", "cas"],
            "--atomic-type applies to the atomic tests",
        ),
        (&["write", "lat", "--qps", "2"], "latency tests use one QP"),
        (
            &["atomic", "bw", "-a"],
            "-a runs the write, read and send tests",
        ),
        (&["write", "bw", "-a", "-s", "64"], "--size"),
        (&["write", "bw", "-a", "-D", "2"], "--duration"),
        (&["write", "bw", "--ib-port", "2"], "--ib-port"),
    ] {
        let mut all = vec!["perf"];
        all.extend(args);
        refused(&all, why);
    }
}

#[test]
fn pingpong_options_are_checked_before_the_exchange() {
    for (args, why) in [
        (&["-r", "0"][..], "--rx-depth"),
        (&["-n", "0"], "--iters"),
        (&["-s", "3000000000"], "--size"),
        (
            &["--ud", "-s", "5000"],
            "--size 5000 with --ud: a datagram is at most the port MTU (4096)",
        ),
        (&["-m", "1500"], "256, 512, 1024, 2048 or 4096"),
        (&["-l", "16"], "--sl"),
        (&["-i", "0"], "--ib-port"),
        (&["--connect-timeout=0"], "--connect-timeout"),
    ] {
        let mut all = vec!["pingpong"];
        all.extend(args);
        refused(&all, why);
    }
}

#[test]
fn a_perf_server_checks_its_daemon_before_it_waits() {
    let sock = std::env::temp_dir().join(format!("rocex-no-daemon-{}/d.sock", std::process::id()));
    let sock = sock.to_str().unwrap();
    refused(&["perf", "write", "bw", "--socket", sock], sock);
    // The same through the environment.
    let r = run::finish(
        run::spawn(
            run::rocex()
                .args(["perf", "read", "bw", "-p", "0"])
                .env("ROCEX_SOCKET", sock),
        ),
        LIMIT,
    );
    assert_eq!(r.code, Some(2), "{r}");
    assert!(r.stderr.contains(sock), "{r}");
}

#[test]
fn a_name_that_does_not_resolve_fails_at_once() {
    // `.invalid` never resolves (RFC 2606); the run must not retry it for the connect wait.
    for tool in [&["perf", "write", "bw"][..], &["pingpong"]] {
        let mut args = tool.to_vec();
        args.extend(["no-such-host.invalid", "-p", "4791"]);
        // One lookup, however slow the resolver: far less than a connect wait.
        let r = run(&args, 4 * LIMIT);
        assert_eq!(r.code, Some(1), "rocex {args:?}: {r}");
        assert!(
            r.stderr.contains("cannot resolve no-such-host.invalid"),
            "rocex {args:?}: {r}"
        );
        assert!(!r.stderr.contains("trying again"), "rocex {args:?}: {r}");
    }
}

#[test]
fn connection_errors_name_the_address_and_port() {
    for (tool, name) in [
        (&["perf", "write", "bw"][..], "rocex perf"),
        (&["pingpong"], "rocex pingpong"),
    ] {
        let (_closed, port) = rocex_testkit::listen::refusing_port();
        let p = port.to_string();
        let mut args = tool.to_vec();
        args.extend(["127.0.0.1", "-p", &p, "--connect-timeout", "0.5"]);
        let r = run(&args, LIMIT);
        assert_eq!(r.code, Some(1), "rocex {args:?}: {r}");
        let at = format!("127.0.0.1:{port}");
        // One line saying what it waits for, then the error with the address.
        assert!(
            r.stderr.contains(&format!(
                "{name}: nothing listens on {at} yet; trying again for up to 0.5 s"
            )),
            "rocex {args:?}: {r}"
        );
        assert!(
            r.stderr.contains(&format!("cannot connect to {at}: ")),
            "rocex {args:?}: {r}"
        );
        assert_eq!(
            r.stderr.lines().count(),
            2,
            "rocex {args:?}: one waiting line and one error: {r}"
        );
    }
}

#[test]
fn a_busy_port_is_named() {
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = run(&["pingpong", "-p", &port.to_string()], LIMIT);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr
            .contains(&format!("cannot listen on 0.0.0.0:{port}: ")),
        "{r}"
    );
}
