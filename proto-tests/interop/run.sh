#!/usr/bin/env bash
# Interop: stock tools (ibv_rc_pingpong, ibv_ud_pingpong) in a kernel rxe guest (the rxe lab) against rocex on the host side
# of the lab's bridge, in both roles, with and without loss, ibv_rc_pingpong also with
# completion events (-e), and with faults rocex injects into its own packets (--inject).
# Each run's capture must pass `rocex dump --check` (with --inject: but for rocex's
# corrupted packets, accounted for by faults.py) and `rocex conform replay`. Prints one line
# per case and "interop: N passed, N failed"; exits non-zero on any failure. Needs root.
#
# Usage: run.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: the first RC cases and UD 1 KiB, in both roles
#   --role R    only the cases where rxe plays R
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary instead of building target/release/rocex.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/proto-tests/interop/lib.sh"
interop_start interop '^(rc_pingpong-rxe_[a-z]+-(1k-mtu1024|64k-mtu4096|16k-mtu1024-loss5|1k-mtu1024-events)|ud_pingpong-rxe_[a-z]+-1k)$' "-p rocex-cli" "$@"

# What rocex injects into its own packets in the --inject cases (plus a seed per case).
inject=loss=0.05,reorder=0.05,dup=0.02,corrupt=0.01
for role in "${roles[@]}"; do
    # rxe plays $role; rocex the other side.
    while IFS='|' read -r name lab pp; do
        [[ -z $name ]] && continue
        peer_case "rc_pingpong-rxe_$role-$name" rc_pingpong "$role" "$lab" "$rocex pingpong {peer} $pp"
    done <<EOF_CASES
1k-mtu1024|--set SIZE=1024 --set ITERS=100|-s 1024 -n 100 -m 1024
64k-mtu4096|--mtu 4096 --set SIZE=65536 --set ITERS=20|-s 65536 -n 20 -m 4096
16k-mtu1024-loss5|--loss 5 --set SIZE=16384 --set ITERS=50|-s 16384 -n 50 -m 1024
1k-mtu1024-events|--set SIZE=1024 --set ITERS=100 --set EVENTS=1|-s 1024 -n 100 -m 1024
EOF_CASES
    peer_case "ud_pingpong-rxe_$role-1k" ud_pingpong "$role" "--set SIZE=1024 --set ITERS=100" "$rocex pingpong {peer} --ud -s 1024 -n 100"
    while IFS='|' read -r name lab pp; do
        [[ -z $name ]] && continue
        peer_case "rc_pingpong-rxe_$role-$name" rc_pingpong "$role" "$lab" "$rocex pingpong {peer} $pp"
    done <<EOF_CASES
1b-mtu256|--mtu 256 --set SIZE=1 --set ITERS=100|-s 1 -n 100 -m 256
3000-mtu256-loss5|--mtu 256 --loss 5 --set SIZE=3000 --set ITERS=50|-s 3000 -n 50 -m 256
1m-mtu4096|--mtu 4096 --set SIZE=1048576 --set ITERS=5|-s 1048576 -n 5 -m 4096
4k-reorder|--delay 2 --reorder 25 --set SIZE=4096 --set ITERS=50|-s 4096 -n 50 -m 1024
64k-mtu4096-events|--mtu 4096 --set SIZE=65536 --set ITERS=20 --set EVENTS=1|-s 65536 -n 20 -m 4096
4k-mtu1024-loss5-events|--loss 5 --set SIZE=4096 --set ITERS=50 --set EVENTS=1|-s 4096 -n 50 -m 1024
1k-mtu1024-inject|--set SIZE=1024 --set ITERS=100|-s 1024 -n 100 -m 1024 --inject $inject,seed=11
16k-mtu1024-inject|--set SIZE=16384 --set ITERS=50|-s 16384 -n 50 -m 1024 --inject $inject,seed=12
EOF_CASES
    peer_case "ud_pingpong-rxe_$role-4k-mtu4096" ud_pingpong "$role" "--mtu 4096 --set SIZE=4096 --set ITERS=100" "$rocex pingpong {peer} --ud -s 4096 -n 100"
done
interop_end interop
