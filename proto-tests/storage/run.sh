#!/usr/bin/env bash
# Storage over rocex: runs every scenario in proto-tests/storage/scenarios/ (each exits 0
# when it passed; one that cannot run here prints SKIPPED: and exits 0, or fails in CI),
# prints one line per scenario and ends with "N passed, N failed". Needs root.
#
# Usage: run.sh [--quick] [--only REGEX]
#   --quick     the CI subset of each scenario (a few minutes in all under TCG)
#   --only RE   only the scenarios whose name matches RE
# ROCEX=/path/to/rocex uses that binary (rocexd and the libraries beside it) instead of
# building target/release. Logs and captures go to target/storage/.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${STORAGE_OUT:-$root/target/storage}
mkdir -p "$out"
args=() only=
while (($#)); do
    case $1 in
    --quick) args+=(--quick) ;;
    --only) only=$2; shift ;;
    *) echo "usage: $0 [--quick] [--only REGEX]" >&2; exit 2 ;;
    esac
    shift
done
if [[ -z ${ROCEX:-} ]]; then
    cargo build -q --release --manifest-path "$root/Cargo.toml" -p rocex-cli -p rocex-daemon \
        -p rocex-ibverbs -p rocex-rdmacm -p rocex-dv-mlx5 -p rocex-dv-efa || exit 1
    export ROCEX=$root/target/release/rocex
fi

pass=0 fail=0 skipped=0 failed=() full_only=()
for f in "$root"/proto-tests/storage/scenarios/*.sh; do
    name=$(basename "$f" .sh)
    [[ -n $only && ! $name =~ $only ]] && continue
    # A scenario marked "# storage: full run only" is left out of --quick, and named.
    if [[ ${args[*]-} == --quick ]] && grep -q '^# storage: full run only' "$f"; then
        full_only+=("$name")
        continue
    fi
    t0=$(date +%s)
    bash "$f" "${args[@]}" >"$out/$name.out" 2>&1
    rc=$?
    secs=$(($(date +%s) - t0))
    if ((rc == 0)) && grep -q '^SKIPPED:' "$out/$name.out"; then
        skipped=$((skipped + 1))
        grep '^SKIPPED:' "$out/$name.out"
    elif ((rc == 0)); then
        pass=$((pass + 1))
        printf 'PASS %-20s %4ss\n' "$name" "$secs"
        sed 's/^/     /' "$out/$name.out" | grep -vE '^ +(Compiling|Finished)' | tail -n 12
    else
        fail=$((fail + 1)) failed+=("$name")
        printf 'FAIL %-20s %4ss (see %s)\n' "$name" "$secs" "$out/$name.out"
        tail -n 25 "$out/$name.out" | sed 's/^/     /'
    fi
done
((${#full_only[@]} == 0)) || echo "left to the full run: ${full_only[*]}"
((skipped == 0)) || echo "$skipped skipped"
((fail == 0)) || echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
((fail == 0))
