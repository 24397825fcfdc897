#!/usr/bin/env bash
# iSER initiator over rocex: Debian's libiscsi under `rocex run` (iscsi_verify.py) on the
# host side of the rxe lab's bridge (host_libiscsi.sh) against a LIO target with ib_isert in
# a QEMU guest (rdma_rxe, a file-backed LUN): writes 4 KiB and 128 KiB commands in random
# order, reads every byte back and compares; the guest then checks its LUN file holds
# exactly what was written (sha256). The capture must pass `rocex dump --check`.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
need qemu-system-x86_64 tcpdump python3 iscsi-inq
small=8 large=32
((quick)) && small=2 large=8
storage_lab '^\[host\] (write|read|verified)|LUN file|PASS|FAIL' \
    iser --guest-role server --timeout 400 \
    --host-cmd "SMALL_MB=$small LARGE_MB=$large bash $storage_dir/host_libiscsi.sh"
storage_capture_checks
