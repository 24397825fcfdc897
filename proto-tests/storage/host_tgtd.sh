#!/usr/bin/env bash
# The host side of the iSER target scenarios, run by the rxe lab's --host-cmd inside the
# lab's namespace: a rocexd on the bridge's address at the lab's path MTU, Debian's tgtd
# under `rocex run` on it with a file-backed LUN ($LUN_MB MiB, default 64) over iSER, until
# the guest's initiator says it is done (proto-tests/rxe-lab/scenarios/iser.sh).
# Exits 0 when the initiator reported success. RESTART_AFTER=S: once the initiator says its
# fio started, tgtd is killed (SIGKILL) S seconds later and started again on the same LUN.
#
# Usage: host_tgtd.sh [ROCEXD ARGS...]   (e.g. --inject loss=0.01,seed=7)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
: "${ROCEX:?}" "${RXE_LAB_HOST_IP:?}"
rocex=$ROCEX
rocexd=$(dirname "$rocex")/rocexd
dir=$(mktemp -d /tmp/rocex-storage.XXXXXX)
cleanup() {
    stop_tgtd
    [[ -n ${rocexd_pid:-} ]] && kill "$rocexd_pid" 2>/dev/null && wait "$rocexd_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
truncate -s "${LUN_MB:-64}M" "$dir/lun.img"
start_rocexd "$RXE_LAB_HOST_IP" "$dir/d.sock" --mtu "$RXE_LAB_MTU" "$@" || exit 1
start_tgtd "$dir/d.sock" "$RXE_LAB_HOST_IP:3260" "$dir/lun.img" || exit 1
echo "tgtd serving $STORAGE_IQN over rocex on $RXE_LAB_HOST_IP"
if [[ -n ${RESTART_AFTER:-} ]]; then
    msg=$(oob_wait "$STORAGE_PORT" "${STORAGE_WAIT:-600}")
    echo "initiator says: ${msg:-nothing}"
    sleep "$RESTART_AFTER"
    stop_tgtd
    echo "tgtd killed mid-I/O"
    sleep 2
    start_tgtd "$dir/d.sock" "$RXE_LAB_HOST_IP:3260" "$dir/lun.img" || exit 1
    echo "tgtd started again"
fi
msg=$(oob_wait "$STORAGE_PORT" "${STORAGE_WAIT:-600}")
echo "initiator says: ${msg:-nothing}"
# What rocex's engine saw: retransmissions, NAKs and, with --inject, the faults it made.
echo "rocexd: $("$rocex" stat --socket "$dir/d.sock" 2>&1 | grep -E '^link [^ ]+ \([^)]*\) (engine|inject) ' \
    | grep -oE '(sent_pkts|rcvd_pkts|retransmitted_pkts|rcvd_seq_err|nak_psn_sequence|duplicate_request|out_of_seq_request|lost) [0-9]+' \
    | tr '\n' ' ')"
grep -vE "^can't adjust|work_timer_start|bs_init|device_mgmt|bs_thread_open|iser_alloc_pool" \
    "$tgtd_log" | tail -n 20
[[ $msg == "done rc=0" ]]
