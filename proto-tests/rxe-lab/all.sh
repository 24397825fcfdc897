#!/usr/bin/env bash
# Run every rxe lab scenario, without loss and (for scenarios that move data)
# with 5% loss, writing the captures to pcaps/ and the list to
# pcaps/MANIFEST.md. Usage: all.sh [--only REGEX] [--loss PCT] [--no-loss-runs]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO=$(cd "$RXE_LAB_DIR/../.." && pwd)
PCAPS=${RXE_LAB_PCAPS:-$REPO/pcaps}
LOGS=${RXE_LAB_LOGS:-$REPO/target/rxe-lab/logs}
ONLY=. LOSS=5 LOSS_RUNS=1
while (($#)); do
  case $1 in
    --only) ONLY=$2; shift ;;
    --loss) LOSS=$2; shift ;;
    --no-loss-runs) LOSS_RUNS=0 ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
mkdir -p "$PCAPS" "$LOGS"
bash "$RXE_LAB_DIR/build.sh"

results=$LOGS/results.tsv
[[ $ONLY == . ]] && : >"$results"
touch "$results"
pass=0 fail=0
runone() { # NAME FILE ARGS...
  local name=$1 file=$2; shift 2
  local t0=$(date +%s) rc=0
  log "all: $name $*"
  lab_run "$LOGS/${file%.pcap}.log" "$name" --out "$PCAPS/$file" "$@" || rc=$?
  local secs=$(($(date +%s) - t0))
  local roce; roce=$(tcpdump -r "$PCAPS/$file" -n 'udp port 4791' 2>/dev/null | wc -l || true)
  if ((rc == 0)); then pass=$((pass + 1)); st=pass; else fail=$((fail + 1)); st=FAIL; fi
  log "all: $name $* -> $st (${secs}s, $roce RoCE frames)"
  # Keep one line per capture file.
  grep -v "^$file	" "$results" >"$results.tmp" || true
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$file" "$name" "$*" "$st" "$secs" "$roce" >>"$results.tmp"
  mv "$results.tmp" "$results"
}

for f in "$RXE_LAB_DIR"/scenarios/*.sh; do
  name=$(basename "$f" .sh)
  [[ $name =~ $ONLY ]] || continue
  grep -q '^# lab: host' "$f" && continue
  runone "$name" "$name.pcap"
  if ((LOSS_RUNS)) && grep -q '^# data: yes' "$f"; then
    runone "$name" "$name-loss$LOSS.pcap" --loss "$LOSS"
  fi
done

python3 "$RXE_LAB_DIR/manifest.py" "$results" "$RXE_LAB_VERSIONS" "$RXE_LAB_DIR/scenarios" "$PCAPS" "$LOGS"
total=$(du -cb "$PCAPS"/*.pcap | tail -n1 | cut -f1)
log "pcaps: $(ls "$PCAPS"/*.pcap | wc -l) files, $((total / 1024)) KiB"
((total < 20 * 1024 * 1024)) || log "WARNING: pcaps/ exceeds 20 MiB"
echo "rxe-lab-all: $pass passed, $fail failed"
((fail == 0))
