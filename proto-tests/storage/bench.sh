#!/usr/bin/env bash
# The numbers of docs/storage.md: the same iSER workloads with rocex at one end and between
# two kernel rxe guests, N runs each (medians), in the rxe lab under QEMU TCG.
#   rxe<->rxe       fio in a guest (ib_iser) against LIO (ib_isert) in a second guest
#   rocex target    the same fio against Debian's tgtd under `rocex run` on the host
#   rocex initiator Debian's libiscsi under `rocex run` (iscsi_verify.py, depth 1) against
#                   the guest's LIO
#   rocex both      libiscsi and tgtd both under `rocex run`, two namespaces, no guest
# fio: random writes, then the same blocks read back and verified (crc32c), 4 KiB and
# 128 KiB at depths 1 and 16. Prints a Markdown table of the medians, writes them to
# docs/perf/storage.json and draws docs/perf/storage.svg from it (rocex-plot --storage).
# Needs root. The raw rows go to target/storage/bench.tsv; STORAGE_RESULTS=FILE (such a
# file) reports on an earlier run's rows instead of measuring, REV=COMMIT naming the commit
# they were taken on and --runs how many runs they hold.
#
# Usage: bench.sh [--runs N]
set -uo pipefail
source "$(dirname "$0")/lib.sh"
runs=3
[[ ${1:-} == --runs ]] && runs=$2
res=${STORAGE_RESULTS:-$storage_out/bench.tsv}
rev=${REV:-$(git -C "$storage_root" rev-parse --short HEAD)}
if [[ -z ${STORAGE_RESULTS:-} ]]; then
    need qemu-system-x86_64 tcpdump tgtd tgtadm gcc python3 iscsi-inq
    storage_rocex || exit 1
    bash "$storage_root/proto-tests/rxe-lab/build.sh" >/dev/null || exit 1
    source "$storage_root/proto-tests/rxe-lab/lib.sh"
    : >"$res"
fi

# fio's summary lines of a lab log as "SETUP\tPHASE\tBS\tQD\tIOPS\tBW" rows.
fio_rows() {
    sed -n 's/.*\[\(write\|verify\) bs=\([0-9a-z]*\) qd=\([0-9]*\)\] *\(write\|read\): IOPS=\([0-9.k]*\), BW=\([0-9.]*[KMG]i\?B\/s\).*/\1\t\2\t\3\t\5\t\6/p' "$2" \
        | sed "s/^/$1\t/" >>"$res"
}
# iscsi_verify.py's lines as rows (depth 1).
verify_rows() {
    sed -n 's/^\(\[host\] \)\?\(write\|read+verify\): .* commands of \([0-9]*\): \([0-9.]*\) MB\/s, \([0-9]*\) IOPS/\2\t\3\t1\t\5\t\4MB\/s/p' "$2" \
        | sed 's/^read+verify/verify/' | sed "s/^/$1\t/" >>"$res"
}

[[ -n ${STORAGE_RESULTS:-} ]] || for r in $(seq "$runs"); do
    echo "run $r of $runs" >&2
    lab_run "$storage_out/bench-rxe.log" iser --timeout 600 --set FIO=full --set FS=0 \
        --out "$storage_out/bench-rxe.pcap" && fio_rows "rxe<->rxe" "$storage_out/bench-rxe.log"
    lab_run "$storage_out/bench-target.log" iser --guest-role client --timeout 600 --set FIO=full \
        --set FS=0 --out "$storage_out/bench-target.pcap" --host-cmd "bash $storage_dir/host_tgtd.sh" \
        && fio_rows "rocex target" "$storage_out/bench-target.log"
    lab_run "$storage_out/bench-initiator.log" iser --guest-role server --timeout 600 \
        --out "$storage_out/bench-initiator.pcap" \
        --host-cmd "SMALL_MB=8 LARGE_MB=32 bash $storage_dir/host_libiscsi.sh" \
        && verify_rows "rocex initiator" "$storage_out/bench-initiator.log"
    bash "$storage_dir/scenarios/iser_rocex_both.sh" >"$storage_out/bench-both.log" 2>&1 \
        && verify_rows "rocex both" "$storage_out/bench-both.log"
done
python3 - "$res" "$runs" "$rev" "$storage_root/docs/perf/storage.json" <<'EOF_PY'
import json, statistics, sys
from collections import defaultdict
unit = {"KiB/s": 1024 / 1e6, "MiB/s": 1048576 / 1e6, "GiB/s": 1073741824 / 1e6, "MB/s": 1.0,
        "kB/s": 1e-3, "KB/s": 1e-3}
rows = defaultdict(list)
for line in open(sys.argv[1]):
    setup, phase, bs, qd, iops, bw = line.rstrip("\n").split("\t")
    bs = {"4096": "4k", "131072": "128k"}.get(bs, bs)
    iops = float(iops[:-1]) * 1000 if iops.endswith("k") else float(iops)
    num = bw.rstrip("KMGikB/s")
    mbs = float(num) * unit[bw[len(num):]]
    rows[(phase, bs, int(qd), setup)].append((iops, mbs))
setups = ["rxe<->rxe", "rocex target", "rocex initiator", "rocex both"]
print("| phase | bs | depth | " + " | ".join(f"{s} IOPS, MB/s" for s in setups) + " |")
print("|---|---|---|" + "---|" * len(setups))
for phase in ("write", "verify"):
    for bs in ("4k", "128k"):
        for qd in (1, 16):
            cells = []
            for s in setups:
                v = rows.get((phase, bs, qd, s))
                if not v:
                    cells.append("")
                    continue
                cells.append(f"{statistics.median(i for i, _ in v):.0f}, "
                             f"{statistics.median(m for _, m in v):.1f} ({len(v)})")
            if any(cells):
                print(f"| {phase} | {bs} | {qd} | " + " | ".join(cells) + " |")
# The same medians for rocex-plot, null where a setup does not run the workload.
data = {"runs": int(sys.argv[2]), "rev": sys.argv[3], "setups": setups, "workloads": []}
for phase in ("write", "verify"):
    for bs in ("4k", "128k"):
        for qd in (1, 16):
            cells = [rows.get((phase, bs, qd, s)) for s in setups]
            if not any(cells):
                continue
            med = lambda k: [round(statistics.median(x[k] for x in v), 2) if v else None
                             for v in cells]
            data["workloads"].append({"phase": phase, "bs": bs, "depth": qd, "iops": med(0),
                                      "mbs": med(1),
                                      "samples": [len(v) if v else 0 for v in cells]})
with open(sys.argv[4], "w") as f:
    json.dump(data, f, indent=1)
    f.write("\n")
EOF_PY
(cd "$storage_root" && cargo run -q --release -p rocex-plot -- --storage docs/perf/storage.json docs/perf) >&2 \
    || echo "rocex-plot failed: docs/perf/storage.svg is from an earlier run" >&2
