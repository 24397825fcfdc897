#!/usr/bin/env bash
# Interop: the rxe lab probe (rxe-probe, proto-tests/rxe-lab/probe/probe.c) in a kernel rxe
# guest against `rocex probe` on the host side of the lab's bridge, in both roles, some
# with faults rocex injects into its own packets (--inject). Each run's capture must pass
# `rocex dump --check` (with --inject: but for rocex's corrupted packets, accounted for by
# faults.py) and `rocex conform replay`. Prints one line per case and "probe-interop: N
# passed, N failed"; exits non-zero on any failure. Needs root.
#
# Usage: probe.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: probe_all and probe_flush in both roles
#   --role R    only the cases where rxe plays R (default: both)
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary instead of building target/release/rocex.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/proto-tests/interop/lib.sh"
interop_start interop-probe '^probe_(all|flush)-rxe_' "-p rocex-cli" "$@"

# What rocex injects into its own packets in the --inject cases (plus a seed per case).
inject=loss=0.05,reorder=0.05,dup=0.02,corrupt=0.01
# case_ SCENARIO NAME GUEST_ROLE "LAB OPTIONS" "ROCEX PROBE CLIENT OPTIONS" [INJECT]
# With the guest as server, rocex runs the scenario's client side with the same options
# as the scenario's rxe-probe client; with the guest as client, rocex is the server and
# takes everything from the PLAN line. With INJECT, rocex runs with --inject INJECT in
# either role, and the case is a run_fault_case.
case_() {
    local scenario=$1 name=$2 role=$3 lab=$4 opts=$5 inj=${6:-} runner=run_case extra=
    if [[ -n $only && ! $name =~ $only ]]; then return 0; fi
    if [[ -n $inj ]]; then runner=run_fault_case extra=" --inject $inj"; fi
    if [[ $role == server ]]; then
        $runner "$name" "$scenario" "$role" "$lab" "$rocex probe client \$RXE_LAB_GUEST_IP $opts$extra"
    else
        $runner "$name" "$scenario" "$role" "$lab" "$rocex probe server$extra"
    fi
}

for role in "${roles[@]}"; do
    # rxe plays $role; rocex the other side. Options as in proto-tests/rxe-lab/scenarios.
    while IFS='|' read -r scenario name lab opts inj; do
        [[ -z $scenario ]] && continue
        case_ "$scenario" "$name-rxe_$role" "$role" "$lab" "$opts" "$inj"
    done <<EOF_CASES
probe_all|probe_all||--ops send,send_imm,send_inv,write,write_imm,read,cas,faa,atomic_write,flush --size 2048 --iters 2
probe_flush|probe_flush||--ops write,flush --size 4096
probe_atomic_write|probe_atomic_write||--ops atomic_write
probe_bad_rkey|probe_bad_rkey||--ops write --size 1024 --bad-rkey
probe_rnr|probe_rnr||--ops send --size 512 --rnr-delay 300 --min-rnr 20
probe_psn_wrap|probe_psn_wrap||--psn 0xfffff0 --ops write,send,read --size 4096 --iters 4
probe_send_inv|probe_send_inv||--ops send_inv --size 256
probe_write_imm|probe_write_imm||--ops write_imm --size 2048
probe_send_imm|probe_send_imm||--ops send_imm --size 1024
probe_mtu4096|probe_mtu4096|--mtu 4096|--mtu 4096 --ops write,send,read --size 16384
probe_write|probe_write-loss5|--loss 5|--ops write --size 4096
probe_all|probe_all-inject|--set SIZE=4096 --set ITERS=4|--ops send,send_imm,send_inv,write,write_imm,read,cas,faa,atomic_write,flush --size 4096 --iters 4|$inject,seed=31
probe_write|probe_write-inject|--set SIZE=16384 --set ITERS=8|--ops write --size 16384 --iters 8|$inject,seed=32
probe_read|probe_read-inject|--set SIZE=16384 --set ITERS=8|--ops read --size 16384 --iters 8|$inject,seed=33
EOF_CASES
done
interop_end probe-interop
