#!/usr/bin/env bash
# The soak test: two rocexd, each in its own network namespace, joined by a veth pair (MTU
# 9000, 198.18.205.1/24 <-> 198.18.205.2/24), each injecting 10% loss, duplication,
# reordering and corruption into every packet it sends (different seeds). `rocex soak`
# runs in the root namespace as the client of both daemons (their control sockets are in a
# temporary directory) and moves mixed, checked messages over 16 RC QP pairs. Each
# daemon's RSS (VmRSS) is sampled after setup, every few seconds, and at the end.
#
#   proto-tests/soak/soak.sh [--quick] [--messages N] [--qps N] [--seed N] [--faults SPEC]
#                            [-- MORE ROCEX SOAK FLAGS (--window, --mtu, --timeout, ...)]
#
# Fails when `rocex soak` reports anything lost, duplicated, corrupted, reordered, an
# inconsistent atomic or an error completion, or when a daemon's RSS, after warm-up (the
# sample at 10% of the messages), grows by more than 20% + 8 MiB. Full run: 1,000,000
# messages; --quick: 400,000 (CI, about a minute). Results and logs: target/soak/. Needs root.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MESSAGES=1000000
QPS=16
SEED=1
FAULTS="loss=0.1,dup=0.1,reorder=0.1,corrupt=0.1"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) MESSAGES=400000; shift ;;
    --messages) MESSAGES="$2"; shift 2 ;;
    --qps) QPS="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --faults) FAULTS="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done

[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 1; }

# Growth allowed after warm-up: 20% of the warm RSS plus 8 MiB (in kB, as /proc shows it).
GROWTH_PCT=20
GROWTH_KB=8192
SAMPLE_SECS=2

(cd "$ROOT" && cargo build -q --release -p rocex-cli -p rocex-daemon)
ROCEX="$ROOT/target/release/rocex"
ROCEXD="$ROOT/target/release/rocexd"

OUT="$ROOT/target/soak"
mkdir -p "$OUT"
rm -f "$OUT"/{a.log,b.log,soak.log,soak.json,rss.tsv,summary.txt}
NA="h5a$$"; NB="h5b$$"
VA="h5va$$"; VB="h5vb$$"
IPA=198.18.205.1; IPB=198.18.205.2
SOCKS="$(mktemp -d /tmp/rocex-soak.XXXXXX)"
PID_A=""; PID_B=""; PID_SOAK=""

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "$PID_SOAK" "$PID_A" "$PID_B"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  for p in "$PID_SOAK" "$PID_A" "$PID_B"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  ip link del "$VA" 2>/dev/null || true
  rm -rf "$SOCKS"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$HERE/../veth.sh"
veth_pair "$NA" "$NB" "$VA" "$VB" "$IPA" "$IPB"

# `ip netns exec` and `env` exec in place: $! is the daemon's own PID.
ip netns exec "$NA" env RUST_LOG=info NO_COLOR=1 "$ROCEXD" --addr "$IPA" --socket "$SOCKS/a.sock" --peers-are-rocex \
  --inject "$FAULTS,seed=$((SEED * 2 + 101))" 2>"$OUT/a.log" &
PID_A=$!
ip netns exec "$NB" env RUST_LOG=info NO_COLOR=1 "$ROCEXD" --addr "$IPB" --socket "$SOCKS/b.sock" --peers-are-rocex \
  --inject "$FAULTS,seed=$((SEED * 2 + 102))" 2>"$OUT/b.log" &
PID_B=$!
for _ in $(seq 100); do
  [ -S "$SOCKS/a.sock" ] && [ -S "$SOCKS/b.sock" ] && break
  sleep 0.1
done
[ -S "$SOCKS/a.sock" ] && [ -S "$SOCKS/b.sock" ] || { echo "soak.sh: rocexd did not start" >&2; cat "$OUT"/[ab].log >&2; exit 1; }

rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
done_count() {
  local d
  d=$(grep -o 'done=[0-9]*' "$OUT/soak.log" 2>/dev/null | tail -n1 | cut -d= -f2) || true
  echo "${d:-0}"
}

START=$(date +%s)
: >"$OUT/soak.log"
# --hold: the client keeps everything allocated for a while after its summary, so that the
# end sample sees the daemons as they were at the end of the run.
"$ROCEX" soak --socket-a "$SOCKS/a.sock" --socket-b "$SOCKS/b.sock" --qps "$QPS" \
  --messages "$MESSAGES" --seed "$SEED" --json --hold 5 --progress 2 "$@" >"$OUT/soak.json" 2>"$OUT/soak.log" &
PID_SOAK=$!
tail -n +1 -f "$OUT/soak.log" --pid "$PID_SOAK" >&2 &

# Samples: seconds, messages done, RSS of A and B in kB, and the phase: start (after
# setup), warming, warm (the first sample at 10% of the messages), run, end (the run's
# summary is out, everything still allocated), after (the client is gone).
printf 'secs\tdone\trss_a_kb\trss_b_kb\tphase\n' >"$OUT/rss.tsv"
sample() {
  printf '%s\t%s\t%s\t%s\t%s\n' "$(($(date +%s) - START))" "$(done_count)" "$(rss "$PID_A")" \
    "$(rss "$PID_B")" "$1" >>"$OUT/rss.tsv"
}
phase=setup
while kill -0 "$PID_SOAK" 2>/dev/null; do
  if grep -q '^soak \(ok\|FAILED\)' "$OUT/soak.log"; then
    sample end
    break
  elif [ "$phase" = setup ]; then
    grep -q '^soak: ready' "$OUT/soak.log" && { sample start; phase=warming; }
  elif [ "$phase" = warming ] && [ "$(done_count)" -ge $((MESSAGES / 10)) ]; then
    sample warm; phase=run
  else
    sample "$phase"
  fi
  sleep 1
done
SOAK_RC=0
wait "$PID_SOAK" || SOAK_RC=$?
PID_SOAK=""
sample after

# Stop the daemons: each logs its engine counters and what it injected as it stops.
kill -TERM "$PID_A" "$PID_B" 2>/dev/null || true
wait "$PID_A" || true
wait "$PID_B" || true
PID_A=""; PID_B=""

col() { awk -F'\t' -v p="$1" -v c="$2" '$5 == p { print $c; exit }' "$OUT/rss.tsv"; }
# The bound applies from warm-up on; a run too short to be sampled at 10% is judged from
# its first sample.
base=warm
[ -n "$(col warm 3)" ] || base=start
[ -n "$(col start 3)" ] || base=end
WARM_A=$(col "$base" 3); WARM_B=$(col "$base" 4)
MAX_A=$(awk -F'\t' -v b="$base" '$5 == b { on = 1 } on && $5 != "after" && $3 > m { m = $3 } END { print m + 0 }' "$OUT/rss.tsv")
MAX_B=$(awk -F'\t' -v b="$base" '$5 == b { on = 1 } on && $5 != "after" && $4 > m { m = $4 } END { print m + 0 }' "$OUT/rss.tsv")
WARM_A=${WARM_A:-0}; WARM_B=${WARM_B:-0}
LIMIT_A=$((WARM_A + WARM_A * GROWTH_PCT / 100 + GROWTH_KB))
LIMIT_B=$((WARM_B + WARM_B * GROWTH_PCT / 100 + GROWTH_KB))

MEM_OK=1
[ "$WARM_A" -gt 0 ] && [ "$WARM_B" -gt 0 ] || MEM_OK=0
[ "$MAX_A" -le "$LIMIT_A" ] || MEM_OK=0
[ "$MAX_B" -le "$LIMIT_B" ] || MEM_OK=0

{
  echo "== soak: $MESSAGES messages, $QPS QPs, faults $FAULTS on both daemons"
  grep '^soak \(ok\|FAILED\)' "$OUT/soak.log" || echo "rocex soak exited $SOAK_RC without a summary"
  if [ -n "$(col "$base" 3)" ]; then
    for x in a:3:$WARM_A:$MAX_A:$LIMIT_A b:4:$WARM_B:$MAX_B:$LIMIT_B; do
      IFS=: read -r s c warm max limit <<<"$x"
      echo "rss kB $s: start=$(col start "$c") $base=$warm max_since=$max end=$(col end "$c") limit=$limit after_client=$(col after "$c")"
    done
  else
    echo "rss: no samples (the run did not start)"
  fi
  for s in a b; do
    echo "rocexd $s at shutdown: $(grep -o 'stopped; .*' "$OUT/$s.log" | tail -n1)"
  done
} | tee "$OUT/summary.txt"

if [ "$SOAK_RC" != 0 ]; then
  echo "FAIL: rocex soak exited $SOAK_RC (see $OUT/soak.log)" >&2
  exit 1
fi
if [ "$MEM_OK" != 1 ]; then
  echo "FAIL: a daemon's RSS grew beyond warm + ${GROWTH_PCT}% + $((GROWTH_KB / 1024)) MiB (see $OUT/rss.tsv)" >&2
  exit 1
fi
echo "PASS: soak ($OUT/summary.txt)"
