#!/usr/bin/env bash
# rocex against kernel rxe, and rxe against rxe, under the same 5% loss in the rxe lab
# (`proto-tests/bench/loss.sh --lab`): 64 KiB RDMA WRITEs, 50 per run, MTU 4096.
#   rxe <-> rxe: the lab's write_bw scenario in two guests, netem dropping 5% on each
#     guest's egress (requests one way, ACKs the other).
#   rocex -> rxe: `rocex perf write bw` on the host side of the lab's bridge against
#     ib_write_bw on rxe in one guest, netem dropping 5% of the guest's packets (the ACKs)
#     and rocex's own `--inject loss=0.05` dropping 5% of its requests.
#
#   proto-tests/bench/loss_lab.sh [--runs N] [--out FILE] [--no-doc]
#
# Prints the medians (MB/s) and writes them into docs/performance.md between the LOSS-LAB
# markers. Needs root and the lab image (just rxe-lab-build).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$HERE/../.." && pwd)"
RUNS=3
OUT="$root/docs/performance.md"
WRITE_DOC=1
source "$HERE/args.sh"
bench_args "$@"
[ "$(id -u)" = 0 ] || { echo "loss_lab.sh needs root (the rxe lab)" >&2; exit 1; }
rocex="${ROCEX:-$root/target/release/rocex}"
[ -x "$rocex" ] || (cd "$root" && cargo build --release -p rocex-cli)
out="$(mktemp -d /tmp/rocex-losslab.XXXXXX)"
only=
source "$root/proto-tests/interop/lib.sh"
RES="$out/results.tsv"
: >"$RES"
LABOPTS="--mtu 4096 --loss 5 --set SIZE=65536 --set ITERS=50 --timeout 400"
for run in $(seq 1 "$RUNS"); do
  # shellcheck disable=SC2086
  lab_run "$out/rxe.$run.log" write_bw $LABOPTS --out "$out/rxe.$run.pcap" >/dev/null 2>&1
  # perftest's BW average in MiB/s, as MB/s
  v="$(awk '$1 == 65536 && $2 == 50 { print $4 * 1.048576; exit }' "$out/rxe.$run.log")"
  printf '%s\trxe\t%s\n' "$run" "${v:-nan}" >>"$RES"
  lab "rocex.$run" write_bw server "$LABOPTS" \
    "$rocex perf write bw -m 4096 -s 65536 -n 50 --inject loss=0.05,seed=$run \$RXE_LAB_GUEST_IP" >/dev/null 2>&1
  v="$(awk '$1 == "[host]" && $2 == 65536 && $3 == 50 { print $5; exit }' "$out/rocex.$run.log")"
  printf '%s\trocex\t%s\n' "$run" "${v:-nan}" >>"$RES"
  echo "  run $run: $(tail -n 2 "$RES" | cut -f2,3 | tr '\t\n' '= ')" >&2
done
python3 - "$RES" "$OUT" "$WRITE_DOC" "$RUNS" "$(git -C "$root" rev-parse --short HEAD)" <<'PY'
import math, statistics, sys
res, out, write_doc, runs, rev = sys.argv[1:6]
v = {"rxe": [], "rocex": []}
for line in open(res):
    _, who, x = line.split("\t")
    x = float(x)
    if not math.isnan(x):
        v[who].append(x)
med = lambda xs: statistics.median(xs) if xs else math.nan
rng = lambda xs: f"{min(xs):.2f}-{max(xs):.2f}" if xs else "n/a"
r, x = med(v["rxe"]), med(v["rocex"])
text = "\n".join([
    "| 64 KiB WRITE, 5% loss both ways | MB/s (median) | runs |",
    "|---|---:|---|",
    f"| rxe <-> rxe (two guests) | {r:.2f} | {rng(v['rxe'])} |",
    f"| rocex (host) -> rxe (guest) | {x:.2f} | {rng(v['rocex'])} |",
])
print(text)
if write_doc == "1":
    doc = open(out).read()
    begin, end = "<!-- LOSS-LAB:BEGIN (proto-tests/bench/loss.sh --lab) -->", "<!-- LOSS-LAB:END -->"
    body = f"{begin}\n{len(v['rxe'])} and {len(v['rocex'])} runs on {rev}:\n\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + body + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + body + "\n"
    open(out, "w").write(doc)
PY
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$out"
