#!/usr/bin/env bash
# CI entry for the rxe lab: install the host tools, build the guest image,
# then run RC scenarios end to end (no loss, 5% loss). Each run leaves a
# pcap in $RXE_LAB_OUT (default target/rxe-lab/ci) and any failure fails CI.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OUT=${RXE_LAB_OUT:-$PWD/target/rxe-lab/ci}
mkdir -p "$OUT"
bash "$RXE_LAB_DIR/install-deps.sh"
bash "$RXE_LAB_DIR/build.sh"

pass=0 fail=0 failed=()
run() { # NAME ARGS...
  local name=$1 rc=0; shift
  log "ci: $name $*"
  lab_run "$OUT/$name.log" "$@" --timeout 240 || rc=$?
  cat "$OUT/$name.log"
  if ((rc == 0)); then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); failed+=("$name")
  fi
}
# ibv_*_pingpong cannot recover a lost final ACK once the peer has exited, so
# the loss runs use the probe, whose responder stays up until the requester
# reports DONE.
run rc_pingpong              rc_pingpong       --out "$OUT/rc_pingpong.pcap"
run probe_all                probe_all         --out "$OUT/probe_all.pcap"
run probe_ack_timeout-loss5  probe_ack_timeout --loss 5 --out "$OUT/probe_ack_timeout-loss5.pcap"
run probe_psn_wrap-loss5     probe_psn_wrap    --loss 5 --out "$OUT/probe_psn_wrap-loss5.pcap"

for f in "$OUT"/*.pcap; do
  [[ -s $f ]] || { log "ci: empty capture $f"; fail=$((fail + 1)); failed+=("$(basename "$f")"); }
done
((fail == 0)) || log "ci: failed: ${failed[*]}"
echo "rxe-lab: $pass passed, $fail failed"
((fail == 0))
