#!/usr/bin/env bash
# rocex against kernel rxe in the same rxe lab guests (performance goal 6 of
# docs/performance.md): two Debian guests under QEMU on the lab's bridge run
# ib_write_bw / ib_write_lat over rdma_rxe, then the host-built rocex (shipped in with
# run.sh --rocex) runs `rocex perf write bw` / `write lat` over the same eth0 with its own
# UDP engine, same sizes, iterations and MTU: the bandwidth runs take perftest's default of
# 5000 iterations (a shorter run measures the guests' start more than the transfer). rocex
# runs its bandwidth test twice: with its defaults (kernel rxe's window of 128 PSNs) and
# with --window 512 (docs/wire.md, "Recovery"). One lab run at a time (it waits for
# others).
#
#   proto-tests/bench/lab_compare.sh [--runs N] [--out FILE] [--no-doc]
#
# Prints medians and rocex/rxe ratios and writes them into docs/performance.md between
# the lab's GENERATED markers. Needs root and the lab image (just rxe-lab-build).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUNS=3
OUT="$ROOT/docs/performance.md"
WRITE_DOC=1
MTU=4096 BW_SIZE=65536 BW_ITERS=5000 LAT_SIZE=8 LAT_ITERS=1000 WIDE=512
source "$HERE/args.sh"
bench_args "$@"

[ "$(id -u)" = 0 ] || { echo "lab_compare.sh needs root (the rxe lab)" >&2; exit 1; }
ROCEX="${ROCEX:-$ROOT/target/release/rocex}"
if [ ! -x "$ROCEX" ]; then
  (cd "$ROOT" && cargo build --release -p rocex-cli)
fi
PY="$(python3 -c 'import sys; print(sys.executable)')"   # not a shim: see compare.sh
source "$ROOT/proto-tests/rxe-lab/lib.sh"
WORK="$(mktemp -d /tmp/rocex-labbench.XXXXXX)"
RES="$WORK/results.tsv"
trap '[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"' EXIT

# Guests under TCG share the host's CPUs: wait (up to 10 min) for other lab runs to end.
wait_lab() {
  for _ in $(seq 300); do
    pgrep -f 'qemu-system-x86_64 .*rxe-lab/image' >/dev/null || return 0
    sleep 2
  done
}

# $1 run, $2 name of its results, $3 scenario, $4 size, $5 iterations, rest: run.sh options
lab() {
  local run="$1" name="$2" scn="$3" size="$4" iters="$5"; shift 5
  local log="$WORK/$name.$run.log"
  wait_lab
  if ! lab_run "$log" "$scn" --mtu "$MTU" --set "SIZE=$size" --set "ITERS=$iters" --timeout 300 \
      --out "$WORK/$scn.pcap" "$@"; then
    echo "  $name failed: $(tail -1 "$log")" >&2
  fi
  "$PY" "$HERE/lab_report.py" parse "$log" | while IFS=$'\t' read -r k v; do
    printf '%s\t%s_%s\t%s\n' "$run" "$name" "$k" "$v" >>"$RES"
  done
}

echo "rocex vs rxe in the lab guests: $RUNS runs, MTU $MTU, write bw ${BW_SIZE} B x $BW_ITERS, write lat ${LAT_SIZE} B x $LAT_ITERS" >&2
: >"$RES"
T0=$SECONDS
for run in $(seq 1 "$RUNS"); do
  echo "run $run/$RUNS ($((SECONDS - T0)) s)" >&2
  lab "$run" write_bw write_bw "$BW_SIZE" "$BW_ITERS"
  lab "$run" rocex_write_bw rocex_write_bw "$BW_SIZE" "$BW_ITERS" --rocex "$ROCEX"
  lab "$run" rocex_wide_write_bw rocex_write_bw "$BW_SIZE" "$BW_ITERS" --rocex "$ROCEX" \
    --set "WINDOW=$WIDE"
  lab "$run" write_lat write_lat "$LAT_SIZE" "$LAT_ITERS"
  lab "$run" rocex_write_lat rocex_write_lat "$LAT_SIZE" "$LAT_ITERS" --rocex "$ROCEX"
done
echo "done in $((SECONDS - T0)) s" >&2

# USO as the guests' init reported it: on only if every run's guests had it.
uso_state() {
  local s
  s=$(grep -ho 'uso=[a-z]*' "$WORK"/*.log 2>/dev/null | sort -u | tr '\n' ' ' || true)
  if [ "$s" = "uso=on " ]; then echo on; else echo "off (${s:-not reported})"; fi
}
COND="two Debian 13 guests ($(sed -n 1p "$RXE_LAB_VERSIONS" | cut -d' ' -f1-2)), 1 vCPU each under QEMU $(qemu_version) TCG (run.sh's CPU model), virtio-net with USO $(uso_state), on the lab's bridge, MTU $MTU; WRITE bw ${BW_SIZE} B x $BW_ITERS, WRITE lat ${LAT_SIZE} B x $LAT_ITERS; rocex's wide window $WIDE PSNs; $RUNS runs, medians (min-max); rocex $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') ($(date -u +%Y-%m-%dT%H:%MZ))"
"$PY" "$HERE/lab_report.py" table "$RES" "$COND" "$RUNS" >"$WORK/table.md"
cat "$WORK/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  "$PY" "$HERE/report.py" --splice "$OUT" "$WORK/table.md" lab_compare.sh
  echo "wrote $OUT" >&2
fi
