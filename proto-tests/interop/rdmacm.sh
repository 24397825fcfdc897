#!/usr/bin/env bash
# Interop over rdma_cm: stock rping and ucmatose in a kernel rxe guest against `rocex rping`
# and `rocex ucmatose` on the host side of the lab's bridge, in both roles, also with 5%
# loss on the guest's egress. The connection is made by CM MADs on QP1 (REQ, REP, RTU,
# DREQ, DREP); each run's capture must pass `rocex dump --check` and `rocex conform
# replay`. Prints one line per case and "rdmacm-interop: N passed, N failed"; exits non-zero
# on any failure. Needs root.
#
# Usage: rdmacm.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: rping in both roles, no loss
#   --role R    only the cases where rxe plays R (default: both)
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary instead of building target/release/rocex.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/proto-tests/interop/lib.sh"
interop_start interop-rdmacm '^rping-rxe_(server|client)$' "-p rocex-cli" "$@"

# The host side of each scenario (proto-tests/rxe-lab/scenarios/{rping,ucmatose}.sh), with
# the guest's options: rocex is the client when rxe serves, and the server otherwise.
host_cmd() {
    local scenario=$1 role=$2
    case $scenario/$role in
    rping/server) echo "$rocex rping -c -a \$RXE_LAB_GUEST_IP -v -V -C 5 -S 64" ;;
    rping/client) echo "$rocex rping -s -a \$RXE_LAB_HOST_IP -v -C 5 -S 64" ;;
    ucmatose/server) echo "$rocex ucmatose -s \$RXE_LAB_GUEST_IP -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64" ;;
    ucmatose/client) echo "$rocex ucmatose -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64" ;;
    esac
}

for role in "${roles[@]}"; do
    for scenario in rping ucmatose; do
        for loss in 0 5; do
            name=$scenario-rxe_$role lab=
            if ((loss)); then name+=-loss$loss lab="--loss $loss"; fi
            if [[ -n $only && ! $name =~ $only ]]; then continue; fi
            run_case "$name" "$scenario" "$role" "$lab" "$(host_cmd "$scenario" "$role")"
        done
    done
done
interop_end rdmacm-interop
