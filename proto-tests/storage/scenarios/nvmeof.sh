#!/usr/bin/env bash
# NVMe over Fabrics over rocex: `rocex nvmeof` (through a rocexd on the host side of the
# rxe lab's bridge) against the Linux kernel's nvmet-rdma target on kernel rxe in the lab
# guest (scenario proto-tests/rxe-lab/scenarios/nvmet.sh: a 64 MiB file-backed namespace,
# configured through configfs). The host connects the admin queue and one I/O queue over
# rdma_cm (the accept's CRQSIZE checked against the queues' depths), checks Identify
# against what the guest configured (serial, model, namespace
# size), writes a pattern at queue depth 16, flushes, reads it back and compares, and ends
# the association. The full run also measures 4 KiB and 128 KiB reads and writes at
# depths 1 and 16, and the same with the kernel's nvme-rdma host and fio in a second
# guest (docs/nvmeof.md). Exit status 0 when everything held.
#
# Usage: nvmeof.sh [--quick]      (or QUICK=1): the CI subset, no measurements
#        nvmeof.sh --host         the lab's host command (inside the lab's namespace)
# ROCEX=/path/to/rocex uses that binary (and the rocexd beside it) instead of building
# target/release. Needs root and the rxe lab's tools: missing, it fails in CI (CI=true)
# and prints SKIPPED: elsewhere (proto-tests/storage/lib.sh). The capture must pass
# `rocex dump --check`.
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)

NQN=nqn.2026-12.org.rocex:lab-nvmet
SERIAL=rocexlab0000001
MODEL="rocex lab nvmet"
BYTES=$((64 << 20))
DONE_PORT=18700

if [[ ${1:-} == --host ]]; then
    # Inside the lab: a rocexd on the bridge's address, then the host, retried while the
    # guest's target is not listening yet (its rdma_cm rejects with reason 8).
    rocex=${ROCEX:?}
    dir=$(mktemp -d /tmp/rocex-nvmeof.XXXXXX)
    RUST_LOG=${RUST_LOG:-warn} "$(dirname "$rocex")/rocexd" --addr "$RXE_LAB_HOST_IP" \
        --socket "$dir/d.sock" --mtu "$RXE_LAB_MTU" &
    daemon=$!
    stop() {
        echo done >"/dev/tcp/$RXE_LAB_GUEST_IP/$DONE_PORT" 2>/dev/null || true
        kill "$daemon" 2>/dev/null
        wait "$daemon" 2>/dev/null
        rm -rf "$dir"
    }
    trap stop EXIT
    for _ in $(seq 100); do [[ -S $dir/d.sock ]] && break; sleep 0.1; done
    args=(--socket "$dir/d.sock" --nqn "$NQN" --qd 16 --size 4096 --verify-bytes $((4 << 20))
          --expect-serial "$SERIAL" --expect-model "$MODEL" --expect-bytes "$BYTES")
    if [[ ${NVMEOF_BENCH:-0} == 1 ]]; then
        args+=(--bench-sizes 4096,131072 --bench-depths 1,16 --bench-secs "${NVMEOF_BENCH_SECS:-5}")
    fi
    for try in $(seq 60); do
        status=0
        "$rocex" nvmeof "$RXE_LAB_GUEST_IP" "${args[@]}" 2>&1 | tee "$dir/out" || status=${PIPESTATUS[0]}
        ((status != 0)) && grep -q 'CM REJ reason 8)' "$dir/out" || break
        echo "(retry $try: the target is not listening yet)"
        sleep 1
    done
    ((status == 0)) || exit "$status"
    # Bad input from the target: a subsystem it does not have fails the admin queue's
    # Connect, which must be a typed error naming the queue and the command.
    if "$rocex" nvmeof "$RXE_LAB_GUEST_IP" --socket "$dir/d.sock" --timeout 30 \
        --nqn nqn.2026-12.org.rocex:no-such-subsystem >"$dir/bad" 2>&1; then
        echo "a Connect to a subsystem the target does not have succeeded"
        exit 1
    fi
    sed 's/^/wrong subsystem: /' "$dir/bad"
    grep -q 'queue 0: command 0 (connect) failed: connect: invalid parameters' "$dir/bad" || exit 1
    # An admin queue deeper than the target takes (Linux: 32) is refused by its rdma_cm
    # with the binding's reject private data, which must be named.
    if "$rocex" nvmeof "$RXE_LAB_GUEST_IP" --socket "$dir/d.sock" --timeout 30 --nqn "$NQN" \
        --admin-depth 64 >"$dir/deep" 2>&1; then
        echo "an admin queue of 64 entries was accepted"
        exit 1
    fi
    sed 's/^/deep admin queue: /' "$dir/deep"
    grep -q 'queue 0: the target rejected the connection (CM REJ reason 28): invalid host SQ size' "$dir/deep"
    exit
fi

source "$(dirname "$0")/../lib.sh"
need qemu-system-x86_64 tcpdump
storage_rocex || exit 1
bash "$root/proto-tests/rxe-lab/build.sh" >/dev/null || exit 1
source "$root/proto-tests/rxe-lab/lib.sh"

log=$storage_out/nvmeof.log pcap=$storage_out/nvmeof.pcap
bench=0 timeout=240
((quick)) || { bench=1 timeout=420; }
rc=0
NVMEOF_BENCH=$bench lab_run "$log" nvmet --guest-role server --timeout "$timeout" --out "$pcap" \
    --host-cmd "bash $root/proto-tests/storage/scenarios/nvmeof.sh --host" || rc=$?
grep -E '^\[host\] (connected|controller|namespace|past the end|verify|bench|disconnected|wrong subsystem|deep admin queue|rocex nvmeof)' "$log" \
    | sed 's/^\[host\] /  /' || true
if ((rc != 0)); then
    echo "FAIL: $storage_name (lab exit $rc; log $log)"
    tail -n 30 "$log"
    exit 1
fi
for want in '^\[host\] connected: .*admin queue 32 deep \(the controller takes 32\), 1 I/O queue 16 deep \(the controller takes 16\)$' \
    '^\[host\] verify: .*: identical$' '^\[host\] past the end: .*(LBA out of range|capacity exceeded)' \
    '^\[host\] disconnected: shutdown complete' '^\[host\] wrong subsystem: .*queue 0: command 0 \(connect\)' \
    '^\[host\] deep admin queue: .*REJ reason 28\): invalid host SQ size'; do
    grep -qE "$want" "$log" || { echo "FAIL: $storage_name: no line matching $want in $log"; exit 1; }
done
# The full run measures the kernel's own host beside rocex: nvme-rdma and fio in a
# second guest against the same target (docs/nvmeof.md, "Numbers").
if ((!quick)); then
    klog=$storage_out/nvmeof-kernel.log
    lab_run "$klog" nvmet --guests 2 --set BENCH_SECS=5 --timeout 360 \
        --out "$storage_out/nvmeof-kernel.pcap" || { echo "FAIL: $storage_name (kernel host; log $klog)"; tail -n 30 "$klog"; exit 1; }
    grep -E '^kernel (host|bench):' "$klog" | sed 's/^/  /'
fi
# Every frame rocex sent or received on the bridge: valid headers and ICRCs.
"$rocex" dump --check "$pcap" | tail -n 1 | sed 's/^/  capture: /'
test "${PIPESTATUS[0]}" -eq 0 || { echo "FAIL: $storage_name: the capture does not check"; exit 1; }
echo "PASS: $storage_name"
