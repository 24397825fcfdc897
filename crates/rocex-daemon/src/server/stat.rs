//! What the daemon reports of itself: the device's attributes (`QueryDevice`), the
//! counters `rocex stat` shows (`Stat`), and the summary logged at shutdown.

use std::net::IpAddr;

use rocex_shm::control::{DeviceAttr, QpStat, Response, STAT_BUDGET, StatGroup, Stats as StatBody};

use super::{Reply, Server};
use crate::client::Client;
use crate::limits::MrBytes;
use crate::pump;

impl Server {
    /// The device's attributes (`QueryDevice`); its GID is its address.
    pub(super) fn device_attr(&self) -> DeviceAttr {
        let gid = match self.local {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        let config = self.driver.engine.config();
        DeviceAttr {
            max_qp: config.max_qp as u32,
            max_qp_wr: pump::MAX_WR,
            max_sge: pump::MAX_SGE,
            max_cq: 1 << 16,
            max_cqe: config.max_cqe as u32,
            max_mr: 1 << 20,
            max_pd: 1 << 16,
            max_qp_rd_atom: 16,
            max_inline: pump::MAX_INLINE,
            gid,
            mtu: config.port_mtu as u8,
            port_state: 4,
        }
    }

    /// `Stat`: the device's counter groups and a page of QPs (every client's: the socket's
    /// permissions decide who may see them, as for every other request).
    pub(super) fn stat(&self, qpn: u32, cursor: u32) -> Reply {
        // A direct client's QPs are in its own engine: its board shows them. Read first,
        // so that the groups count what this read refused.
        let direct = self
            .direct
            .as_ref()
            .map_or_else(Vec::new, |d| d.board_qps());
        let mut body = StatBody {
            groups: self.stat_groups(),
            ..StatBody::default()
        };
        let pid = |c: Option<&Client>| c.and_then(|c| c.pid).map_or(0, |p| p as u64);
        let owner_pid = |qpn: u32| pid(self.clients.values().find(|c| c.qps.contains_key(&qpn)));
        let qp_stat = |qpn: u32| {
            self.driver.engine.qp_status(qpn).ok().map(|s| QpStat {
                qpn,
                qp_type: s.qp_type,
                state: s.state,
                counters: s
                    .named()
                    // Whose QP it is (0: the daemon's own, or a pid the kernel did not give).
                    .chain([("client_pid", owner_pid(qpn))])
                    .map(|(n, v)| (n.to_owned(), v))
                    .collect(),
            })
        };
        // Row `i` of a page: the daemon's QP `qpn` (`None`), or `direct[i]`.
        let row = |qpn: u32, i: Option<usize>| match i {
            None => qp_stat(qpn),
            Some(i) => Some(direct[i].stat(pid(self.clients.get(&direct[i].holder)))),
        };
        let boards = direct.iter().enumerate().map(|(i, q)| (q.qpn, Some(i)));
        if qpn != 0 {
            let found = std::iter::once((qpn, None)).chain(boards.filter(|r| r.0 == qpn));
            match found.filter_map(|(q, i)| row(q, i)).next() {
                Some(q) => body.qps.push(q),
                None => return Reply::err(libc::ENOENT, format!("no QP {qpn:#x}")),
            }
            return Reply::ok(Response::Stat(body));
        }
        let own = self.driver.engine.qpns().map(|q| (q, None));
        let mut rows: Vec<_> = own.chain(boards).filter(|r| r.0 >= cursor).collect();
        rows.sort_unstable_by_key(|r| r.0);
        let mut len = body.encoded_len();
        for (q, i) in rows {
            let Some(s) = row(q, i) else { continue };
            len += s.encoded_len();
            if len > STAT_BUDGET || body.qps.len() == usize::from(u16::MAX) {
                body.next = q;
                break;
            }
            body.qps.push(s);
        }
        Reply::ok(Response::Stat(body))
    }

    /// The device-wide groups: the engine's counters (rxe's names), the daemon's own, the
    /// backend's, and the injected faults when `--inject` is on.
    fn stat_groups(&self) -> Vec<StatGroup> {
        let group = |name: &str, counters: &[(&str, u64)]| StatGroup {
            name: name.to_owned(),
            counters: counters.iter().map(|&(n, v)| (n.to_owned(), v)).collect(),
        };
        let engine: Vec<_> = self.driver.engine.counters().iter().collect();
        let s = &self.stats;
        let (qps, mrs) = self.clients.values().fold((0, 0), |(q, m), c| {
            (q + c.qps.len() as u64, m + c.mrs.len() as u64)
        });
        let registered: u64 = self.mr_bytes.values().map(MrBytes::total).sum();
        // Slots granted, refused, datagrams drained, program attached again, board
        // entries not reported.
        let direct = self.direct.as_ref().map_or((0, 0, 0, 0, 0), |d| {
            (
                d.in_use(),
                d.refused,
                d.drained(),
                d.reattached,
                d.board_refused.get(),
            )
        });
        let mut groups = vec![
            group("engine", &engine),
            group(
                "daemon",
                &[
                    ("clients", self.clients.len() as u64),
                    ("qps", qps),
                    ("mrs", mrs),
                    ("registered_bytes", registered),
                    ("request_errors", s.request_errors),
                    ("over_limit", s.over_limit),
                    ("bad_frames", s.bad_frames),
                    ("disconnects", s.disconnects),
                    ("cm_listens", self.cm.listens()),
                    ("direct_slots", direct.0),
                    ("direct_refused", s.direct_refused + direct.1),
                    ("direct_drained", direct.2),
                    ("direct_reattached", direct.3),
                    ("direct_board_refused", direct.4),
                    ("bad_descriptors", s.pump.bad_descriptors),
                    ("broken_rings", s.pump.broken_rings),
                    ("refused_wrs", s.pump.refused),
                    ("doorbell_to_wire_samples", self.watch.wire.samples()),
                    ("doorbell_to_wire_p50_ns", self.watch.wire.quantile_ns(0.5)),
                    ("doorbell_to_wire_p99_ns", self.watch.wire.quantile_ns(0.99)),
                    (
                        "doorbell_to_sent_p50_ns",
                        self.watch.wire_returned.quantile_ns(0.5),
                    ),
                    (
                        "doorbell_to_sent_p99_ns",
                        self.watch.wire_returned.quantile_ns(0.99),
                    ),
                ],
            ),
        ];
        let b = self.driver.backend_counters();
        groups.push(group(
            "backend",
            &[
                ("rx_packets", b.rx_packets),
                ("tx_packets", b.tx_packets),
                ("rx_batches", b.rx_batches),
                ("tx_batches", b.tx_batches),
                ("icrc_foreign_id", b.icrc_foreign_id),
                ("tx_dropped", b.tx_dropped),
                ("rx_ignored", b.rx_ignored),
                ("rx_kernel_dropped", b.rx_kernel_dropped),
            ],
        ));
        if let Some(c) = self.driver.fault_counters() {
            groups.push(group(
                "inject",
                &[
                    ("lost", c.lost),
                    ("duplicated", c.duplicated),
                    ("reordered", c.reordered),
                    ("corrupted", c.corrupted),
                ],
            ));
        }
        groups
    }

    /// Every non-zero counter by its `rocex stat` name, group by group, on one line.
    pub(super) fn summary(&self) -> String {
        let cm = self.cm.stats;
        let mut groups = self.stat_groups();
        groups.push(StatGroup {
            name: "cm".to_owned(),
            counters: [
                ("bad_mads", cm.bad_mads),
                ("unserved", cm.unserved),
                ("held", cm.held),
                ("dropped_events", cm.dropped_events),
            ]
            .map(|(n, v)| (n.to_owned(), v))
            .into(),
        });
        let summary: Vec<String> = groups
            .iter()
            .map(|g| {
                let set: Vec<String> = g
                    .counters
                    .iter()
                    .filter(|(_, v)| *v != 0)
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                format!(
                    "{}: {}",
                    g.name,
                    if set.is_empty() {
                        "-".to_owned()
                    } else {
                        set.join(" ")
                    }
                )
            })
            .collect();
        summary.join("; ")
    }
}
