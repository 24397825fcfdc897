//! Every symbol Debian's RDMA programs and rdma-core's own librdmacm import from
//! libibverbs, libmlx5 and libefa, with its version node (`objdump -T` on the binaries),
//! is exported by rocex's libraries under the same node: the programs are linked with
//! BIND_NOW, so one missing symbol would stop them from loading at all.

mod common;

use std::path::Path;

#[test]
fn every_imported_symbol_is_exported_with_its_version() {
    let programs = [
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_atomic_bw",
        "ib_write_lat",
        "ib_read_lat",
        "ib_send_lat",
        "ib_atomic_lat",
        "ibv_rc_pingpong",
        "ibv_uc_pingpong",
        "ibv_ud_pingpong",
        "ibv_srq_pingpong",
        "ibv_devinfo",
        "ibv_devices",
    ];
    if !common::ready(&programs) {
        return;
    }
    if rocex_testkit::require_tool(
        "every_imported_symbol_is_exported_with_its_version",
        "objdump",
    )
    .is_none()
    {
        return;
    }
    let dir = common::bins().0.parent().unwrap().to_owned();
    let libs = [
        ("libibverbs.so", &["IBVERBS_"][..]),
        ("libmlx5.so", &["MLX5_"][..]),
        ("libefa.so", &["EFA_"][..]),
    ];
    let mut importers: Vec<std::path::PathBuf> = programs
        .iter()
        .map(|p| Path::new("/usr/bin").join(p))
        .collect();
    // rdma-core's librdmacm, which perftest loads, binds libibverbs symbols at load too.
    let rdmacm = Path::new("/lib/x86_64-linux-gnu/librdmacm.so.1");
    if rdmacm.exists() {
        importers.push(rdmacm.to_owned());
    }
    let mut checked = 0;
    for (lib, nodes) in libs {
        let exported = rocex_testkit::symbols::dynamic(&dir.join(lib), false, nodes);
        for bin in &importers {
            for need in rocex_testkit::symbols::dynamic(bin, true, nodes) {
                assert!(
                    exported.contains(&need),
                    "{} imports {}@{}, which {lib} does not export",
                    bin.display(),
                    need.1,
                    need.0
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} imports checked");
}
