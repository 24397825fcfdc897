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

pub use rocex_testkit::require_tool;
