//! Bad input through the drop-in library, from an ordinary C program built against the
//! system's verbs.h and linked with `-libverbs` (`bad_input.c`), run under `rocex run`:
//! unsupported verbs answer as rdma-core does (NULL with errno EOPNOTSUPP, or the code)
//! and `ROCEX_DEBUG=1` names each on stderr; an SRQ refuses resizing, too many SGEs and
//! more requests than its size, and takes a new request for each receive read through
//! the extended CQ (`ibv_start_poll`) as through `ibv_poll_cq`; posting in the wrong
//! state or beyond the QP's SGEs is refused with EINVAL as rxe does; bad keys and bounds
//! come back as rdma-core's completion statuses. Memory registration: three overlapping
//! MRs over one malloc'd buffer each see the bytes a peer writes through them, in the
//! program's own memory, and a forked child's writes stay in the child.

mod common;

use std::collections::BTreeMap;

use common::{text, verbs_program};

const EOPNOTSUPP: i32 = 95;
const EINVAL: i32 = 22;
const ENOMEM: i32 = 12;

#[test]
fn bad_input_gets_rdma_cores_answers() {
    let Some(prog) = verbs_program(
        "bad_input",
        include_str!("bad_input.c"),
        &["-O1", "-libverbs"],
    ) else {
        return;
    };
    let o = prog.run_on("127.0.40.1", &[("ROCEX_DEBUG", "1")]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let got: BTreeMap<&str, Vec<i32>> = t
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let k = w.next()?;
            let v = w
                .map(|x| match x {
                    "null" => 0,
                    "ok" => 1,
                    n => n.parse().unwrap_or(i32::MIN),
                })
                .collect();
            Some((k, v))
        })
        .collect();
    let want: [(&str, &[i32]); 27] = [
        ("create_srq", &[1]),
        ("resize_srq", &[EINVAL]),
        ("post_srq_too_many_sges", &[EINVAL, 1]),
        ("post_srq_ninth", &[ENOMEM, 0]),
        ("destroy_srq", &[0]),
        ("alloc_mw_type3", &[0, EINVAL]),
        ("create_cq_ex_timestamp", &[0, EOPNOTSUPP]),
        ("attach_mcast", &[EOPNOTSUPP]),
        ("create_ah_no_grh", &[0, EINVAL]),
        ("post_send_reset", &[EINVAL, 1]),
        ("post_recv_reset", &[EINVAL, 1]),
        ("modify_no_grh", &[EINVAL]),
        ("post_send_too_many_sges", &[EINVAL]),
        ("post_send_bind_mw", &[EINVAL]), // no window named
        ("write_ok", &[0]),               // IBV_WC_SUCCESS
        ("write_bad_lkey", &[4]),         // IBV_WC_LOC_PROT_ERR
        ("write_sge_out_of_mr", &[4]),    // IBV_WC_LOC_PROT_ERR
        ("write_bad_rkey", &[10]),        // IBV_WC_REM_ACCESS_ERR
        // Overlapping MRs over malloc'd memory: the first moved into a memfd, the second
        // (partly overlapping it) left in place, the third inside the first's pages.
        ("overlap_reg", &[1]),
        ("maps_memfd", &[1]),
        ("overlap_writes", &[0, 0, 0]),
        ("overlap_seen", &[1, 1, 1]),
        ("fork_private", &[1, 1]),
        ("overlap_dereg", &[0, 0, 0]),
        ("after_dereg", &[1]),
        // 12 SENDs through an SRQ of 4, each receive read with ibv_start_poll and reposted.
        ("srq_cq_ex", &[12, 12]),
        ("dealloc_busy_pd", &[16]), // EBUSY: the MR still uses it
    ];
    for (k, v) in want {
        assert_eq!(got.get(k).map(Vec::as_slice), Some(v), "{k}:\n{t}");
    }
    assert_eq!(got.get("done").map(Vec::as_slice), Some(&[1][..]), "{t}");
    // ROCEX_DEBUG=1 names each verb rocex does not offer, with the answer it gave.
    let err = String::from_utf8_lossy(&o.stderr);
    for verb in ["ibv_attach_mcast", "ibv_create_cq_ex"] {
        assert!(
            err.lines()
                .any(|l| l.starts_with(&format!("rocex: {verb}")) && l.contains("EOPNOTSUPP")),
            "no ROCEX_DEBUG line for {verb}:\n{err}"
        );
    }
}
