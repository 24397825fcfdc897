//! Failure semantics: a peer that goes silent mid-transfer.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use rocex_proto::verbs::{Mtu, QpState, SendOp, WcStatus};
use rocex_sim::Link;

/// The peer dies (nothing it sends arrives any more): the requester retries retry_cnt
/// times at the ACK timeout and then fails the oldest request with RETRY_EXC_ERR, flushing
/// everything after it with WR_FLUSH_ERR, within the time timeout and retry_cnt give.
#[test]
fn a_dead_peer_ends_in_retry_exc_err_in_bounded_time() {
    let params = Params {
        mtu: Mtu::M1024,
        timeout: 10,
        retry_cnt: 3,
        ..Params::default()
    };
    let mut p = Pair::new(11, Link::with_delay(Duration::from_micros(10)), params);
    let (a, b) = (p.side('a'), p.side('b'));
    // A few writes complete, then B falls silent.
    for i in 0..4 {
        p.post(&a, i, SendOp::Write(remote(&b, 0)), 0, 4096);
    }
    assert_ok(&p.completions(&a, 4, Duration::from_millis(10)));
    let dead = Rc::new(Cell::new(true));
    let d = dead.clone();
    p.fabric
        .intercept(move |from, _, _| !(d.get() && from == b.node));
    let died_at = p.now();
    for i in 10..20 {
        p.post(&a, i, SendOp::Write(remote(&b, 0)), 0, 4096);
    }
    let wcs = p.completions(&a, 10, Duration::from_secs(1));
    let took = p.now() - died_at;
    assert_eq!(wcs.len(), 10);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (10, WcStatus::RetryExcErr));
    assert!(
        wcs[1..].iter().all(|w| w.status == WcStatus::WrFlushErr),
        "{wcs:?}"
    );
    assert_eq!(p.qp_state(&a), QpState::Err);
    // (retry_cnt + 1) timeouts of 4.096 us x 2^10, plus the link's delay.
    let t = Duration::from_nanos(4096 << 10);
    assert!(
        took >= t * 4 && took < t * 4 + Duration::from_millis(1),
        "took {took:?}"
    );
    assert_eq!(p.fabric.node(a.node).counters().retry_exceeded_err, 1);
    // Posting to a QP in error completes at once with WR_FLUSH_ERR.
    p.post(&a, 99, SendOp::Write(remote(&b, 0)), 0, 8);
    let wc = p.completions(&a, 1, Duration::from_millis(1));
    assert_eq!((wc[0].wr_id, wc[0].status), (99, WcStatus::WrFlushErr));
}
