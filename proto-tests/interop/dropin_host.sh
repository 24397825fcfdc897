#!/usr/bin/env bash
# The host side of a drop-in interop case (proto-tests/interop/dropin.sh), run by the rxe
# lab's --host-cmd inside the lab's namespace: a rocexd on the bridge's address at the lab's
# path MTU, and PROGRAM (a Debian binary) under `rocex run` on it. Exits with the program's
# status; rocexd's own output is kept in the log. Where the guest serves, its listener may
# still be starting: a client that says it could not connect (perftest's "Couldn't connect
# to" or, with -R, "Unexpected CM event", a REJECTED event as rping and ucmatose print it,
# or udaddy's UNREACHABLE, the kernel CM's SIDR_REP for a port nobody listens on) runs
# again, for 20 s at most, as the guest's clients do. DROPIN_WAIT=S starts the program S
# seconds late: rxe's side of an rdma_cm connection rejects a connect that comes
# before it listens. ROCEXD_ARGS adds flags to rocexd's.
#
# Usage: dropin_host.sh ROCEX PROGRAM ARGS...
set -uo pipefail
rocex=$1
shift
rocexd=$(dirname "$rocex")/rocexd
dir=$(mktemp -d /tmp/rocex-dropin.XXXXXX)
sock=$dir/d.sock
# shellcheck disable=SC2086 # ROCEXD_ARGS: more flags, split on spaces
RUST_LOG=${RUST_LOG:-warn} "$rocexd" --addr "$RXE_LAB_HOST_IP" --socket "$sock" \
    --mtu "$RXE_LAB_MTU" ${ROCEXD_ARGS:-} &
daemon=$!
stop() {
    kill "$daemon" 2>/dev/null
    wait "$daemon" 2>/dev/null
    rm -rf "$dir"
}
trap stop EXIT
for _ in $(seq 100); do
    [[ -S $sock ]] && break
    kill -0 "$daemon" 2>/dev/null || { echo "rocexd exited before its socket appeared" >&2; exit 1; }
    sleep 0.1
done
[[ -S $sock ]] || { echo "rocexd did not make $sock within 10 s" >&2; exit 1; }
sleep "${DROPIN_WAIT:-0}"
for try in $(seq 40); do
    "$rocex" run --socket "$sock" -- "$@" 2>&1 | tee "$dir/out"
    status=${PIPESTATUS[0]}
    ((status != 0)) && [[ $RXE_LAB_GUEST_ROLE == server ]] \
        && grep -q -e "Couldn't connect to" -e REJECTED -e UNREACHABLE -e "Unexpected CM event" "$dir/out" \
        || exit "$status"
    echo "(retry $try: $1 could not connect)"
    sleep 0.5
done
exit "$status"
