//! The skip rule as a test binary sees it: each case runs this binary again with its own
//! environment (a test cannot change its own process's environment safely).

use std::process::{Command, Output};

/// Runs `case` (a test of this binary that calls `cannot_run`) with `CI` and the ledger set.
fn run_case(case: &str, ci: Option<&str>, ledger: &std::path::Path) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", case, "--ignored", "--nocapture"])
        .env(rocex_testkit::SKIP_LOG, ledger)
        .env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    cmd.output().unwrap()
}

#[test]
#[ignore = "run by the tests below in a child process"]
fn child_needs_a_missing_tool() {
    assert!(rocex_testkit::require_tool("child", "no-such-tool-rocex").is_none());
}

#[test]
fn outside_ci_a_skip_is_printed_and_recorded() {
    let dir = std::env::temp_dir().join(format!("rocex-testkit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for ci in [None, Some(""), Some("false")] {
        let ledger = dir.join("skips.log");
        let _ = std::fs::remove_file(&ledger);
        let out = run_case("child_needs_a_missing_tool", ci, &ledger);
        assert!(out.status.success(), "CI={ci:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("SKIPPED: child needs `no-such-tool-rocex`"),
            "{stderr}"
        );
        let logged = std::fs::read_to_string(&ledger).unwrap();
        assert_eq!(logged.lines().count(), 1, "{logged}");
        assert!(logged.starts_with("SKIPPED: child needs `no-such-tool-rocex`"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn in_ci_a_test_that_cannot_run_fails() {
    let dir = std::env::temp_dir().join(format!("rocex-testkit-ci-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ledger = dir.join("skips.log");
    for ci in ["true", "1"] {
        let out = run_case("child_needs_a_missing_tool", Some(ci), &ledger);
        assert!(!out.status.success(), "CI={ci} must fail: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("which CI must provide"), "{stderr}");
    }
    assert!(!ledger.exists(), "a failure is not a skip");
    std::fs::remove_dir_all(&dir).unwrap();
}
