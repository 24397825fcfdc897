//! Helpers for the conformance tests in `tests/`: where the captures are, and whether a
//! missing tool may skip a test.

use std::path::{Path, PathBuf};

/// The repository's `pcaps/` folder.
pub fn pcaps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps")
}

/// Every capture in `pcaps/` (`.pcap` and `.pcapng`), sorted by name.
pub fn captures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(pcaps_dir())
        .expect("pcaps/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng"))
        .collect();
    v.sort();
    v
}

/// The file name of a capture, for messages and snapshot names.
pub fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether this run is CI, where a missing external tool fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Finds an external program, or says why the test cannot run: in CI a panic, elsewhere a
/// skip notice (the README says how to install what the tests need).
pub fn require_tool(tool: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(!in_ci(), "{tool} is required in CI but is not installed");
        eprintln!("SKIPPED: {tool} is not installed (`just deps` installs it)");
    }
    found
}
