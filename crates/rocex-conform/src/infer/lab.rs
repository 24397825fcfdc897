//! The plans of the lab's captures in pcaps/, for the inference tests.

use std::path::Path;

use crate::connection::split;
use crate::infer::{InferenceKind, Plan, plan};

/// The plan of the one RC connection in `pcaps/NAME`.
pub(super) fn planned(name: &str) -> Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../pcaps")
        .join(name);
    let cap = rocex_dump::capture::open(&path).unwrap();
    let conns = split(&cap.frames, |p| p == rocex_wire::ROCE_V2_PORT).connections;
    assert_eq!(conns.len(), 1, "{name}");
    plan(&conns[0])
}

/// The kinds of the plan's inferences, in order.
pub(super) fn kinds(p: &Plan) -> Vec<InferenceKind> {
    p.inferences.iter().map(|i| i.kind).collect()
}
