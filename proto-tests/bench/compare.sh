#!/usr/bin/env bash
# rocex side by side with what users use instead (performance goals 1-5 of docs/performance.md), on a veth pair between
# two network namespaces created here (MTU 9000, 198.18.100.1/24 <-> 198.18.100.2/24).
# Sender/client pinned to cpu0, receiver/server to cpu1 (docs/performance.md).
#
#   proto-tests/bench/compare.sh [--runs N] [--out FILE] [--no-doc] [--path-only]
#
# The data path applications take (the table "through rocexd, pinned and unpinned") runs
# the same measurements twice, pinned as above and with nothing pinned, as users run: 8 B
# WRITE round trips and 64 B SEND rate through two rocexd (rocexd --no-direct), and with the
# engine in each application's process (rocexd's default, the direct data path), against
# the engine in the perf process, 64 KiB
# WRITE on both paths against iperf3, and an idle daemon's CPU and an
# idle client's context switches (all its threads) over 10 s, on rocexd's defaults. --path-only runs just that table; side_by_side.sh
# runs it for two builds in alternation.
#
# References: iperf3 and `rocex baseline` (the kernel's own UDP path, native: one datagram
# per call, busy-poll ping-pong). Prints a table of medians and ratios and writes it into
# docs/performance.md between the GENERATED markers (the hand-written analysis around them
# is kept), the medians as JSON (docs/perf/results.json) and, with rocex-plot, the charts
# (docs/perf/*.svg). Needs root.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUNS=5
OUT="$ROOT/docs/performance.md"
WRITE_DOC=1
SECS=3
PATH_ONLY=0
ARGS=()
for a in "$@"; do [ "$a" = --path-only ] && PATH_ONLY=1 || ARGS+=("$a"); done
source "$HERE/args.sh"
bench_args "${ARGS[@]}"

[ "$(id -u)" = 0 ] || { echo "compare.sh needs root (network namespaces)" >&2; exit 1; }

ROCEX="${ROCEX:-$ROOT/target/release/rocex}"
ROCEXD="${ROCEXD:-$(dirname "$ROCEX")/rocexd}"
if [ ! -x "$ROCEX" ] || [ ! -x "$ROCEXD" ]; then
  (cd "$ROOT" && cargo build --release -p rocex-cli -p rocex-daemon)
fi
if ! command -v iperf3 >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q iperf3 >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q iperf3 >/dev/null; }
fi
# The interpreter itself, not a version manager's shim: a shim is a dozen shell processes
# and 0.1 s of CPU per call. Every parse runs after the measurement it reads, never beside
# it: on two cores a Python start preempted the latency runs it was piped from (p99 2-3x).
PY="$(python3 -c 'import sys; print(sys.executable)')"
PNAME="$(basename "$ROCEX" | cut -c1-15)"   # its name in /proc/PID/status

NA="rxbA$$"; NB="rxbB$$"
VA="vbA$$"; VB="vbB$$"
IPA=198.18.100.1; IPB=198.18.100.2
WORK="$(mktemp -d /tmp/rocex-bench.XXXXXX)"
RES="$WORK/results.tsv"
ERRS="$WORK/errors.tsv"   # metric, why it failed
: >"$ERRS"
PIDS=()

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for ns in "$NA" "$NB"; do
    if ip netns list 2>/dev/null | grep -qw "$ns"; then
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    fi
  done
  sleep 0.2
  for ns in "$NA" "$NB"; do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$VA" 2>/dev/null || true
  [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$HERE/../veth.sh"
veth_pair "$NA" "$NB" "$VA" "$VB" "$IPA" "$IPB"

# PIN=0 runs them where the scheduler likes (the data-path table's unpinned column)
inA() { if [ "${PIN:-1}" = 1 ]; then ip netns exec "$NA" taskset -c 0 "$@"; else ip netns exec "$NA" "$@"; fi; }
inB() { if [ "${PIN:-1}" = 1 ]; then ip netns exec "$NB" taskset -c 1 "$@"; else ip netns exec "$NB" "$@"; fi; }

# wait until something listens on TCP port $1 in namespace B (and, given $2, while that PID lives)
wait_tcp() {
  for _ in $(seq 100); do
    ip netns exec "$NB" ss -Hltn "sport = :$1" | grep -q . && return 0
    [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null && return 1
    sleep 0.05
  done
  return 1
}
# the peak VmHWM (kB) of the rocex processes in namespace $1, sampled until killed, into $2
hwm_watch() {
  local peak=0 p h
  while :; do
    for p in $(ip netns pids "$1" 2>/dev/null); do
      [ "$(sed -n 's/^Name:\t//p' "/proc/$p/status" 2>/dev/null)" = "$PNAME" ] || continue
      h="$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$p/status" 2>/dev/null)"
      [ -n "$h" ] && [ "$h" -gt "$peak" ] && { peak=$h; echo "$peak" >"$2"; }
    done
    sleep 0.1
  done
}
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RES"; }   # run metric value
jget() { "$PY" -c 'import json,sys
try:
    d=json.loads(sys.stdin.read().strip().splitlines()[-1])
    for k in sys.argv[1].split("."): d=d[k]
    print("nan" if d is None else d)
except Exception: print("nan")' "$1"; }

# rocex perf client/server pair; $1 = run, $2 = label, rest = perf args (client gets SERVER).
# Output as --json unless FMT is set empty; with MEMW=1 the peak RSS of the server and the
# client lands in $WORK/hwm.srv and $WORK/hwm.cli; a failure's reason in $WORK/why.
rocex_pair() {
  local run="$1" label="$2"; shift 2
  local op="$1" test="$2"; shift 2
  local fmt=(${FMT-"--json"}) wa= wb=
  rm -f "$WORK/hwm.srv" "$WORK/hwm.cli" "$WORK/why"
  if [ "${MEMW:-0}" = 1 ]; then
    hwm_watch "$NB" "$WORK/hwm.srv" & wb=$!
    hwm_watch "$NA" "$WORK/hwm.cli" & wa=$!
  fi
  inB timeout 60 "$ROCEX" perf "$op" "$test" "${SRV_ARGS[@]}" "${fmt[@]}" >"$WORK/srv.json" 2>"$WORK/srv.err" &
  local sp=$!; PIDS+=("$sp")
  if ! wait_tcp 18515 "$sp"; then
    wait "$sp" 2>/dev/null || true
    echo "server: $(tail -1 "$WORK/srv.err")" >"$WORK/why"
    echo "  $label: rocex server did not listen: $(cat "$WORK/why")" >&2
    kill "$sp" $wa $wb 2>/dev/null || true; wait $wa $wb 2>/dev/null || true
    echo nan; return
  fi
  local out
  out="$(inA timeout 60 "$ROCEX" perf "$op" "$test" "$IPB" "$@" "${fmt[@]}" 2>"$WORK/cli.err" || true)"
  wait "$sp" 2>/dev/null || true
  if [ -n "$wa" ]; then kill $wa $wb 2>/dev/null || true; wait $wa $wb 2>/dev/null || true; fi
  if [ -z "$out" ] || ! grep -q '[0-9]' <<<"$out"; then
    echo "client: $(grep -v '^\[' "$WORK/cli.err" | tail -1)" >"$WORK/why"
    echo "  $label: rocex client failed: $(cat "$WORK/why")" >&2; out='{}'
  fi
  echo "$out"
}
# records why metric $1 failed in this run (once per metric)
record_why() {
  [ -s "$WORK/why" ] && ! grep -q "^$1	" "$ERRS" && printf '%s\t%s\n' "$1" "$(cat "$WORK/why")" >>"$ERRS"
  return 0
}
# perftest's latency row as: min p50 p99 p99.9 max (us, half round trips)
latrow() { "$PY" -c 'import sys
lines = sys.stdin.read().splitlines()
for i, l in enumerate(lines):
    if "t_typical" in l and i + 1 < len(lines):
        r = lines[i + 1].split()  # bytes iters min max typical avg stdev p99 p99.9
        print(r[2], r[4], r[7], r[8], r[3]); break
else:
    print("nan nan nan nan nan")'; }

# starts rocexd A on cpu0 and B on cpu1 (unpinned with PIN=0) with backend $2 and any
# further flags ($3...), control sockets $WORK/$1A.sock and $WORK/$1B.sock (set in SA and
# SB), and waits for both sockets
daemons_up() {
  SA="$WORK/$1A.sock" SB="$WORK/$1B.sock"
  rm -f "$SA" "$SB"
  local pa=(taskset -c 0) pb=(taskset -c 1) tag="$1" backend="$2"
  shift 2
  [ "${PIN:-1}" = 1 ] || pa=() pb=()
  # started directly, not through inA/inB, so that $! is the daemon's own PID
  ip netns exec "$NA" "${pa[@]}" "$ROCEXD" --addr "$IPA" --socket "$SA" --backend "$backend" "$@" >"$WORK/${tag}A.log" 2>&1 &
  DPA=$!; PIDS+=("$DPA")
  ip netns exec "$NB" "${pb[@]}" "$ROCEXD" --addr "$IPB" --socket "$SB" --backend "$backend" "$@" >"$WORK/${tag}B.log" 2>&1 &
  DPB=$!; PIDS+=("$DPB")
  for _ in $(seq 50); do [ -S "$SA" ] && [ -S "$SB" ] && break; sleep 0.1; done
}

daemons_down() {
  kill "$DPA" "$DPB" 2>/dev/null; wait "$DPA" "$DPB" 2>/dev/null || true
}

# two rocexd (afpacket); client A sends one 8-byte WRITE at a time for 3 s; prints daemon
# A's doorbell-to-wire p50 and p99 and doorbell-to-send-return p50, in us ("nan nan nan"
# when the run failed)
daemon_wire() {
  local sp out
  daemons_up d afpacket
  ip netns exec "$NB" timeout 30 "$ROCEX" perf write bw --size 8 --socket "$SB" >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp")
  wait_tcp 18515 "$sp" &&
    ip netns exec "$NA" timeout 30 "$ROCEX" perf write bw "$IPB" --size 8 --tx-depth 1 --duration 3 --socket "$SA" >/dev/null 2>&1
  wait "$sp" 2>/dev/null || true
  out="$("$ROCEX" stat --socket "$SA" --json 2>/dev/null | "$PY" -c 'import json,sys
try:
    d = json.load(sys.stdin)["device"]["daemon"]
    print(*(d[k] / 1000 if d.get("doorbell_to_wire_samples") else "nan"
            for k in ("doorbell_to_wire_p50_ns", "doorbell_to_wire_p99_ns", "doorbell_to_sent_p50_ns")))
except Exception: print("nan nan nan")')"
  daemons_down
  echo "${out:-nan nan nan}"
}

# goal 1 as the issue words it: two rocexd (UDP backend, GSO/GRO, --no-direct), each client on its
# daemon's cpu; the client writes 64 KiB messages for $SECS s; prints its Gb/s ("nan" when
# the run failed)
daemon_bw() {
  local sp j=""
  daemons_up b udp --no-direct
  inB timeout 30 "$ROCEX" perf write bw --size 65536 --mtu 4096 --socket "$SB" >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp")
  wait_tcp 18515 "$sp" &&
    j="$(inA timeout 30 "$ROCEX" perf write bw "$IPB" --size 65536 --mtu 4096 --duration "$SECS" --socket "$SA" --json 2>/dev/null | tail -n 1)"
  wait "$sp" 2>/dev/null || true
  daemons_down
  jget gbps <<<"$j"
}

# the 8-byte WRITE round trip (perftest's half round trips doubled): p50 and p99 in us,
# through the two rocexd at SA/SB when $1 = daemon, else with the engine in the perf
# process (UDP backend, the daemons' own)
path_lat() {
  local where=(--backend udp) srv=(--backend udp) r
  [ "$1" = daemon ] && where=(--socket "$SA") && srv=(--socket "$SB")
  SRV_ARGS=(--size 8 --iters 5000 "${srv[@]}")
  r="$(FMT= rocex_pair "$run" "path_lat_$1" write lat --size 8 --iters 5000 "${where[@]}")"
  r="$(latrow <<<"$r")"
  read -r _ l50 l99 _ _ <<<"$r"
  "$PY" -c 'import sys; print(*(2 * float(x) for x in sys.argv[1:]))' "$l50" "$l99"
}

# the data-path table for one placement ($1: pinned or unpinned): the application's path
# through the two rocexd (--no-direct, "rocexd"), then with the engine in each
# application's process and rocexd keeping the control path (--direct, "direct")
path_table() {
  local mode="$1" j bps via
  PIN=1; [ "$mode" = unpinned ] && PIN=0
  for via in rocexd direct; do
    if [ "$via" = direct ]; then daemons_up p udp --direct; else daemons_up p udp --no-direct; fi
    read -r a b <<<"$(path_lat daemon)"; record "$run" "path_${mode}_${via}_lat_p50_us" "$a"; record "$run" "path_${mode}_${via}_lat_p99_us" "$b"
    SRV_ARGS=(--size 64 --iters 200000 --socket "$SB")
    j="$(rocex_pair "$run" "path_send64_$via" send bw --size 64 --iters 200000 --socket "$SA")"
    record "$run" "path_${mode}_${via}_send64_mpps" "$(jget mpps <<<"$j")"
    SRV_ARGS=(--size 65536 --mtu 4096 --socket "$SB")
    j="$(rocex_pair "$run" "path_wbw_$via" write bw --size 65536 --mtu 4096 --duration "$SECS" --socket "$SA")"
    record "$run" "path_${mode}_${via}_wbw_gbps" "$(jget gbps <<<"$j")"
    record "$run" "path_${mode}_${via}_wbw_cpu_user_s" "$(jget cpu_user_s <<<"$j")"
    record "$run" "path_${mode}_${via}_wbw_cpu_sys_s" "$(jget cpu_sys_s <<<"$j")"
    daemons_down
  done
  read -r a b <<<"$(path_lat inproc)"; record "$run" "path_${mode}_inproc_lat_p50_us" "$a"; record "$run" "path_${mode}_inproc_lat_p99_us" "$b"
  SRV_ARGS=(--size 64 --iters 200000)
  j="$(rocex_pair "$run" path_send64_inproc send bw --size 64 --iters 200000)"
  record "$run" "path_${mode}_inproc_send64_mpps" "$(jget mpps <<<"$j")"
  inB timeout 20 iperf3 -s -1 -B "$IPB" >/dev/null 2>&1 &
  local sp=$!; PIDS+=("$sp")
  bps=nan
  if wait_tcp 5201; then
    bps="$(inA timeout 20 iperf3 -c "$IPB" -t "$SECS" -J 2>/dev/null)"
    bps="$(printf '%s' "$bps" | "$PY" -c 'import json,sys
try: print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9)
except Exception: print("nan")')"
  fi
  wait "$sp" 2>/dev/null || true
  record "$run" "path_${mode}_iperf3_gbps" "$bps"
  PIN=1
}

# CPU seconds (user + system) a process has used
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo nan; }
# its context switches, voluntary plus involuntary, summed over its threads
ctxsw() { [ -d "/proc/$1" ] && awk '/ctxt_switches/ {n += $2} END {print n + 0}' /proc/"$1"/task/*/status 2>/dev/null || echo nan; }

# idle: two rocexd on their defaults (nothing pinned), a client of daemon B connected and
# set up (a `rocex perf` server: device open, PD allocated, waiting for its peer), no
# traffic for 10 s; records both daemons' CPU (% of a core) and the client's context
# switches
path_idle() {
  local sp c0 a0 b0 s0 t0 t1
  PIN=0
  daemons_up i udp
  ip netns exec "$NB" "$ROCEX" perf write bw --size 8 --socket "$SB" >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp")
  if wait_tcp 18515 "$sp"; then
    local cli=$sp
    sleep 1
    t0=$(date +%s.%N); a0=$(cpu_s "$DPA"); b0=$(cpu_s "$DPB"); c0=$(ctxsw "$cli"); s0=$(ctxsw "$DPB")
    sleep 10
    t1=$(date +%s.%N)
    record "$run" path_idle_daemon_client_pct "$("$PY" -c 'import sys; a,b,t0,t1=map(float,sys.argv[1:]); print(100*(b-a)/(t1-t0))' "$b0" "$(cpu_s "$DPB")" "$t0" "$t1")"
    record "$run" path_idle_daemon_alone_pct "$("$PY" -c 'import sys; a,b,t0,t1=map(float,sys.argv[1:]); print(100*(b-a)/(t1-t0))' "$a0" "$(cpu_s "$DPA")" "$t0" "$t1")"
    record "$run" path_idle_daemon_wakeups_per_s "$("$PY" -c 'import sys; a,b,t0,t1=map(float,sys.argv[1:]); print((b-a)/(t1-t0))' "$s0" "$(ctxsw "$DPB")" "$t0" "$t1")"
    record "$run" path_idle_client_ctxsw "$(( $(ctxsw "$cli") - c0 ))"
  fi
  kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null || true
  daemons_down
  PIN=1
}

echo "rocex bench: $RUNS runs, namespaces $NA/$NB, veth MTU 9000, kernel $(uname -r)" >&2
T0=$SECONDS
for run in $(seq 1 "$RUNS"); do
  echo "run $run/$RUNS ($((SECONDS - T0)) s)" >&2

  # (1c) the ICRC on one core: what each end of a RoCE v2 stream pays per byte on top of
  # its kernel work (both tables' bound rows)
  j="$(inA timeout 20 "$ROCEX" baseline icrc 1 2>/dev/null)"
  record "$run" icrc_gbps "$(jget gbps <<<"$j")"

  # (8) the data path applications take, pinned and unpinned (its own table)
  for mode in pinned unpinned; do path_table "$mode"; done
  path_idle
  [ "$PATH_ONLY" = 1 ] && continue

  # (1) iperf3, one TCP stream
  inB timeout 20 iperf3 -s -1 -B "$IPB" >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp")
  if wait_tcp 5201; then
    j="$(inA timeout 20 iperf3 -c "$IPB" -t "$SECS" -J 2>/dev/null || true)"
    read -r bps csnd crcv <<<"$(printf '%s' "$j" | "$PY" -c 'import json,sys
try:
    e = json.load(sys.stdin)["end"]; c = e["cpu_utilization_percent"]
    print(e["sum_received"]["bits_per_second"] / 1e9, c["host_total"], c["remote_total"])
except Exception: print("nan nan nan")')"
  else bps=nan csnd=nan crcv=nan; fi
  wait "$sp" 2>/dev/null || true
  record "$run" iperf3_gbps "$bps"
  record "$run" iperf3_cpu_snd_pct "$csnd"
  record "$run" iperf3_cpu_rcv_pct "$crcv"

  # (2) rocex write bw, 64 KiB, MTU 4096
  SRV_ARGS=(--size 65536 --mtu 4096)
  j="$(rocex_pair "$run" write_bw_64k write bw --size 65536 --mtu 4096 --duration "$SECS")"
  record "$run" rocex_wbw_gbps "$(jget gbps <<<"$j")"
  record "$run" rocex_wbw_msg_mpps "$(jget mpps <<<"$j")"
  record "$run" rocex_wbw_cpu_user_s "$(jget cpu_user_s <<<"$j")"
  record "$run" rocex_wbw_cpu_sys_s "$(jget cpu_sys_s <<<"$j")"

  # (2c) the same through two rocexd, the daemon applications use
  record "$run" rocexd_wbw_gbps "$(daemon_bw)"

  # (2b) the per-frame path (goal 2): the same with one datagram per packet each way, no
  # GSO/GRO batching, as when the peer is kernel rxe
  j="$(rocex_pair "$run" write_bw_64k_nogso write bw --size 65536 --mtu 4096 --duration "$SECS" --no-gso)"
  record "$run" rocex_wbw_nogso_gbps "$(jget gbps <<<"$j")"
  record "$run" rocex_wbw_nogso_msg_mpps "$(jget mpps <<<"$j")"

  # (3) raw UDP, one datagram per syscall, RoCE-sized (12 BTH + 4096 + 4 ICRC = 4112 B, a
  # WRITE's middle packet)
  inB timeout 20 "$ROCEX" baseline sink "$IPB:19000" $((SECS + 6)) >"$WORK/sink.json" 2>/dev/null &
  sp=$!; PIDS+=("$sp"); sleep 0.4
  inA timeout 20 "$ROCEX" baseline blast "$IPB:19000" 4112 "$SECS" >"$WORK/blast.json" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  record "$run" udp4k_mpps "$(jget mpps <"$WORK/sink.json")"
  record "$run" udp4k_gbps "$(jget gbps_payload <"$WORK/sink.json")"
  record "$run" udp4k_sent_mpps "$(jget mpps <"$WORK/blast.json")"

  # (3b) raw UDP at the size of a 64-byte SEND (12 BTH + 64 + 4 ICRC = 80 B), for goal 4
  inB timeout 20 "$ROCEX" baseline sink "$IPB:19002" 8 >"$WORK/sink.json" 2>/dev/null &
  sp=$!; PIDS+=("$sp"); sleep 0.4
  inA timeout 20 "$ROCEX" baseline blast "$IPB:19002" 80 2 >/dev/null 2>&1 || true
  wait "$sp" 2>/dev/null || true
  record "$run" udp80_mpps "$(jget mpps <"$WORK/sink.json")"

  # (4) latency: rocex write lat 8 B, busy polling, on the afpacket backend (goal 3) and on
  # the UDP backend, against the kernel's UDP busy-poll ping-pong (40 B = an 8-byte WRITE's
  # UDP payload); perftest's table rather than --json, for the whole distribution
  for be in afpacket udp; do
    pre=rocex_lat; [ "$be" = udp ] && pre=rocex_udp_lat
    SRV_ARGS=(--size 8 --iters 20000 --backend "$be")
    j="$(FMT= rocex_pair "$run" "write_lat_$be" write lat --size 8 --iters 20000 --backend "$be")"
    read -r lmin l50 l99 l999 lmax <<<"$(latrow <<<"$j")"
    record "$run" "${pre}_min_us" "$lmin"
    record "$run" "${pre}_p50_us" "$l50"
    record "$run" "${pre}_p99_us" "$l99"
    record "$run" "${pre}_p999_us" "$l999"
    record "$run" "${pre}_max_us" "$lmax"
  done
  inB timeout 20 "$ROCEX" baseline pong "$IPB:19001" 15 >/dev/null 2>&1 &
  sp=$!; PIDS+=("$sp"); sleep 0.4
  j="$(inA timeout 20 "$ROCEX" baseline ping "$IPB:19001" 40 20000 2>/dev/null || echo '{}')"
  wait "$sp" 2>/dev/null || true
  for k in min p50 p99 p999 max; do record "$run" "udp_rtt_${k}_us" "$(jget "rtt_us_$k" <<<"$j")"; done
  record "$run" recv_call_us "$(jget recv_call_us <<<"$j")"

  # (4b) goal 3's doorbell-to-wire inside rocexd (afpacket): one 8-byte WRITE in flight at
  # a time between two daemons, then the daemon's own histogram (`rocex stat`)
  read -r d2w50 d2w99 d2s50 <<<"$(daemon_wire "$run")"
  record "$run" d2w_p50_us "$d2w50"
  record "$run" d2w_p99_us "$d2w99"
  record "$run" d2s_p50_us "$d2s50"

  # (5) message rate, 64-byte SEND and WRITE, 1 QP and 16 QPs
  for q in 1 16; do
    SRV_ARGS=(--size 64 --iters $((400000 / q)) --qps "$q")
    j="$(rocex_pair "$run" send_bw_64 send bw --size 64 --iters $((400000 / q)) --qps "$q")"
    record "$run" "rocex_send64_q${q}_mpps" "$(jget mpps <<<"$j")"
    SRV_ARGS=(--size 64 --qps "$q")
    j="$(rocex_pair "$run" write_bw_64 write bw --size 64 --duration 2 --qps "$q")"
    record "$run" "rocex_write64_q${q}_mpps" "$(jget mpps <<<"$j")"
  done

  # (6) message-size sweep, WRITE bw 4 KiB..1 MiB, 1 QP, MTU 4096
  for s in 4096 16384 65536 262144 1048576; do
    SRV_ARGS=(--size "$s" --mtu 4096)
    j="$(rocex_pair "$run" "write_bw_$s" write bw --size "$s" --mtu 4096 --duration 2)"
    record "$run" "rocex_wbw_s${s}_gbps" "$(jget gbps <<<"$j")"; record_why "rocex_wbw_s${s}_gbps"
  done

  # (7) goal 5, scale: WRITE bw 64 KiB with 1..4096 RC QPs (one receive per QP: WRITEs
  # need none), and the peak RSS of each side
  for q in 1 16 64 256 1024 4096; do
    SRV_ARGS=(--size 65536 --mtu 4096 --qps "$q" --rx-depth 1)
    j="$(MEMW=1 rocex_pair "$run" "write_bw_q$q" write bw --size 65536 --mtu 4096 --qps "$q" --rx-depth 1 --duration 3)"
    g="$(jget gbps <<<"$j")"
    record "$run" "rocex_wbw_q${q}_gbps" "$g"; record_why "rocex_wbw_q${q}_gbps"
    if [ "$g" != nan ]; then
      record "$run" "rocex_q${q}_srv_hwm_kb" "$(cat "$WORK/hwm.srv" 2>/dev/null || echo nan)"
      record "$run" "rocex_q${q}_cli_hwm_kb" "$(cat "$WORK/hwm.cli" 2>/dev/null || echo nan)"
    fi
  done
  # (7c) goal 5's memory per QP without the test's own 64 KiB buffers per QP: 64-byte
  # WRITEs, 1 and 4096 QPs
  for q in 1 4096; do
    SRV_ARGS=(--size 64 --qps "$q" --rx-depth 1)
    j="$(MEMW=1 rocex_pair "$run" "write_bw_64_q$q" write bw --size 64 --qps "$q" --rx-depth 1 --duration 2)"
    if [ "$(jget gbps <<<"$j")" != nan ]; then
      record "$run" "rocex_small_q${q}_srv_hwm_kb" "$(cat "$WORK/hwm.srv" 2>/dev/null || echo nan)"
      record "$run" "rocex_small_q${q}_cli_hwm_kb" "$(cat "$WORK/hwm.cli" 2>/dev/null || echo nan)"
    fi
  done
  # (7b) the same with 128 WRITEs in flight in total (perftest's 128 per QP overflows the
  # receiver's socket buffer with many QPs)
  for q in 16 64; do
    SRV_ARGS=(--size 65536 --mtu 4096 --qps "$q" --rx-depth 1 --tx-depth $((128 / q)))
    j="$(rocex_pair "$run" "write_bw_q${q}_d" write bw --size 65536 --mtu 4096 --qps "$q" --rx-depth 1 --tx-depth $((128 / q)) --duration 3)"
    record "$run" "rocex_wbw_q${q}_d128_gbps" "$(jget gbps <<<"$j")"; record_why "rocex_wbw_q${q}_d128_gbps"
  done
done
echo "done in $((SECONDS - T0)) s" >&2

COND="kernel $(uname -r); $(nproc) vCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); veth between two namespaces, MTU 9000; senders/clients on cpu0, receivers/servers on cpu1; $RUNS runs, medians (min-max); rocex $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') ($(date -u +%Y-%m-%dT%H:%MZ))"
PCOND="kernel $(uname -r); $(nproc) vCPU; veth between two namespaces, MTU 9000; rocexd on the UDP backend; pinned: A's daemon and client on cpu0, B's on cpu1; unpinned: nothing pinned; $RUNS runs, medians (min-max); rocex $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') ($(date -u +%Y-%m-%dT%H:%MZ))"
"$PY" "$HERE/path_report.py" "$RES" "$PCOND" "$RUNS" >"$WORK/path.md"
# side_by_side.sh gathers the raw rows of each run
[ -n "${RESULTS_TSV:-}" ] && cp "$RES" "$RESULTS_TSV"
cat "$WORK/path.md"
if [ "$WRITE_DOC" = 1 ]; then
  "$PY" "$HERE/report.py" --splice "$OUT" "$WORK/path.md" "compare.sh (data path)"
fi
[ "$PATH_ONLY" = 1 ] && exit 0
COND="kernel $(uname -r); $(nproc) vCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); veth between two namespaces, MTU 9000; senders/clients on cpu0, receivers/servers on cpu1; $RUNS runs, medians (min-max); rocex $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?') ($(date -u +%Y-%m-%dT%H:%MZ))"
"$PY" "$HERE/report.py" "$RES" "$COND" "$RUNS" --errors "$ERRS" --json "$WORK/results.json" >"$WORK/table.md"
cat "$WORK/table.md"
if [ "$WRITE_DOC" = 1 ]; then
  "$PY" "$HERE/report.py" --splice "$OUT" "$WORK/table.md"
  echo "wrote $OUT" >&2
  PERF_DIR="$(dirname "$OUT")/perf"
  mkdir -p "$PERF_DIR"
  cp "$WORK/results.json" "$PERF_DIR/results.json"
  (cd "$ROOT" && cargo run -q --release -p rocex-plot -- "$PERF_DIR/results.json" "$PERF_DIR") >&2 ||
    echo "rocex-plot failed: the charts in $PERF_DIR are from an earlier run" >&2
fi
