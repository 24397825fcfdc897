//! The workspace's programs a test runs but its own package does not build (`rocexd` for
//! the client crates' tests, `rocex` for the daemon's), built on first use with the cargo
//! that runs the tests, into the same target directory and profile: a no-op when they are
//! up to date, as under `cargo test --workspace`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `target/<profile>` of the running test binary (which lives in its `deps/`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_owned()
}

/// `cargo build -q ARGS` into this test binary's target directory and profile; returns
/// the profile's directory, where the binaries and libraries land.
///
/// # Panics
///
/// When cargo cannot run or the build fails: the test cannot go on.
pub fn cargo_build(args: &[&str]) -> PathBuf {
    let dir = profile_dir();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q"])
        .args(args)
        .arg("--target-dir")
        .arg(dir.parent().expect("the target directory"))
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    match dir.file_name().and_then(|s| s.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(p) => {
            cmd.args(["--profile", p]);
        }
    }
    let st = cmd.status().expect("run cargo build");
    assert!(st.success(), "cargo build {args:?} failed");
    dir
}

/// A binary of the workspace: the path in `$var` if set, else `bin` of `package`, built once
/// per test process.
fn built(cell: &'static OnceLock<PathBuf>, var: &str, package: &str, bin: &str) -> &'static Path {
    cell.get_or_init(|| {
        if let Some(p) = std::env::var_os(var) {
            return PathBuf::from(p);
        }
        let path = cargo_build(&["-p", package, "--bin", bin]).join(bin);
        assert!(path.exists(), "no {bin} at {}", path.display());
        path
    })
}

/// The `rocexd` binary: `$ROCEXD`, else built (the daemon's own tests have
/// `CARGO_BIN_EXE_rocexd` and pass it to [`Rocexd::bin`](crate::rocexd::Rocexd::bin)).
pub fn rocexd() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    built(&BIN, "ROCEXD", "rocex-daemon", "rocexd")
}

/// The `rocex` command: `$ROCEX_BIN`, else built.
pub fn rocex() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    built(&BIN, "ROCEX_BIN", "rocex-cli", "rocex")
}
