#!/usr/bin/env bash
# Run one rxe lab scenario: kernel Soft-RoCE (rdma_rxe) in QEMU guests on a
# bridge inside a private network namespace, everything on the bridge captured
# to a pcap.
#
# Usage: run.sh SCENARIO [options]
#   --out FILE.pcap     capture file (default target/rxe-lab/SCENARIO.pcap)
#   --mtu N             RoCE path MTU: 256|512|1024|2048|4096 (default: the
#                       scenario's, else 1024); sets the guests' netdev MTU so
#                       rxe's active MTU matches, and $MTU for the tools
#   --loss PCT          netem loss on every guest's eth0 egress (RoCE frames)
#   --delay MS          netem delay
#   --reorder PCT       netem reorder (needs a delay; 1 ms is used if none)
#   --netem-all         apply netem to all frames (also the out-of-band TCP)
#   --ipv6              RoCE v2 over IPv6 (ULA) GIDs
#   --guests 1|2        two guests (server + client, default) or one guest
#                       running both sides over rxe loopback
#   --host-cmd 'CMD'    one guest only; CMD runs inside the namespace on the
#                       bridge's host side once the guest is ready, with
#                       RXE_LAB_GUEST_IP, RXE_LAB_HOST_IP (and _IP6), RXE_LAB_MTU,
#                       RXE_LAB_NETMTU, RXE_LAB_BRIDGE, RXE_LAB_NETNS,
#                       RXE_LAB_GUEST_ROLE, RXE_LAB_SCENARIO in its environment
#   --guest-role R      with --host-cmd: the scenario side the guest runs,
#                       server (default) or client (then PEER is the host)
#   --set NAME=VALUE    a variable for the scenario (e.g. SIZE=65536 ITERS=100
#                       for the ping-pong scenarios); repeatable
#   --rocex FILE        ship a host-built rocex binary (stripped) into every
#                       guest as /scenario/rocex ($ROCEX in the scenario)
#   --timeout S         hard limit for the whole run (default 180)
#   --accel auto|kvm|tcg  (default auto: KVM if it boots the guest, else TCG)
#   --mem MB            guest memory (default 512)
#   --verbose           print the full guest consoles
#   --list              list the scenarios
# Exit status 0 when every side of the scenario (and the host command)
# succeeded; 75 when it failed and a guest's kernel crashed (oops or panic).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCN_DIR=$RXE_LAB_DIR/scenarios
usage() { sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; }

if [[ ${1:-} == --list ]]; then
  for f in "$SCN_DIR"/*.sh; do
    printf '%-22s %s\n' "$(basename "$f" .sh)" "$(sed -n 's/^# desc: //p' "$f")"
  done
  exit 0
fi
[[ $# -ge 1 && ${1:-} != -* ]] || { usage; exit 2; }
SCENARIO=$1; shift
SCN_FILE=$SCN_DIR/$SCENARIO.sh
[[ -f $SCN_FILE ]] || die "no scenario $SCENARIO (see run.sh --list)"
meta() { sed -n "s/^# $1: //p" "$SCN_FILE" | head -n1; }

OUT= MTU= LOSS= DELAY= REORDER= NETEM_ALL=0 IPV6=0 GUESTS=2 HOST_CMD= GUEST_ROLE=server
TIMEOUT=180 ACCEL=${RXE_LAB_ACCEL:-auto} MEM=512 VERBOSE=0 SETS=() ROCEX_BIN=
while (($#)); do
  case $1 in
    --out) OUT=$2; shift ;;
    --mtu) MTU=$2; shift ;;
    --loss) LOSS=$2; shift ;;
    --delay) DELAY=$2; shift ;;
    --reorder) REORDER=$2; shift ;;
    --netem-all) NETEM_ALL=1 ;;
    --ipv6) IPV6=1 ;;
    --guests) GUESTS=$2; shift ;;
    --host-cmd) HOST_CMD=$2; GUESTS=1; shift ;;
    --guest-role) GUEST_ROLE=$2; shift ;;
    --timeout) TIMEOUT=$2; shift ;;
    --rocex) ROCEX_BIN=$2; shift ;;
    --set) [[ $2 =~ ^[A-Z][A-Z0-9_]*=[A-Za-z0-9._:/-]*$ ]] || die "--set takes NAME=VALUE (upper-case name, plain value)"
           SETS+=("$2"); shift ;;
    --accel) ACCEL=$2; shift ;;
    --mem) MEM=$2; shift ;;
    --verbose|-v) VERBOSE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1" ;;
  esac
  shift
done

[[ $EUID -eq 0 ]] || die "run as root (network namespace, taps)"
[[ -s $RXE_LAB_VMLINUX && -s $RXE_LAB_INITRD ]] || die "no guest image: run build.sh (just rxe-lab-build)"
[[ $(meta ipv6) == yes ]] && IPV6=1
MTU=${MTU:-$(meta mtu)}; MTU=${MTU:-1024}
case $MTU in
  256) NETMTU=356 ;; 512) NETMTU=612 ;; 1024) NETMTU=1500 ;; 2048) NETMTU=2200 ;; 4096) NETMTU=9000 ;;
  *) die "--mtu must be 256|512|1024|2048|4096" ;;
esac
# IPv6 needs a link MTU of at least 1280; the tools get -m for smaller path MTUs.
((IPV6 && NETMTU < 1280)) && NETMTU=1500
[[ $GUESTS == 1 || $GUESTS == 2 ]] || die "--guests must be 1 or 2"
[[ $GUEST_ROLE == server || $GUEST_ROLE == client ]] || die "--guest-role must be server or client"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be seconds"
[[ -z $ROCEX_BIN || -x $ROCEX_BIN ]] || die "--rocex $ROCEX_BIN: not an executable"

NETEM=
[[ -n $DELAY || -n $REORDER ]] && NETEM+="delay ${DELAY:-1}ms "
[[ -n $LOSS ]] && NETEM+="loss ${LOSS}% "
[[ -n $REORDER ]] && NETEM+="reorder ${REORDER}% "
NETEM=${NETEM% }

if [[ -z $OUT ]]; then
  suffix=
  [[ -n $LOSS ]] && suffix+="-loss$LOSS"
  ((IPV6)) && [[ $(meta ipv6) != yes ]] && suffix+="-ipv6"
  OUT=${RXE_LAB_OUT:-$PWD/target/rxe-lab}/$SCENARIO$suffix.pcap
fi
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")

# Addresses: benchmarking range only, nothing routed out of the namespace.
HOST4=198.18.0.1 HOST6=fd00:198:18::1
G_IP4=(198.18.0.11 198.18.0.12) G_IP6=(fd00:198:18::11 fd00:198:18::12)

NS=rocexlab-$$
TMP=$(mktemp -d "${TMPDIR:-/tmp}/rocexlab.XXXXXX")
QPIDS=() TDPID= HPID=
T_START=$(date +%s)

cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  for p in "${QPIDS[@]}" ${HPID:+"$HPID"}; do kill -TERM "$p" 2>/dev/null || true; done
  if [[ -n $TDPID ]] && kill -0 "$TDPID" 2>/dev/null; then
    kill -INT "$TDPID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$TDPID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$TDPID" 2>/dev/null || true
  fi
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    # Anything still running in this run's namespace was started by it.
    for p in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
    sleep 0.2
    ip netns del "$NS" 2>/dev/null || true
  fi
  for p in "${QPIDS[@]}" ${HPID:+"$HPID"}; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

nsx() { ip netns exec "$NS" "$@"; }

# Accelerator: KVM when it really boots the guest, else TCG. The answer is
# cached per host boot.
detect_accel() {
  local cache=$RXE_LAB_CACHE/accel.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo x)
  if [[ -s $cache ]]; then cat "$cache"; return; fi
  local res=tcg
  if [[ -r /dev/kvm && -w /dev/kvm ]]; then
    log "trying KVM (once per host boot)"
    local log=$TMP/kvmtest.log
    timeout 12 qemu-system-x86_64 -accel kvm -cpu host -m 256 -smp 1 -nodefaults -no-user-config \
      -display none -serial "file:$log" -no-reboot -kernel "$RXE_LAB_VMLINUX" \
      -append "console=ttyS0 quiet panic=-1 rxelab_accel_test rdinit=/init" \
      -initrd "$RXE_LAB_INITRD" >/dev/null 2>&1 || true
    grep -q '@@RXE-LAB ALIVE' "$log" 2>/dev/null && res=kvm
  fi
  mkdir -p "$RXE_LAB_CACHE"; echo "$res" >"$cache"; echo "$res"
}
[[ $ACCEL == auto ]] && ACCEL=$(detect_accel)
case $ACCEL in
  kvm) ACCEL_ARGS=(-accel kvm -cpu host) ;;
  # TCG's `max` CPU less what TCG runs many times slower than hardware does, for rxe and
  # rocex alike (docs/rxe-lab.md): AVX (the host runs a guest's 256-bit code as host AVX and
  # leaves the upper halves dirty, so every SSE helper after it, PCLMULQDQ for the ICRC,
  # pays the SSE/AVX transition: 2-4x a guest's ICRC in some builds of rocex) and ERMS/FSRM
  # (with them the guest kernel copies with `rep movsb`, one byte per TCG step: 6.6 us per
  # 4 KiB, where an 8-byte copy loop takes 1.1 us; without them it moves 8 bytes a step).
  tcg) ACCEL_ARGS=(-accel tcg -cpu max,avx=off,avx2=off,erms=off,fsrm=off) ;;
  *) die "--accel must be auto, kvm or tcg" ;;
esac

# Receive-side USO (QEMU 8.1+) lets the host hand a guest whole GSO sends, so the bridge
# takes the UDP GSO feature and a capture on it holds a host-side rocex's sends as frames
# of up to 64 KiB that no wire carries. Off but for --rocex runs (docs/rxe-lab.md).
NIC_OPTS=
if [[ -z $ROCEX_BIN ]] && qemu-system-x86_64 -device virtio-net-pci,help 2>/dev/null | grep -q guest_uso4; then
  NIC_OPTS=,guest_uso4=off,guest_uso6=off
fi

# Network --------------------------------------------------------------------
BRMTU=$NETMTU
((BRMTU < 576)) && BRMTU=576 # the bridge carries the host's frames too
ip netns add "$NS"
nsx ip link set lo up
nsx ip link add br0 type bridge stp_state 0 forward_delay 0
nsx ip link set br0 mtu "$NETMTU" 2>/dev/null || nsx ip link set br0 mtu "$BRMTU"
for i in $(seq 1 "$GUESTS"); do
  nsx ip tuntap add "tap$i" mode tap
  nsx ip link set "tap$i" mtu "$NETMTU" master br0 up
done
nsx ip link set br0 up
nsx ip addr add "$HOST4/24" dev br0
nsx sysctl -qw net.ipv6.conf.br0.disable_ipv6=0 2>/dev/null || true
nsx ip -6 addr add "$HOST6/64" dev br0 nodad 2>/dev/null || true

# Capture ---------------------------------------------------------------------
rm -f "$OUT"
ip netns exec "$NS" tcpdump -i br0 -w "$OUT" --immediate-mode -B 131072 -U -n 2>"$TMP/tcpdump.err" &
TDPID=$!
for _ in $(seq 1 50); do grep -q 'listening on' "$TMP/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
grep -q 'listening on' "$TMP/tcpdump.err" || die "tcpdump did not start: $(cat "$TMP/tcpdump.err")"

# Guests ----------------------------------------------------------------------
GTIMEOUT=$((TIMEOUT - 30)); ((GTIMEOUT < 20)) && GTIMEOUT=20
mkscenario() { # $1 = guest index (1-based), $2 = role -> $TMP/gN.initrd
  local i=$1 role=$2 d=$TMP/scn$1 peer4 peer6
  if [[ -n $HOST_CMD ]]; then peer4=$HOST4 peer6=$HOST6
  elif ((GUESTS == 2)); then peer4=${G_IP4[$((2 - i))]} peer6=${G_IP6[$((2 - i))]}
  else peer4=${G_IP4[$((i - 1))]} peer6=${G_IP6[$((i - 1))]}
  fi
  mkdir -p "$d/scenario"
  {
    printf 'ROLE=%q\n' "$role"
    printf 'IP4=%q\nPEER4=%q\nHOST4=%q\n' "${G_IP4[$((i - 1))]}" "$peer4" "$HOST4"
    if ((IPV6)); then printf 'IP6=%q\nPEER6=%q\nHOST6=%q\n' "${G_IP6[$((i - 1))]}" "$peer6" "$HOST6"; else echo "IP6="; fi
    printf 'USE_V6=%q\nMTU=%q\nNETMTU=%q\n' "$IPV6" "$MTU" "$NETMTU"
    printf 'NETEM=%q\nNETEM_ALL=%q\nGTIMEOUT=%q\n' "$NETEM" "$NETEM_ALL" "$GTIMEOUT"
    printf 'SCENARIO=%q\nGUESTS=%q\n' "$SCENARIO" "$GUESTS"
    for kv in "${SETS[@]}"; do printf '%s=%q\n' "${kv%%=*}" "${kv#*=}"; done
    if [[ -n $ROCEX_BIN ]]; then echo "ROCEX=/scenario/rocex"; fi
  } >"$d/scenario/env"
  cp "$SCN_FILE" "$d/scenario/scenario.sh"
  # Line tables only bloat the guest's RAM-backed root: strip, else copy as is.
  if [[ -n $ROCEX_BIN ]]; then
    strip -o "$d/scenario/rocex" "$ROCEX_BIN" 2>/dev/null || cp "$ROCEX_BIN" "$d/scenario/rocex"
  fi
  cp "$RXE_LAB_INITRD" "$TMP/g$i.initrd"
  (cd "$d" && find scenario | cpio -o -H newc -R 0:0 --quiet) >>"$TMP/g$i.initrd"
}
roles=()
if [[ -n $HOST_CMD ]]; then roles=("$GUEST_ROLE")
elif ((GUESTS == 2)); then roles=(server client)
else roles=(both)
fi

log "scenario $SCENARIO: ${#roles[@]} guest(s) [${roles[*]}], accel $ACCEL, mtu $MTU (netdev $NETMTU)${NETEM:+, netem '$NETEM'}$( ((IPV6)) && echo ', IPv6')"
for i in $(seq 1 ${#roles[@]}); do
  mkscenario "$i" "${roles[$((i - 1))]}"
  : >"$TMP/g$i.log"
  ip netns exec "$NS" qemu-system-x86_64 "${ACCEL_ARGS[@]}" -m "$MEM" -smp 1 -nodefaults -no-user-config \
    -display none -serial "file:$TMP/g$i.log" -no-reboot \
    -kernel "$RXE_LAB_VMLINUX" -initrd "$TMP/g$i.initrd" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off rdinit=/init" \
    -netdev "tap,id=n0,ifname=tap$i,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:18:00:1$i$NIC_OPTS" \
    >"$TMP/q$i.out" 2>&1 &
  QPIDS+=($!)
done

# Wait -------------------------------------------------------------------------
deadline=$((T_START + TIMEOUT))
timed_out=0 host_rc=
while :; do
  alive=0
  for p in "${QPIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  if [[ -n $HOST_CMD && -z $HPID && -z $host_rc ]] && grep -q '@@RXE-LAB READY' "$TMP/g1.log"; then
    log "guest ready after $(($(date +%s) - T_START)) s; starting host command"
    RXE_LAB_GUEST_IP=${G_IP4[0]} RXE_LAB_HOST_IP=$HOST4 RXE_LAB_MTU=$MTU RXE_LAB_NETMTU=$NETMTU \
    RXE_LAB_GUEST_IP6=$( ((IPV6)) && echo "${G_IP6[0]}") RXE_LAB_HOST_IP6=$( ((IPV6)) && echo "$HOST6") \
    RXE_LAB_BRIDGE=br0 RXE_LAB_NETNS=$NS RXE_LAB_GUEST_ROLE=$GUEST_ROLE RXE_LAB_SCENARIO=$SCENARIO \
    RXE_LAB_IPV6=$IPV6 \
      ip netns exec "$NS" bash -c "$HOST_CMD" > >(sed -u 's/^/[host] /') 2>&1 &
    HPID=$!
  fi
  if [[ -n $HPID ]] && ! kill -0 "$HPID" 2>/dev/null; then
    host_rc=0; wait "$HPID" || host_rc=$?; HPID=
    log "host command exited $host_rc"
  fi
  ((alive == 0)) && [[ -z $HPID ]] && break
  # A guest whose kernel panicked is gone (panic=-1, -no-reboot): its peers would only wait.
  if grep -q 'Kernel panic - not syncing' "$TMP"/g*.log; then
    log "a guest kernel panicked; stopping the run"
    break
  fi
  if (($(date +%s) >= deadline)); then timed_out=1; break; fi
  sleep 0.2
done
for p in "${QPIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
if [[ -n $HPID ]]; then kill -TERM "$HPID" 2>/dev/null || true; host_rc=124; fi

# Stop the capture after a grace period so its tail is written.
sleep 1
kill -INT "$TDPID" 2>/dev/null || true
for _ in $(seq 1 25); do kill -0 "$TDPID" 2>/dev/null || break; sleep 0.2; done
wait "$TDPID" 2>/dev/null || true
TDPID=

# Report -------------------------------------------------------------------------
ok=1 crashed=0
for i in $(seq 1 ${#roles[@]}); do
  g=$TMP/g$i.log
  tr -d '\r' <"$g" >"$g.txt"
  echo "=== guest $i (${roles[$((i - 1))]}, ${G_IP4[$((i - 1))]}) ==="
  if ((VERBOSE)); then
    cat "$g.txt"
  else
    grep -E '^@@RXE-LAB (INFO|ERROR|TIMEOUT)' "$g.txt" || true
    # (A guest that stopped early may have printed neither section.)
    sed -n '/^@@RXE-LAB BEGIN/,/^@@RXE-LAB END/p' "$g.txt" | grep -v '^@@RXE-LAB' || true
    sed -n '/^@@RXE-LAB COUNTERS/,/^@@RXE-LAB RESULT/p' "$g.txt" | grep -v '^@@RXE-LAB RESULT' || true
  fi
  rc=$(sed -n 's/^@@RXE-LAB RESULT rc=\([0-9]*\).*/\1/p' "$g.txt" | tail -n1)
  if grep -qE "$RXE_LAB_CRASH_RE" "$g.txt"; then
    crashed=1
    echo "(guest $i kernel crashed; its report:)"
    sed -nE "/$RXE_LAB_CRASH_RE/,\$p" "$g.txt" | head -n 80 || true
  fi
  if [[ $rc != 0 ]]; then
    ok=0
    if [[ -z $rc ]]; then
      echo "(guest $i gave no result; console tail:)"; tail -n 25 "$g.txt"
      [[ -s $TMP/q$i.out ]] && { echo "(qemu:)"; cat "$TMP/q$i.out"; }
    else
      echo "(guest $i side failed: rc=$rc)"
    fi
  fi
done
if [[ -n $HOST_CMD ]] && [[ ${host_rc:-1} != 0 ]]; then
  ok=0; echo "(host command failed: rc=${host_rc:-none})"
fi
((timed_out)) && { ok=0; log "hard timeout ${TIMEOUT}s reached"; }

frames=$(tcpdump -r "$OUT" -n 2>/dev/null | wc -l || true)
roce=$(tcpdump -r "$OUT" -n 'udp port 4791' 2>/dev/null | wc -l || true)
secs=$(($(date +%s) - T_START))
if ((ok)); then
  log "PASS $SCENARIO in ${secs}s; capture $OUT ($frames frames, $roce RoCE)"
  exit 0
fi
log "FAIL $SCENARIO after ${secs}s; capture $OUT ($frames frames, $roce RoCE)"
((crashed)) && exit "$RXE_LAB_GUEST_CRASH"
exit 1
