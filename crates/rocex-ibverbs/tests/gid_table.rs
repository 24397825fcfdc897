//! `ibv_query_gid_ex` and `ibv_query_gid_table` (`gid_table.c`, built against the system's
//! verbs.h with `-libverbs` and run under `rocex run`): the table rxe's port shows for an
//! address, index 0 the link-local GID of the node GUID, index 1 the IPv4-mapped address,
//! both RoCE v2, the same as `ibv_query_gid`; the kernel's errnos for what is not there.

mod common;

use common::verbs_program;

#[test]
fn gid_table_and_gid_ex_agree_with_query_gid() {
    let Some(prog) = verbs_program("gid_table", include_str!("gid_table.c"), &["-libverbs"]) else {
        return;
    };
    let t = prog.run_ok("127.0.45.1");
    // 127.0.45.1 is no interface's address here: the MAC is 02:00 and the address, whose
    // EUI-64 (universal/local bit flipped, ff:fe inserted) makes GID 0.
    assert_eq!(
        t,
        "0 fe80:0000:0000:0000:0000:7fff:fe00:2d01\n\
         1 0000:0000:0000:0000:0000:ffff:7f00:2d01\n\
         ok\n",
        "{t}"
    );
}
