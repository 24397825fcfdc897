#!/usr/bin/env python3
"""The data-path table of compare.sh: through two rocexd, and with the engine in each
application's process (the direct data path, rocexd's default), against the engine in the
perf process and the kernel's references, pinned and unpinned, and the idle costs.

  path_report.py RESULTS.tsv CONDITIONS RUNS  -> markdown on stdout
"""
import sys

from report import div, fmt, load, med, sender_bound

MODES = ("pinned", "unpinned")
# The application's two paths: through the daemons, and with the engine in its process.
VIAS = (("rocexd", "through rocexd (--no-direct)"), ("direct", "direct (rocexd's default)"))


def main():
    res, cond, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = load(res)

    def series(key):
        return [r.get(key, float("nan")) for r in data.values()]

    def ratio(a, b):
        return [div(x, y) for x, y in zip(series(a), series(b))]

    # the direct sender's bound (report.sender_bound), against the same placement's iperf3
    for r in data.values():
        for m in MODES:
            g = lambda k: r.get(f"path_{m}_{k}", float("nan"))
            r[f"path_{m}_direct_wbw_kernel_share"], r[f"path_{m}_direct_cores_at_tcp"] = sender_bound(
                g("direct_wbw_cpu_user_s"), g("direct_wbw_cpu_sys_s"), g("direct_wbw_gbps"),
                g("iperf3_gbps"), r.get("icrc_gbps", float("nan")))

    out = [f"Conditions: {cond}.", ""]
    out.append("| measurement | unit | pinned | unpinned (nothing pinned) |")
    out.append("|---|---|---:|---:|")
    rows = [
        ("8 B WRITE round trip through two rocexd, p50", "us", "rocexd_lat_p50_us", 2),
        ("same, p99", "us", "rocexd_lat_p99_us", 2),
        ("8 B WRITE round trip, engine in the perf process (UDP), p50", "us", "inproc_lat_p50_us", 2),
        ("same, p99", "us", "inproc_lat_p99_us", 2),
        ("8 B WRITE round trip, engine in each application (direct), p50", "us", "direct_lat_p50_us", 2),
        ("same, p99", "us", "direct_lat_p99_us", 2),
        ("64 KiB WRITE through two rocexd, 3 s", "Gb/s", "rocexd_wbw_gbps", 2),
        ("64 KiB WRITE, direct, 3 s", "Gb/s", "direct_wbw_gbps", 2),
        ("same, the sender's kernel share of its CPU (getrusage)", "fraction", "direct_wbw_kernel_share", 2),
        ("iperf3 TCP, 1 stream, 3 s", "Gb/s", "iperf3_gbps", 2),
        ("64 B SEND through two rocexd, 1 QP", "M msg/s", "rocexd_send64_mpps", 3),
        ("64 B SEND, direct, 1 QP", "M msg/s", "direct_send64_mpps", 3),
        ("64 B SEND, engine in the perf process, 1 QP", "M msg/s", "inproc_send64_mpps", 3),
    ]
    for name, unit, key, nd in rows:
        cells = []
        for m in MODES:
            v, rng = fmt(med(series(f"path_{m}_{key}")), nd, runs)
            cells.append(f"{v} ({rng})" if rng != "-" else v)
        out.append(f"| {name} | {unit} | {cells[0]} | {cells[1]} |")
    out.append("")
    out.append("| goal (ratio per run, then median) | pinned | unpinned | target |")
    out.append("|---|---:|---:|---|")
    goals = [
        (f"8 B WRITE p50 {how} / in-process p50", f"{via}_lat_p50_us", "inproc_lat_p50_us", 3, "<= 1.5")
        for via, how in VIAS
    ] + [
        (f"8 B WRITE p99 {how}, us", f"{via}_lat_p99_us", None, 1, "<= 100") for via, how in VIAS
    ] + [
        (f"64 KiB WRITE {how} / iperf3", f"{via}_wbw_gbps", "iperf3_gbps", 3, ">= 1.0")
        for via, how in VIAS
    ] + [
        ("(bound) direct sender's cores at iperf3's rate: its kernel work scaled up, plus the ICRC pass",
         "direct_cores_at_tcp", None, 2, "<= 1 (else 1.0x iperf3 is out of reach)"),
    ] + [
        (f"64 B SEND {how} / in-process", f"{via}_send64_mpps", "inproc_send64_mpps", 3, ">= 0.9")
        for via, how in VIAS
    ]
    for name, a, b, nd, target in goals:
        cells = []
        for m in MODES:
            xs = ratio(f"path_{m}_{a}", f"path_{m}_{b}") if b else series(f"path_{m}_{a}")
            v, rng = fmt(med(xs), nd, runs)
            cells.append(f"{v} ({rng})" if rng != "-" else v)
        out.append(f"| {name} | {cells[0]} | {cells[1]} | {target} |")
    out.append("")
    out.append("| idle, 10 s, nothing pinned, rocexd's defaults (a direct client) | unit | median | min-max |")
    out.append("|---|---|---:|---:|")
    for name, unit, key, nd in [
        ("rocexd with a client connected, no traffic", "% of a core", "path_idle_daemon_client_pct", 2),
        ("rocexd with no client", "% of a core", "path_idle_daemon_alone_pct", 2),
        ("rocexd's wakeups (context switches) with a client connected", "1/s", "path_idle_daemon_wakeups_per_s", 1),
        ("the idle client's context switches, all its threads", "in 10 s", "path_idle_client_ctxsw", 0),
    ]:
        v, rng = fmt(med(series(key)), nd, runs)
        out.append(f"| {name} | {unit} | {v} | {rng} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
