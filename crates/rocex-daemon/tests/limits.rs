//! Per-client limits (`--max-qps` ... `--max-pds`, `[limits]` in the file): each is
//! reached, refused with `Error::Limit` naming its key, counted, and freed again when the
//! client lets go; other clients keep their own allowance. Daemons on 127.0.6.5 and
//! 127.0.6.6.

mod common;

use common::{RDMA_ACCESS, ring_daemon_at, socket_in};
use rocex_verbs::verbs::{QpCap, QpType};
use rocex_verbs::{Context, Error, QpInitAttr};

fn is_limit(r: Result<impl std::fmt::Debug, Error>, key: &str) {
    match r {
        Err(Error::Limit { key: k, detail }) => {
            assert_eq!(k, key, "{detail}");
            assert!(detail.contains("per-client limit"), "{detail}");
        }
        other => panic!("expected the {key} limit, got {other:?}"),
    }
}

#[test]
fn every_limit_is_enforced_per_client() {
    let sock = socket_in("limits");
    let _d = ring_daemon_at(
        "127.0.6.5",
        &sock,
        &[
            "--max-pds",
            "2",
            "--max-cqs",
            "3",
            "--max-qps",
            "2",
            "--max-mrs",
            "4",
            "--max-mr-bytes",
            "64K",
        ],
    );
    let ctx = Context::open(&sock).unwrap();

    // PDs: two, then refused; freeing one makes room.
    let pd = ctx.alloc_pd().unwrap();
    let pd2 = ctx.alloc_pd().unwrap();
    is_limit(ctx.alloc_pd(), "max_pds");
    drop(pd2);
    let _pd2 = ctx.alloc_pd().unwrap();

    // CQs: three.
    let cqs: Vec<_> = (0..3).map(|_| ctx.create_cq(16, None).unwrap()).collect();
    is_limit(ctx.create_cq(16, None), "max_cqs");

    // QPs: two.
    let init = QpInitAttr {
        qp_type: QpType::Rc,
        send_cq: &cqs[0],
        recv_cq: &cqs[1],
        cap: QpCap::default(),
    };
    let qp1 = pd.create_qp(&init).unwrap();
    let _qp2 = pd.create_qp(&init).unwrap();
    is_limit(pd.create_qp(&init), "max_qps");
    drop(qp1);
    let _qp3 = pd.create_qp(&init).unwrap();

    // Registered bytes: 64 KiB in all; an MR that would pass them is refused.
    let big = pd.alloc_mr(48 << 10, RDMA_ACCESS).unwrap();
    is_limit(pd.alloc_mr(32 << 10, RDMA_ACCESS), "max_mr_bytes");
    let small = pd.alloc_mr(16 << 10, RDMA_ACCESS).unwrap();
    is_limit(pd.alloc_mr(4096, RDMA_ACCESS), "max_mr_bytes");
    drop(big);

    // MRs: four, whatever their size.
    let mrs: Vec<_> = (0..3)
        .map(|_| pd.alloc_mr(4096, RDMA_ACCESS).unwrap())
        .collect();
    is_limit(pd.alloc_mr(4096, RDMA_ACCESS), "max_mrs");
    drop((small, mrs));

    // Another client has its own allowance.
    let other = Context::open(&sock).unwrap();
    let opd = other.alloc_pd().unwrap();
    let _opd2 = other.alloc_pd().unwrap();
    is_limit(other.alloc_pd(), "max_pds");
    let _m = opd.alloc_mr(64 << 10, RDMA_ACCESS).unwrap();

    // Refusals are counted.
    let st = ctx.stats().unwrap();
    assert_eq!(st.get_counter("daemon", "over_limit"), Some(7));
}

#[test]
fn limits_come_from_the_config_file_and_flags_win() {
    let sock = socket_in("limits-file");
    let cfg = sock.with_file_name("rocexd.toml");
    std::fs::write(&cfg, "[limits]\nmax_pds = 1\nmax_cqs = 1\n").unwrap();
    let _d = ring_daemon_at(
        "127.0.6.6",
        &sock,
        &["--config", cfg.to_str().unwrap(), "--max-cqs", "2"],
    );
    let ctx = Context::open(&sock).unwrap();
    let _pd = ctx.alloc_pd().unwrap();
    is_limit(ctx.alloc_pd(), "max_pds");
    let _c1 = ctx.create_cq(8, None).unwrap();
    let _c2 = ctx.create_cq(8, None).unwrap();
    is_limit(ctx.create_cq(8, None), "max_cqs");
}
