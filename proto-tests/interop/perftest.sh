#!/usr/bin/env bash
# Interop: perftest's ib_{write,read,send,atomic}_{bw,lat} in a kernel rxe guest (the rxe
# lab) against `rocex perf` on the host side of the lab's bridge, in both roles, with and
# without loss, and with faults rocex injects into its own packets (--inject). Each run's
# capture must pass `rocex dump --check` (with --inject: but for rocex's corrupted packets,
# accounted for by faults.py) and `rocex conform replay`. Prints one line per case and
# "perftest-interop: N passed, N failed"; exits non-zero on any failure. Needs root.
#
# Usage: perftest.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: the first bandwidth tests, in both roles
#   --role R    only the cases where rxe plays R
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary instead of building target/release/rocex.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/proto-tests/interop/lib.sh"
interop_start interop-perftest '^perftest-rxe_[a-z]+-(write_bw-64k|read_bw-64k|send_bw-4k|atomic_bw-cas|atomic_bw-faa|write_bw-16k-loss5)$' "-p rocex-cli" "$@"

# What rocex injects into its own packets in the --inject cases (plus a seed per case).
inject=loss=0.05,reorder=0.05,dup=0.02,corrupt=0.01
for role in "${roles[@]}"; do
    # rxe plays $role; rocex the other side.
    while IFS='|' read -r name scenario lab args; do
        [[ -z $name ]] && continue
        peer_case "perftest-rxe_$role-$name" "$scenario" "$role" "$lab" "$rocex perf $args {peer}"
    done <<EOF_CASES
write_bw-64k|write_bw|--set SIZE=65536 --set ITERS=200|write bw -s 65536 -n 200
read_bw-64k|read_bw|--set SIZE=65536 --set ITERS=200|read bw -s 65536 -n 200
send_bw-4k|send_bw|--set SIZE=4096 --set ITERS=200|send bw -s 4096 -n 200
atomic_bw-cas|atomic_bw_cas|--set ITERS=200|atomic bw -A cas -n 200
atomic_bw-faa|atomic_bw_faa|--set ITERS=200|atomic bw -A faa -n 200
write_bw-16k-loss5|write_bw|--loss 5 --set SIZE=16384 --set ITERS=100|write bw -s 16384 -n 100
write_lat-64|write_lat|--set SIZE=64 --set ITERS=100|write lat -s 64 -n 100
read_lat-64|read_lat|--set SIZE=64 --set ITERS=100|read lat -s 64 -n 100
send_lat-64|send_lat|--set SIZE=64 --set ITERS=100|send lat -s 64 -n 100
atomic_lat-cas|atomic_lat_cas|--set ITERS=100|atomic lat -A cas -n 100
atomic_lat-faa|atomic_lat_faa|--set ITERS=100|atomic lat -A faa -n 100
read_bw-4k-mtu4096|read_bw|--mtu 4096 --set SIZE=4096 --set ITERS=200|read bw -s 4096 -n 200
send_lat-4k-loss5|send_lat|--loss 5 --set SIZE=4096 --set ITERS=50|send lat -s 4096 -n 50
write_bw-16k-inject|write_bw|--set SIZE=16384 --set ITERS=100|write bw -s 16384 -n 100 --inject $inject,seed=21
read_bw-16k-inject|read_bw|--set SIZE=16384 --set ITERS=50|read bw -s 16384 -n 50 --inject $inject,seed=22
send_bw-4k-inject|send_bw|--set SIZE=4096 --set ITERS=100|send bw -s 4096 -n 100 --inject $inject,seed=23
atomic_bw-faa-inject|atomic_bw_faa|--set ITERS=200|atomic bw -A faa -n 200 --inject $inject,seed=24
EOF_CASES
done
interop_end perftest-interop
