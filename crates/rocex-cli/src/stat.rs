//! `rocex stat`: a `rocexd`'s counters, as `rdma statistic` shows a device's and its QPs'.

use std::path::PathBuf;
use std::process::ExitCode;

use rocex_verbs::Stats;
use serde_json::{Map, Value, json};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The daemon's control socket [default: $ROCEX_SOCKET, else the only rocexd running].
    #[arg(long)]
    socket: Option<PathBuf>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Only this QP (decimal or 0x hex), with the device's counters.
    #[arg(long, value_name = "QPN", value_parser = parse_qpn)]
    qp: Option<u32>,
}

fn parse_qpn(s: &str) -> Result<u32, String> {
    let n = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    n.ok()
        .filter(|&q| q != 0 && q < 1 << 24)
        .ok_or_else(|| format!("{s:?} is not a QP number (1 to 0xffffff)"))
}

fn counters_json(c: &[(String, u64)]) -> Value {
    Value::Object(c.iter().map(|(n, v)| (n.clone(), json!(v))).collect())
}

/// `{"device": {group: {counter: value}}, "qps": [{"qpn", "type", "state", counter...}]}`.
fn to_json(socket: &str, s: &Stats) -> Value {
    let groups: Map<String, Value> = s
        .groups
        .iter()
        .map(|g| (g.name.clone(), counters_json(&g.counters)))
        .collect();
    let qps: Vec<Value> = s
        .qps
        .iter()
        .map(|q| {
            let mut o = Map::new();
            o.insert("qpn".into(), json!(q.qpn));
            o.insert("type".into(), json!(q.qp_type.name()));
            o.insert("state".into(), json!(q.state.name()));
            if let Value::Object(c) = counters_json(&q.counters) {
                o.extend(c);
            }
            Value::Object(o)
        })
        .collect();
    json!({ "socket": socket, "device": groups, "qps": qps })
}

/// `rdma statistic`'s layout: `name value` pairs on one line per group, one line per QP.
fn print_text(socket: &str, s: &Stats) {
    let line = |c: &[(String, u64)]| {
        c.iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for g in &s.groups {
        println!("link rocex/1 ({socket}) {} {}", g.name, line(&g.counters));
    }
    for q in &s.qps {
        println!(
            "link rocex/1 lqpn {} type {} state {} {}",
            q.qpn,
            q.qp_type.name(),
            q.state.name(),
            line(&q.counters)
        );
    }
}

pub(crate) fn run(a: &Args) -> ExitCode {
    let socket = match crate::choose::daemon(a.socket.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rocex stat: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shown = socket.display().to_string();
    // The daemon's counters: a context granted a direct slot would read its own engine's.
    let stats = rocex_verbs::Context::open_daemon_path(&socket).and_then(|ctx| match a.qp {
        Some(q) => ctx.qp_stats(q),
        None => ctx.stats(),
    });
    let stats = match stats {
        Ok(s) => s,
        Err(e @ rocex_verbs::Error::Connect { .. }) => {
            eprintln!("rocex stat: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("rocex stat: {shown}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if a.json {
        println!("{}", to_json(&shown, &stats));
    } else {
        print_text(&shown, &stats);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocex_verbs::verbs::{QpState, QpType};
    use rocex_verbs::{QpStat, StatGroup};

    #[test]
    fn json_has_groups_and_qps() {
        let s = Stats {
            groups: vec![StatGroup {
                name: "engine".into(),
                counters: vec![("sent_pkts".into(), 3)],
            }],
            qps: vec![QpStat {
                qpn: 17,
                qp_type: QpType::Rc,
                state: QpState::Rts,
                counters: vec![("sq_psn".into(), 5)],
            }],
            next: 0,
        };
        let v = to_json("/x.sock", &s);
        assert_eq!(v["device"]["engine"]["sent_pkts"], 3);
        assert_eq!(v["qps"][0]["state"], "RTS");
        assert_eq!(v["qps"][0]["sq_psn"], 5);
        assert_eq!(parse_qpn("0x11"), Ok(17));
        assert!(parse_qpn("0").is_err() && parse_qpn("0x1000000").is_err());
    }
}
