//! Every symbol Debian's rdma_cm programs import from librdmacm, with its version node
//! (`objdump -T` on the binaries), is exported by rocex's librdmacm under the same node:
//! the programs are linked with BIND_NOW, so one missing symbol would stop them from
//! loading at all. The rsockets programs (rcopy, riostream, rstream, udpong) are the
//! exception rocex documents: their missing imports are rsockets calls and nothing else.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `(version, symbol)` pairs of `file`'s dynamic symbols from `RDMACM_` nodes: the
/// defined ones, or the imports.
fn rdmacm_syms(file: &Path, undefined: bool) -> BTreeSet<(String, String)> {
    rocex_testkit::symbols::dynamic(file, undefined, &["RDMACM_"])
}

fn which(p: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(p))
        .find(|f| f.is_file())
        .unwrap()
}

#[test]
fn every_imported_symbol_is_exported_with_its_version() {
    let loadable = [
        "rping",
        "ucmatose",
        "udaddy",
        "mckey",
        "cmtime",
        "rdma_server",
        "rdma_client",
        "rdma_xserver",
        "rdma_xclient",
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_write_lat",
        "ib_send_lat",
        "fio",
    ];
    let rsockets = ["rcopy", "riostream", "rstream", "udpong"];
    let all: Vec<&str> = loadable.iter().chain(&rsockets).copied().collect();
    if !common::ready(&all)
        || rocex_testkit::require_tool("every_imported_symbol_is_exported", "objdump").is_none()
    {
        return;
    }
    common::bins();
    let lib = Path::new(&common::libdir()).join("librdmacm.so.1");
    let exported = rdmacm_syms(&lib, false);
    for p in loadable {
        let missing: Vec<_> = rdmacm_syms(&which(p), true)
            .difference(&exported)
            .cloned()
            .collect();
        assert!(missing.is_empty(), "{p} imports {missing:?}, not exported");
    }
    for p in rsockets {
        let missing: Vec<_> = rdmacm_syms(&which(p), true)
            .difference(&exported)
            .filter(|(_, name)| !name.starts_with('r') || name.starts_with("rdma_"))
            .cloned()
            .collect();
        assert!(missing.is_empty(), "{p} imports {missing:?}, not exported");
    }
    let o = Command::new("objdump")
        .arg("-p")
        .arg(&lib)
        .output()
        .unwrap();
    let p = String::from_utf8_lossy(&o.stdout);
    assert!(p.contains("SONAME               librdmacm.so.1"), "{p}");
    for node in ["RDMACM_1.0", "RDMACM_1.1", "RDMACM_1.2", "RDMACM_1.3"] {
        assert!(p.contains(node), "{node} is not defined:\n{p}");
    }
}
