//! Memory windows (`mw.c`, built against the system's verbs.h with `-libverbs` and run
//! under `rocex run`): type-2 windows bound by BIND_MW requests under `ibv_inc_rkey`'s
//! key, reached by a peer's WRITE, freed by LOCAL_INV and by the peer's SEND_WITH_INV
//! (then `IBV_WC_REM_ACCESS_ERR`); type-1 windows bound by `ibv_bind_mw` and bound again
//! while bound; the same through `ibv_wr_bind_mw` and `ibv_wr_local_inv`.

mod common;

use common::run_loopback;

#[test]
fn windows_of_both_types_are_bound_reached_and_invalidated() {
    let Some(t) = run_loopback("mw", include_str!("mw.c"), &[], "127.0.46.1") else {
        return;
    };
    assert_eq!(t.trim(), "ok", "{t}");
}
