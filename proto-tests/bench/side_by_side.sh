#!/usr/bin/env bash
# The data-path table of compare.sh (--path-only) for two builds side by side: the runs
# alternate between BEFORE and AFTER (directories holding `rocex` and `rocexd`), one run at
# a time, so that on a shared machine both meet the same load. Prints each side's table
# (medians and ranges over its runs). Needs root, as compare.sh does.
#
#   proto-tests/bench/side_by_side.sh BEFORE_DIR AFTER_DIR [RUNS]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 2 ] || { sed -n '2,/^set /{/^#/p}' "$0"; exit 2; }
RUNS="${3:-3}"
OUT="$(mktemp -d /tmp/rocex-sbs.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT

for i in $(seq "$RUNS"); do
  for side in before after; do
    dir="$1"; [ "$side" = after ] && dir="$2"
    echo "$side run $i/$RUNS" >&2
    RESULTS_TSV="$OUT/$side.$i.tsv" ROCEX="$dir/rocex" ROCEXD="$dir/rocexd" \
      "$HERE/compare.sh" --path-only --runs 1 --no-doc >/dev/null
    # each file holds run 1: number the runs of a side 1..RUNS
    awk -v r="$i" 'BEGIN { FS = OFS = "\t" } { $1 = r; print }' "$OUT/$side.$i.tsv" >>"$OUT/$side.tsv"
  done
done
for side in before after; do
  dir="$1"; [ "$side" = after ] && dir="$2"
  echo "## $side ($dir)"
  echo
  python3 "$HERE/path_report.py" "$OUT/$side.tsv" "$side: $dir; runs alternating with the other side" "$RUNS"
  echo
done
