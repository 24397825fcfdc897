#!/usr/bin/env bash
# Goodput under random loss, rocex <-> rocex: two rocexd (default flags, UDP backend) in
# two network namespaces on a veth pair (198.18.101.1/24 <-> 198.18.101.2/24), RoCE
# datagrams dropped on input in both namespaces by nftables (`numgen random`: this kernel
# has no netem). A GSO burst crosses the veth as one skb, so one drop can take a burst.
#
#   proto-tests/bench/loss.sh [--runs N] [--out FILE] [--no-doc] [--lab]
#                             [--selective-repeat | --only-selective-repeat]
#
# --lab instead runs 64 KiB WRITEs (50, MTU 4096) with 5% loss both ways in the rxe lab:
# rxe <-> rxe in two guests (netem on each guest's egress), and `rocex perf` on the host
# against rxe in one guest (netem on the guest's egress, `--inject loss=0.05` on rocex's
# own packets), and writes the medians between the LOSS-LAB markers. Needs the lab image.
#
# Each run measures, for each recovery mode, 64 KiB WRITE and 16 KiB READ streams of
# $SECS s (`rocex perf ... bw --duration`, MTU 4096) at 0, 0.1, 1, 5 and 10% loss, and the
# goodput at each loss relative to the same mode's lossless stream in that run. The modes
# are rocex's recovery and rxe's (`rocexd --rxe-recovery`: retransmit only when kernel rxe
# would; docs/wire.md, "Recovery"), side by side in each run; --selective-repeat adds a
# third, rocex's selective repeat between the two rocexd (`rocexd --selective-repeat`;
# docs/wire.md, "Selective repeat"), and --only-selective-repeat measures it alone. Prints the medians over the
# runs and writes them into docs/performance.md between the LOSS markers, and the chart
# docs/perf/loss.svg (rocex-plot). Needs root and nft. LOSS_RESULTS=FILE (a results.tsv
# kept with KEEP_WORK=1) reports on an earlier run's measurements instead, REV=COMMIT
# naming the commit they were taken on. LOSSES="0 1" and STREAMS="read:16384" narrow a
# run to those loss rates (0 must be one: the ratios divide by it) and streams (OP:SIZE);
# the doc is then left alone. PERF_ARGS adds options to both ends' `rocex perf` (e.g.
# "--cq-mod 1"; a diagnosis, not the benchmark). PCAP=1 (with KEEP_WORK=1) has each rocexd
# capture its frames into the work directory (A-MODE-RUN.pcap, B-...), next to its log
# with the counters it prints at exit; a capture slows the daemons several times over.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUNS=3
OUT="$ROOT/docs/performance.md"
WRITE_DOC=1
SECS="${SECS:-3}"
NARROW=0
[ -n "${LOSSES:-}" ] && NARROW=1
[ -n "${STREAMS:-}" ] && NARROW=1
read -ra LOSSES <<<"${LOSSES:-0 0.1 1 5 10}"
read -ra STREAMS <<<"${STREAMS:-write:65536 read:16384}"
PCAP="${PCAP:-0}"
LAB=0
MODES=(rocex rxe)
ARGS=()
for a in "$@"; do
  case "$a" in
    --lab) LAB=1 ;;
    --selective-repeat) MODES=(rocex rxe sr) ;;
    --only-selective-repeat) MODES=(sr) ;;
    *) ARGS+=("$a") ;;
  esac
done
source "$HERE/args.sh"
bench_args "${ARGS[@]}"
[ "$NARROW" = 1 ] && WRITE_DOC=0
[ "$LAB" = 1 ] && exec "$HERE/loss_lab.sh" "${ARGS[@]}"

REV="${REV:-$(git -C "$ROOT" rev-parse --short HEAD)}"
if [ -n "${LOSS_RESULTS:-}" ]; then
  MEASURE=0
else
  MEASURE=1
  [ "$(id -u)" = 0 ] || { echo "loss.sh needs root (network namespaces, nftables)" >&2; exit 1; }
  command -v nft >/dev/null || { echo "loss.sh needs nft (Debian: nftables)" >&2; exit 1; }
fi
ROCEX="${ROCEX:-$ROOT/target/release/rocex}"
ROCEXD="${ROCEXD:-$(dirname "$ROCEX")/rocexd}"
if [ ! -x "$ROCEX" ] || [ ! -x "$ROCEXD" ]; then
  (cd "$ROOT" && cargo build --release -p rocex-cli -p rocex-daemon)
fi
PY="$(python3 -c 'import sys; print(sys.executable)')"   # not a shim: see compare.sh

NA="rxlA$$"; NB="rxlB$$"
VA="vlA$$"; VB="vlB$$"
IPA=198.18.101.1; IPB=198.18.101.2
WORK="$(mktemp -d /tmp/rocex-loss.XXXXXX)"
RES="$WORK/results.tsv"   # run mode op loss gbps
: >"$RES"
PIDS=()
if [ "$MEASURE" = 0 ]; then
  cp "$LOSS_RESULTS" "$RES"
  RUNS="$(cut -f1 "$RES" | sort -u | wc -l)"
fi

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.2
  for ns in "$NA" "$NB"; do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$VA" 2>/dev/null || true
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$MEASURE" = 1 ]; then
source "$HERE/../veth.sh"
veth_pair "$NA" "$NB" "$VA" "$VB" "$IPA" "$IPB"
fi

# set_loss PERCENT: drop that share of UDP datagrams to port 4791 arriving in either
# namespace (0: none)
set_loss() {
  local ns per10k
  per10k="$("$PY" -c 'import sys; print(round(float(sys.argv[1]) * 100))' "$1")"
  for ns in "$NA" "$NB"; do
    ip netns exec "$ns" nft delete table inet rocexloss 2>/dev/null || true
    [ "$per10k" = 0 ] && continue
    ip netns exec "$ns" nft -f - <<EOF
table inet rocexloss {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 4791 numgen random mod 10000 < $per10k drop
  }
}
EOF
  done
}

# daemons_up MODE RUN: rocexd in each namespace, with --rxe-recovery for MODE=rxe and
# --selective-repeat for MODE=sr
daemons_up() {
  local extra=()
  [ "$1" = rxe ] && extra=(--rxe-recovery)
  [ "$1" = sr ] && extra=(--selective-repeat)
  local pa=() pb=()
  if [ "$PCAP" = 1 ]; then pa=(--pcap "$WORK/A-$1-$2.pcap"); pb=(--pcap "$WORK/B-$1-$2.pcap"); fi
  SA="$WORK/A.sock" SB="$WORK/B.sock"
  rm -f "$SA" "$SB"
  ip netns exec "$NA" "$ROCEXD" --addr "$IPA" --socket "$SA" "${extra[@]}" "${pa[@]}" >"$WORK/A-$1-$2.log" 2>&1 &
  DPA=$!; PIDS+=("$DPA")
  ip netns exec "$NB" "$ROCEXD" --addr "$IPB" --socket "$SB" "${extra[@]}" "${pb[@]}" >"$WORK/B-$1-$2.log" 2>&1 &
  DPB=$!; PIDS+=("$DPB")
  for _ in $(seq 50); do [ -S "$SA" ] && [ -S "$SB" ] && break; sleep 0.1; done
}
daemons_down() { kill "$DPA" "$DPB" 2>/dev/null; wait "$DPA" "$DPB" 2>/dev/null || true; }

wait_tcp() {
  for _ in $(seq 100); do
    ip netns exec "$NB" ss -Hltn "sport = :18515" | grep -q . && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# stream OP SIZE: one $SECS s stream from A to B through the daemons; prints Gb/s (nan
# when it failed)
stream() {
  local op="$1" size="$2" sp j=""
  ip netns exec "$NB" timeout 120 "$ROCEX" perf "$op" bw --size "$size" --mtu 4096 ${PERF_ARGS:-} --socket "$SB" >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp")
  wait_tcp "$sp" &&
    j="$(ip netns exec "$NA" timeout 120 "$ROCEX" perf "$op" bw "$IPB" --size "$size" --mtu 4096 ${PERF_ARGS:-} \
      --duration "$SECS" --socket "$SA" --json 2>"$WORK/cli.err" | tail -n 1)"
  wait "$sp" 2>/dev/null || true
  "$PY" -c 'import json,sys
try: print(json.loads(sys.argv[1])["gbps"])
except Exception: print("nan")' "$j"
}

[ "$MEASURE" = 1 ] && echo "rocex loss bench: $RUNS runs of ${SECS} s streams, namespaces $NA/$NB, kernel $(uname -r)" >&2
T0=$SECONDS
for run in $(seq 1 "$RUNS"); do
  [ "$MEASURE" = 1 ] || break
  for mode in "${MODES[@]}"; do
    daemons_up "$mode" "$run"
    for spec in "${STREAMS[@]}"; do
      op="${spec%%:*}"; size="${spec#*:}"
      for loss in "${LOSSES[@]}"; do
        set_loss "$loss"
        g="$(stream "$op" "$size")"
        printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$mode" "$op" "$loss" "$g" >>"$RES"
        echo "  run $run $mode $op ${size} B loss $loss%: $g Gb/s ($((SECONDS - T0)) s)" >&2
      done
      set_loss 0
    done
    daemons_down
  done
done

# medians per (mode, op, loss) of the goodput and of the goodput relative to the same
# run's lossless stream; the table, docs/perf/loss.json and the doc section
"$PY" - "$RES" "$OUT" "$WRITE_DOC" "$RUNS" "$SECS" "$ROOT/docs/perf/loss.json" "$REV" <<'EOF'
import json, math, statistics, sys
res, out, write_doc, runs, secs, jpath, rev = sys.argv[1:8]
rows = [l.split("\t") for l in open(res).read().splitlines() if l]
g = {}
for run, mode, op, loss, gbps in rows:
    g[(run, mode, op, float(loss))] = float(gbps)
losses = sorted({k[3] for k in g})
med = lambda xs: statistics.median(xs) if xs else math.nan
data = {"runs": int(runs), "secs": float(secs), "rev": rev, "series": []}
lines = []
for op, size in (("write", "64 KiB WRITE"), ("read", "16 KiB READ")):
    for mode, name in (("rocex", "rocex recovery"), ("rxe", "rxe's recovery (--rxe-recovery)"),
                       ("sr", "selective repeat (--selective-repeat)")):
        if not any(k[1:3] == (mode, op) for k in g):
            continue
        base = [g[k] for k in g if k[1:3] == (mode, op) and k[3] == 0 and not math.isnan(g[k])]
        rel, abs_ = [], []
        for loss in losses:
            xs = []
            for k, v in g.items():
                if k[1:] == (mode, op, loss) and (k[0], mode, op, 0.0) in g:
                    b = g[(k[0], mode, op, 0.0)]
                    xs.append(v / b if b > 0 and not math.isnan(v) else 0.0)
            rel.append(med(xs))
            abs_.append(med([v for k, v in g.items() if k[1:] == (mode, op, loss) and not math.isnan(v)]))
        clean = lambda xs: [None if math.isnan(x) else x for x in xs]
        data["series"].append({"op": op, "mode": mode, "label": f"{size}, {name}",
                               "loss_pct": losses, "gbps": clean(abs_), "relative": clean(rel)})
        lines.append((f"{size}, {name}", abs_, rel))
os_ = lambda x: "n/a" if math.isnan(x) else (f"{x:.3f}" if x < 0.1 else f"{x:.2f}")
gb = lambda x: "n/a" if math.isnan(x) else (f"{x:.2f}" if x < 1 else f"{x:.1f}")
hdr = "| stream | lossless | " + " | ".join(f"{l:g}% loss" for l in losses if l > 0) + " |"
table = [hdr, "|---|---:|" + "---:|" * (len(losses) - 1)]
for label, abs_, rel in lines:
    table.append(f"| {label} | {gb(abs_[0])} Gb/s | "
                 + " | ".join(f"{os_(r)} ({gb(a)})" for l, r, a in zip(losses, rel, abs_) if l > 0) + " |")
text = "\n".join(table)
print(text)
if write_doc == "1":
    import os
    os.makedirs(os.path.dirname(jpath), exist_ok=True)
    json.dump(data, open(jpath, "w"), indent=1)
    doc = open(out).read()
    begin, end = "<!-- LOSS:BEGIN (proto-tests/bench/loss.sh) -->", "<!-- LOSS:END -->"
    body = (f"{begin}\nGoodput relative to the same stream without loss in the same run, medians of "
            f"{runs} runs of {float(secs):g} s streams on {rev} (in parentheses: the median "
            f"Gb/s):\n\n{text}\n\n![goodput against loss](perf/loss.svg)\n{end}")
    if begin in doc and end in doc:
        a, b = doc.index(begin), doc.index(end) + len(end)
        doc = doc[:a] + body + doc[b:]
    else:
        doc = doc.rstrip("\n") + "\n\n## Under loss\n\n" + body + "\n"
    open(out, "w").write(doc)
EOF
if [ "$WRITE_DOC" = 1 ]; then
  (cd "$ROOT" && cargo run -q --release -p rocex-plot -- --loss docs/perf/loss.json docs/perf) >&2 ||
    echo "rocex-plot failed: docs/perf/loss.svg is from an earlier run" >&2
fi
