#!/usr/bin/env python3
"""Numbers of lab_compare.sh: rocex against kernel rxe in the rxe lab guests.

  lab_report.py parse RUN.log                 -> metric<TAB>value lines from the client guest
  lab_report.py table RESULTS.tsv COND RUNS   -> markdown on stdout

The client guest's section of run.sh's output holds either perftest's result row
(ib_write_bw: MiB/s; ib_write_lat: half round trips in us) or rocex perf's JSON line.
"""
import json
import math
import sys

from report import fmt, load, med

MIB = 1 << 20


def client_section(text):
    """Lines of the client guest's section (run.sh prints one section per guest)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("=== guest"):
            inside = "(client" in line
            continue
        if inside:
            out.append(line)
    return out


def parse(path):
    lines = client_section(open(path, errors="replace").read())
    found = {}
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith("{"):
            try:
                d = json.loads(s)
            except ValueError:
                continue
            if d.get("test") == "bw":
                found["gbps"] = d.get("gbps")
            else:
                found["p50_us"] = d.get("lat_us_p50")
                found["p99_us"] = d.get("lat_us_p99")
        elif "BW average" in s and i + 1 < len(lines):
            row = lines[i + 1].split()  # bytes iters peak avg msgrate
            found["gbps"] = float(row[3]) * MIB * 8 / 1e9
        elif "t_typical" in s and i + 1 < len(lines):
            row = lines[i + 1].split()  # bytes iters min max typical avg stdev p99 p99.9
            found["p50_us"] = float(row[4])
            found["p99_us"] = float(row[7])
    for k, v in found.items():
        print(f"{k}\t{'nan' if v is None else v}")


def table(path, cond, n):
    runs = load(path)
    col = lambda k: [r.get(k, math.nan) for r in runs.values()]
    rows = [
        ("kernel rxe, ib_write_bw", "Gb/s", "write_bw_gbps", 3),
        ("rocex perf write bw", "Gb/s", "rocex_write_bw_gbps", 3),
        ("rocex perf write bw --window (wide)", "Gb/s", "rocex_wide_write_bw_gbps", 3),
        ("kernel rxe, ib_write_lat, typical (half round trip)", "us", "write_lat_p50_us", 0),
        ("rocex perf write lat, p50 (half round trip)", "us", "rocex_write_lat_p50_us", 0),
        ("kernel rxe, ib_write_lat, p99", "us", "write_lat_p99_us", 0),
        ("rocex perf write lat, p99", "us", "rocex_write_lat_p99_us", 0),
    ]
    out = [f"Conditions: {cond}.\n", "| measurement | unit | median | min-max |", "|---|---|---:|---:|"]
    for name, unit, key, nd in rows:
        m, rng = fmt(med(col(key)), nd, n)
        out.append(f"| {name} | {unit} | {m} | {rng} |")

    def ratio(a, b):
        return [r.get(a, math.nan) / r[b] if r.get(b) else math.nan for r in runs.values()]

    out += ["", "| goal 6: rocex / rxe (ratio per run, then median) | median | min-max |", "|---|---:|---:|"]
    for name, a, b in [
        ("WRITE bw throughput (higher is better for rocex)", "rocex_write_bw_gbps", "write_bw_gbps"),
        ("WRITE bw throughput, rocex --window (wide)", "rocex_wide_write_bw_gbps", "write_bw_gbps"),
        ("WRITE lat p50 (lower is better for rocex)", "rocex_write_lat_p50_us", "write_lat_p50_us"),
        ("WRITE lat p99 (lower is better for rocex)", "rocex_write_lat_p99_us", "write_lat_p99_us"),
    ]:
        m, rng = fmt(med(ratio(a, b)), 2, n)
        out.append(f"| {name} | {m} | {rng} |")
    print("\n".join(out))


if __name__ == "__main__":
    if sys.argv[1] == "parse":
        parse(sys.argv[2])
    else:
        table(sys.argv[2], sys.argv[3], int(sys.argv[4]))
