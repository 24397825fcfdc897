#!/usr/bin/env bash
# Interop of the drop-in librdmacm: Debian's rping and ucmatose under `rocex run` (rocex's
# libibverbs and librdmacm, a rocexd started per case by dropin_host.sh) on the host side
# of the lab's bridge against the same programs on kernel rxe in the guest (the rxe lab),
# in both roles, with and without 5% loss on the guest's egress. The connection is made by
# CM MADs on QP1 between rocexd's CM and the kernel's; each run's capture must pass
# `rocex dump --check` and `rocex conform replay`. Prints one line per case and
# "dropin-rdmacm-interop: N passed, N failed"; exits non-zero on any failure. Needs root.
#
# Usage: dropin_rdmacm.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: rping in both roles
#   --role R    only the cases where rxe plays R
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary (rocexd and the libraries beside it) instead of
# building target/release.
#
# dropin_rdmacm.sh --until-accepted PROGRAM ARGS... is the host side's client where the
# guest serves: the guest's listener may still be starting, and a connect that reaches it
# first is rejected, so PROGRAM runs again after a rejection, for 20 s at most.
set -euo pipefail
if [[ ${1:-} == --until-accepted ]]; then
    shift
    log=$(mktemp)
    trap 'rm -f "$log"' EXIT
    for try in $(seq 40); do
        status=0
        "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
        ((status != 0)) && grep -q REJECTED "$log" || exit "$status"
        echo "(retry $try: $1 was rejected, the guest's listener is not up yet)"
        sleep 0.5
    done
    exit "$status"
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${INTEROP_OUT:-$root/target/interop-dropin-rdmacm}
mkdir -p "$out"
source "$root/proto-tests/interop/lib.sh"
interop_args '^dropin_rdmacm-rxe_[a-z]+-rping$' "$@"

if [[ -n ${ROCEX:-} ]]; then
    rocex=$ROCEX
else
    rocex=$root/target/release/rocex
    cargo build -q --release --manifest-path "$root/Cargo.toml" -p rocex-cli -p rocex-daemon \
        -p rocex-ibverbs -p rocex-dv-mlx5 -p rocex-dv-efa -p rocex-rdmacm
fi
bash "$root/proto-tests/rxe-lab/build.sh" >/dev/null

pass=0 fail=0 failed=()
host="bash $root/proto-tests/interop/dropin_host.sh $rocex"
client="$host bash $root/proto-tests/interop/dropin_rdmacm.sh --until-accepted"
for role in "${roles[@]}"; do
    # rxe plays $role; the drop-in the other side, with the scenario's options.
    while IFS='|' read -r name scenario lab serve connect; do
        [[ -z $name ]] && continue
        if [[ $role == server ]]; then cmd="$client $connect"; else cmd="$host $serve"; fi
        peer_case "dropin_rdmacm-rxe_$role-$name" "$scenario" "$role" "$lab" "$cmd"
    done <<EOF_CASES
rping|rping||rping -s -a \$RXE_LAB_HOST_IP -v -C 5 -S 64|rping -c -a \$RXE_LAB_GUEST_IP -v -V -C 5 -S 64
ucmatose|ucmatose||ucmatose -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64|ucmatose -s \$RXE_LAB_GUEST_IP -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64
rping-loss5|rping|--loss 5|rping -s -a \$RXE_LAB_HOST_IP -v -C 5 -S 64|rping -c -a \$RXE_LAB_GUEST_IP -v -V -C 5 -S 64
ucmatose-loss5|ucmatose|--loss 5|ucmatose -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64|ucmatose -s \$RXE_LAB_GUEST_IP -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64
EOF_CASES
done
((fail == 0)) || echo "failed: ${failed[*]}"
echo "dropin-rdmacm-interop: $pass passed, $fail failed"
((fail == 0))
