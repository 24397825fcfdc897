//! `just install PREFIX` as a user runs it, into a fresh prefix (a build of this test's
//! profile): the installed `rocex run` finds the installed drop-in libraries, so a stock
//! `ibv_devices` lists the installed `rocexd` (started with the installed example
//! configuration, which rocexd must accept key by key), and `systemd-analyze verify`
//! accepts an instance of the installed unit. Daemon on 127.0.9.81.

mod run;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use rocex_testkit::rocexd::Rocexd;

/// The repository's root: the Justfile and packaging/.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The prefix, installed once per test process; `None` when `just` is missing (recorded
/// for `test`).
fn installed(test: &str) -> Option<&'static Path> {
    let just = rocex_testkit::require_tool(test, "just")?;
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    Some(PREFIX.get_or_init(|| {
        // Cargo's scratch directory for this package's tests: one prefix, replaced by the
        // next run.
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-prefix");
        let _ = std::fs::remove_dir_all(&prefix);
        let exe = Path::new(env!("CARGO_BIN_EXE_rocex"));
        let profile = if exe.parent().is_some_and(|d| d.ends_with("release")) {
            "release"
        } else {
            "debug"
        };
        let child = Command::new(just)
            .current_dir(root())
            .args(["install"])
            .arg(&prefix)
            .args(["--profile", profile])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run just install");
        let out = rocex_testkit::finish(child, Duration::from_secs(1200), "just install");
        assert!(
            out.status.success(),
            "just install: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        prefix
    }))
}

#[test]
fn installed_rocex_runs_ibv_devices_on_the_installed_libraries() {
    let test = "installed_rocex_runs_ibv_devices_on_the_installed_libraries";
    let Some(prefix) = installed(test) else {
        return;
    };
    if rocex_testkit::require_tool(test, "ibv_devices").is_none() {
        return;
    }
    for f in [
        "bin/rocex",
        "bin/rocexd",
        "lib/rocex/libibverbs.so.1",
        "lib/rocex/libmlx5.so.1",
        "lib/rocex/libefa.so.1",
        "lib/systemd/system/rocexd@.service",
        "share/rocex/rocexd.example.toml",
        "share/doc/rocex/daemon.md",
    ] {
        assert!(
            prefix.join(f).is_file(),
            "no {f} under {}",
            prefix.display()
        );
    }
    let libdir = run::finish(
        run::spawn(Command::new(prefix.join("bin/rocex")).arg("libdir")),
        Duration::from_secs(10),
    );
    let want = prefix.join("lib/rocex").canonicalize().unwrap();
    assert_eq!(libdir.stdout.trim(), want.to_str().unwrap(), "{libdir}");

    let dir = prefix.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    // The example configuration's settings as they are: no test options.
    let mut daemon = Rocexd::new("127.0.9.81")
        .bin(prefix.join("bin/rocexd"))
        .in_socket_dir(&dir)
        .no_spin_limit()
        .args([
            OsStr::new("--config"),
            prefix.join("share/rocex/rocexd.example.toml").as_os_str(),
        ])
        .start();
    let r = run::finish(
        run::spawn(
            Command::new(prefix.join("bin/rocex"))
                .args(["run", "--", "ibv_devices"])
                .env_remove("ROCEX_SOCKET")
                .env_remove("LD_LIBRARY_PATH")
                .env("ROCEX_SOCKET_DIR", &dir),
        ),
        Duration::from_secs(30),
    );
    daemon.kill();
    assert_eq!(r.code, Some(0), "{r}");
    // The system's libibverbs finds no device on this host; rocex's finds the daemon.
    assert!(
        r.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("rocex0")),
        "{r}"
    );
}

#[test]
fn systemd_accepts_an_instance_of_the_installed_unit() {
    let test = "systemd_accepts_an_instance_of_the_installed_unit";
    let Some(prefix) = installed(test) else {
        return;
    };
    let Some(analyze) = rocex_testkit::require_tool(test, "systemd-analyze") else {
        return;
    };
    let unit = std::fs::read_to_string(prefix.join("lib/systemd/system/rocexd@.service")).unwrap();
    let exec = format!("\"{}\" --addr \"%i\"", prefix.join("bin/rocexd").display());
    assert!(
        unit.contains(&exec),
        "the unit does not run the installed rocexd: {unit}"
    );
    for placeholder in ["@BINDIR@", "@SYSCONFDIR@", "@DOCDIR@"] {
        assert!(!unit.contains(placeholder), "{placeholder} left in {unit}");
    }
    // An instance, as `systemctl start rocexd@198.18.0.1` makes one.
    let dir = prefix.join("units");
    std::fs::create_dir_all(&dir).unwrap();
    let instance = dir.join("rocexd@198.18.0.1.service");
    std::fs::write(&instance, &unit).unwrap();
    let r = run::finish(
        run::spawn(Command::new(analyze).arg("verify").arg(&instance)),
        Duration::from_secs(60),
    );
    assert_eq!(r.code, Some(0), "{r}");
    // systemd-analyze reports a bad setting on stderr and still exits 0.
    let about_unit: Vec<&str> = r.stderr.lines().filter(|l| l.contains("rocexd@")).collect();
    assert!(about_unit.is_empty(), "{r}");
}
