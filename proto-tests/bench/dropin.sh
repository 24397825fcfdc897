#!/usr/bin/env bash
# The drop-in libibverbs against rocex's own client, through the same pair of rocexd in the
# same run: Debian's ib_write_bw (64 KiB) under `rocex run` against `rocex perf write bw`,
# and ib_write_lat (8 B, p50 = perftest's t_typical) against `rocex perf write lat`.
# Two namespaces on a veth pair (MTU 9000, 198.18.214.1/24 <-> 198.18.214.2/24), rocexd A and
# B (UDP backend, MTU 4096); each run does the four measurements one after another, first
# with nothing pinned, then with daemon A and the client on cpu0, daemon B and the server on
# cpu1. Prints every run's figures and a markdown table of the medians and the ratios
# drop-in / rocex perf. The daemons run with `--no-direct`; with --direct, with `--direct`:
# each program's engine runs in its own process (docs/architecture.md, "The direct data
# path"). A benchmark, not a test: it asserts nothing. Needs root.
#
#   proto-tests/bench/dropin.sh [--runs N] [--secs S] [--lat-iters N] [--direct]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUNS=5 SECS=4 LAT_ITERS=2000 DAEMON_FLAGS=(--no-direct)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    --secs) SECS="$2"; shift 2 ;;
    --lat-iters) LAT_ITERS="$2"; shift 2 ;;
    --direct) DAEMON_FLAGS=(--direct); shift ;;
    -h|--help) sed -n '2,/^set /{/^#/p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "dropin.sh needs root (network namespaces)" >&2; exit 1; }

if [ -n "${ROCEX:-}" ]; then
  ROCEX_BIN=$ROCEX
else
  ROCEX_BIN=$ROOT/target/release/rocex
  (cd "$ROOT" && cargo build -q --release -p rocex-cli -p rocex-daemon -p rocex-ibverbs \
    -p rocex-dv-mlx5 -p rocex-dv-efa)
fi
ROCEXD="$(dirname "$ROCEX_BIN")/rocexd"
for t in ib_write_bw ib_write_lat python3; do
  command -v "$t" >/dev/null || { echo "dropin.sh needs $t (Debian: perftest, python3)" >&2; exit 1; }
done

NA="rxdA$$" NB="rxdB$$" VA="vdA$$" VB="vdB$$"
IPA=198.18.214.1 IPB=198.18.214.2
WORK="$(mktemp -d /tmp/rocex-bench-dropin.XXXXXX)"
RES="$WORK/results.tsv"
: >"$RES"
DPA= DPB=

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for ns in "$NA" "$NB"; do
    if ip netns list 2>/dev/null | grep -qw "$ns"; then
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    fi
  done
  sleep 0.2
  for ns in "$NA" "$NB"; do ip netns del "$ns" 2>/dev/null || true; done
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$HERE/../veth.sh"
veth_pair "$NA" "$NB" "$VA" "$VB" "$IPA" "$IPB"

# inA/inB CMD...: CMD in namespace A/B, on that side's cpu when pinned, with that side's
# rocexd as $ROCEX_SOCKET (which rocex perf, rocex run and the drop-in library take).
SA="$WORK/a.sock" SB="$WORK/b.sock"
inA() { ip netns exec "$NA" env ROCEX_SOCKET="$SA" ${PIN:+taskset -c 0} "$@"; }
inB() { ip netns exec "$NB" env ROCEX_SOCKET="$SB" ${PIN:+taskset -c 1} "$@"; }

daemons_up() {
  rm -f "$SA" "$SB"
  # Not through inA/inB: a function in the background is a subshell, whose PID is not
  # the daemon's.
  ip netns exec "$NA" ${PIN:+taskset -c 0} "$ROCEXD" --addr "$IPA" --socket "$SA" "${DAEMON_FLAGS[@]}" >"$WORK/a.log" 2>&1 &
  DPA=$!
  ip netns exec "$NB" ${PIN:+taskset -c 1} "$ROCEXD" --addr "$IPB" --socket "$SB" "${DAEMON_FLAGS[@]}" >"$WORK/b.log" 2>&1 &
  DPB=$!
  for _ in $(seq 100); do [ -S "$SA" ] && [ -S "$SB" ] && return 0; sleep 0.1; done
  echo "rocexd did not start: $(tail -n 3 "$WORK"/[ab].log)" >&2
  exit 1
}

daemons_down() {
  kill "$DPA" "$DPB" 2>/dev/null || true
  wait "$DPA" "$DPB" 2>/dev/null || true
}

# Waits until something listens on TCP 18515 in namespace B while PID $1 lives.
wait_listen() {
  for _ in $(seq 200); do
    ip netns exec "$NB" ss -Hltn "sport = :18515" | grep -q . && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# pair CMD...: the server (CMD in B) and the client (CMD SERVER_ADDRESS in A); prints the
# client's output, or nothing when either failed (its stderr kept in $WORK/why).
pair() {
  local sp out=
  inB timeout 120 "$@" >"$WORK/srv.out" 2>&1 &
  sp=$!
  if wait_listen "$sp"; then
    out=$(inA timeout 120 "$@" "$IPB" 2>"$WORK/why") || out=
  fi
  wait "$sp" 2>/dev/null || out=
  echo "$out"
}

# field N PATTERN: column N of the first input line whose first column is PATTERN ("nan"
# when there is none).
field() { awk -v n="$1" -v p="$2" '$1 == p { print $n; found = 1; exit } END { if (!found) print "nan" }'; }
# The interpreter itself, not a version manager's shim (a dozen shell processes per call);
# every parse runs after the measurement it reads: a Python start beside a latency run
# preempts it on two cores.
PY="$(python3 -c 'import sys; print(sys.executable)')"
jget() { "$PY" -c 'import json, sys
try:
    d = json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]]
    print("nan" if d is None else d)
except Exception:
    print("nan")' "$1"; }

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RES"; echo "  $1 run $2 $3: $4" >&2; }

median() { "$PY" -c 'import statistics, sys
v = [float(x) for x in sys.stdin.read().split() if x != "nan"]
print(f"{statistics.median(v):.4g}" if v else "nan")'; }
# med MODE METRIC: the median of a metric's runs.
med() { awk -F'\t' -v m="$1" -v k="$2" '$1 == m && $3 == k { print $4 }' "$RES" | median; }
ratio() { "$PY" -c 'import sys
a, b = (float(x) for x in sys.argv[1:])
print("nan" if a != a or b != b or b == 0 else f"{a / b:.2f}")' "$1" "$2"; }

echo "drop-in bench${DAEMON_FLAGS:+ (rocexd ${DAEMON_FLAGS[*]})}: $RUNS runs of ${SECS} s (bandwidth) and $LAT_ITERS iterations (latency), kernel $(uname -r), $(nproc) cpus, load average $(cut -d" " -f1-3 /proc/loadavg)" >&2
for PIN in "" 1; do
  mode=$([ -n "$PIN" ] && echo pinned || echo unpinned)
  daemons_up
  for run in $(seq "$RUNS"); do
    v=$(pair "$ROCEX_BIN" perf write bw -s 65536 -m 4096 -D "$SECS" --json); v=$(jget gbps <<<"$v")
    record "$mode" "$run" perf_bw "$v"
    v=$(pair "$ROCEX_BIN" run -- ib_write_bw -s 65536 -m 4096 -D "$SECS" -F --report_gbits); v=$(field 4 65536 <<<"$v")
    record "$mode" "$run" dropin_bw "$v"
    v=$(pair "$ROCEX_BIN" perf write lat -s 8 -m 4096 -n "$LAT_ITERS" --json); v=$(jget lat_us_p50 <<<"$v")
    record "$mode" "$run" perf_lat "$v"
    v=$(pair "$ROCEX_BIN" run -- ib_write_lat -s 8 -m 4096 -n "$LAT_ITERS" -F); v=$(field 5 8 <<<"$v")
    record "$mode" "$run" dropin_lat "$v"
  done
  daemons_down
done

row() { # LABEL METRIC
  printf '| %s | %s | %s |\n' "$1" "$(med unpinned "$2")" "$(med pinned "$2")"
}
echo
echo "| median of $RUNS runs | unpinned | pinned |"
echo "|---|---|---|"
row "rocex perf write bw, 64 KiB (Gb/s)" perf_bw
row "ib_write_bw through the drop-in, 64 KiB (Gb/s)" dropin_bw
printf '| drop-in / rocex perf (goal >= 0.9) | %s | %s |\n' \
  "$(ratio "$(med unpinned dropin_bw)" "$(med unpinned perf_bw)")" \
  "$(ratio "$(med pinned dropin_bw)" "$(med pinned perf_bw)")"
row "rocex perf write lat, 8 B, p50 (us)" perf_lat
row "ib_write_lat through the drop-in, 8 B, t_typical (us)" dropin_lat
printf '| drop-in / rocex perf (goal <= 1.2) | %s | %s |\n' \
  "$(ratio "$(med unpinned dropin_lat)" "$(med unpinned perf_lat)")" \
  "$(ratio "$(med pinned dropin_lat)" "$(med pinned perf_lat)")"
