#!/usr/bin/env bash
# The host side of the iSER initiator scenario, run by the rxe lab's --host-cmd inside the
# lab's namespace: a rocexd on the bridge's address at the lab's path MTU, and Debian's
# libiscsi under `rocex run` on it (iscsi_verify.py) writing and reading back, with every
# byte checked, the guest's LIO LUN over iSER: 4 KiB commands, then 128 KiB ones over a
# larger region. The guest then compares its LUN file with what the last pass wrote
# (proto-tests/rxe-lab/scenarios/iser.sh). Exits 0 when both passes verified.
#
# Usage: host_libiscsi.sh [ROCEXD ARGS...]
set -uo pipefail
source "$(dirname "$0")/lib.sh"
: "${ROCEX:?}" "${RXE_LAB_HOST_IP:?}" "${RXE_LAB_GUEST_IP:?}"
rocex=$ROCEX
rocexd=$(dirname "$rocex")/rocexd
dir=$(mktemp -d /tmp/rocex-storage.XXXXXX)
trap '[[ -n ${rocexd_pid:-} ]] && kill "$rocexd_pid" 2>/dev/null; wait; rm -rf "$dir"' EXIT
start_rocexd "$RXE_LAB_HOST_IP" "$dir/d.sock" --mtu "$RXE_LAB_MTU" "$@" || exit 1
url=iser://$RXE_LAB_GUEST_IP/$STORAGE_IQN/0
verify() {
    "$rocex" run --socket "$dir/d.sock" -- python3 "$storage_dir/iscsi_verify.py" "$url" \
        --initiator "$STORAGE_INITIATOR" --random --retries 30 "$@"
}
rc=0
verify --bs 4096 --size $((${SMALL_MB:-4} << 20)) --seed 4 || rc=1
((rc == 0)) && { verify --bs 131072 --size $((${LARGE_MB:-16} << 20)) --seed 128 --sha256 \
    | tee "$dir/large.out" || rc=1; }
line=$(grep '^sha256 ' "$dir/large.out" 2>/dev/null)
if ((rc == 0)) && [[ -n $line ]]; then
    oob_send "$RXE_LAB_GUEST_IP" "$STORAGE_PORT" "$line" || rc=1
else
    oob_send "$RXE_LAB_GUEST_IP" "$STORAGE_PORT" "done rc=1"
    rc=1
fi
exit $rc
