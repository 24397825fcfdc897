//! The daemons' own counters (`Context::stats`): the engine's, under rxe's hw_counters
//! names, the daemon's, and what it injected. Taken when the run ends; they count from the
//! daemon's start, so setup and the first pass over the buffers are included.

use rocex_verbs::Context;

/// The device-wide counter groups of `ctx`'s daemon as JSON (`{group: {name: value}}`),
/// or `null` when it does not answer.
pub(crate) fn take(ctx: &Context) -> serde_json::Value {
    let Ok(stats) = ctx.stats() else {
        return serde_json::Value::Null;
    };
    let groups: serde_json::Map<String, serde_json::Value> = stats
        .groups
        .iter()
        .map(|g| {
            let counters: serde_json::Map<String, serde_json::Value> = g
                .counters
                .iter()
                .map(|(n, v)| (n.clone(), (*v).into()))
                .collect();
            (g.name.clone(), counters.into())
        })
        .collect();
    groups.into()
}

/// The few counters the summary line names: retransmitted packets and faults injected.
pub(crate) fn brief(c: &serde_json::Value) -> String {
    let get = |g: &str, n: &str| c[g][n].as_u64().unwrap_or(0);
    format!(
        "retransmitted={} injected(lost={} dup={} reordered={} corrupted={})",
        get("engine", "retransmitted_pkts"),
        get("inject", "lost"),
        get("inject", "duplicated"),
        get("inject", "reordered"),
        get("inject", "corrupted"),
    )
}
