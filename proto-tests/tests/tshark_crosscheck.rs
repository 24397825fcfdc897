//! Every RoCE frame in pcaps/, decoded by rocex and by Wireshark's InfiniBand dissector
//! (tshark), agrees on every field both decode.

use std::collections::HashMap;
use std::process::Command;

use rocex_dump::{Ports, analyze, capture};
use rocex_proto_tests::{captures, name, require_tool};
use serde_json::Value;

/// tshark field -> the JSON path of the same field in `rocex dump --json`.
const FIELDS: &[(&str, &str)] = &[
    ("infiniband.bth.opcode", "opcode_code"),
    ("infiniband.bth.se", "se"),
    ("infiniband.bth.m", "mig_req"),
    ("infiniband.bth.padcnt", "pad"),
    ("infiniband.bth.tver", "tver"),
    ("infiniband.bth.p_key", "pkey"),
    ("infiniband.bth.destqp", "qpn"),
    ("infiniband.bth.a", "ack_req"),
    ("infiniband.bth.psn", "psn"),
    ("infiniband.reth.va", "reth.va|atomic.va"),
    ("infiniband.reth.r_key", "reth.rkey|atomic.rkey"),
    ("infiniband.reth.dmalen", "reth.len"),
    ("infiniband.aeth.syndrome", "aeth.syndrome"),
    ("infiniband.aeth.msn", "aeth.msn"),
    ("infiniband.atomiceth.swapdt", "atomic.swap_add"),
    ("infiniband.atomiceth.cmpdt", "atomic.compare"),
    ("infiniband.atomicacketh.origremdt", "atomic_orig"),
    ("infiniband.immdt", "imm"),
    ("infiniband.ieth", "inv_rkey"),
    ("infiniband.deth.q_key", "deth.qkey"),
    ("infiniband.deth.srcqp", "deth.src_qp"),
    ("infiniband.invariant.crc", "icrc"),
];

/// A tshark field value as a number: decimal, 0x-hex, a boolean, or hex bytes.
fn tshark_number(field: &str, v: &str) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    if let Some(h) = v.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if field.ends_with("immdt") || field.ends_with("ieth") {
        return u64::from_str_radix(&v.replace(':', ""), 16).ok();
    }
    match v {
        "True" => Some(1),
        "False" => Some(0),
        _ => v.parse().ok(),
    }
}

fn json_number(frame: &Value, paths: &str, tshark_field: &str) -> Option<u64> {
    paths.split('|').find_map(|path| {
        let v = path.split('.').try_fold(frame, |v, k| v.get(k))?;
        let n = v.as_u64().or_else(|| v.as_bool().map(u64::from))?;
        // tshark reads the ICRC's wire bytes as a big-endian number.
        Some(if tshark_field.ends_with("invariant.crc") {
            u64::from((n as u32).swap_bytes())
        } else {
            n
        })
    })
}

#[test]
fn rocex_and_tshark_agree() {
    let Some(tshark) = require_tool("tshark_crosscheck", "tshark") else {
        return;
    };
    let mut compared = 0usize;
    let mut mismatches = Vec::new();
    for path in captures() {
        let mut cmd = Command::new(&tshark);
        cmd.arg("-r").arg(&path);
        cmd.args([
            "-d",
            "udp.port==4791,infiniband",
            "--disable-protocol",
            "rpcordma",
            "-Y",
            "infiniband.bth",
        ]);
        cmd.args([
            "-T",
            "fields",
            "-E",
            "separator=/t",
            "-E",
            "occurrence=f",
            "-e",
            "frame.number",
        ]);
        for (f, _) in FIELDS {
            cmd.args(["-e", f]);
        }
        let out = cmd.output().expect("tshark runs");
        assert!(
            out.status.success(),
            "tshark failed on {}: {}",
            name(&path),
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: HashMap<u64, Vec<String>> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let mut cols = l.split('\t').map(str::to_string);
                (
                    cols.next().and_then(|n| n.parse().ok()).unwrap_or(0),
                    cols.collect(),
                )
            })
            .collect();

        let frames = capture::read(&path).unwrap();
        let mut roce = 0;
        for (i, c) in frames.iter().enumerate() {
            let n = i as u64 + 1;
            let a = analyze(n, c.ts, &c.data, &Ports::default());
            if !a.summary.roce {
                continue;
            }
            roce += 1;
            let json = serde_json::to_value(&a.summary).unwrap();
            let Some(row) = rows.get(&n) else {
                mismatches.push(format!(
                    "{} frame {n}: tshark does not decode it as InfiniBand",
                    name(&path)
                ));
                continue;
            };
            for ((field, paths), value) in FIELDS.iter().zip(row) {
                let (Some(theirs), Some(ours)) = (
                    tshark_number(field, value),
                    json_number(&json, paths, field),
                ) else {
                    continue;
                };
                compared += 1;
                if theirs != ours {
                    mismatches.push(format!(
                        "{} frame {n}: {field}: tshark {theirs:#x}, rocex {ours:#x}",
                        name(&path)
                    ));
                }
            }
        }
        assert_eq!(
            rows.len(),
            roce,
            "{}: tshark and rocex count different RoCE frames",
            name(&path)
        );
    }
    eprintln!("compared {compared} field values with tshark");
    assert!(
        compared > 1000,
        "too few fields compared ({compared}): is tshark decoding RoCE?"
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
