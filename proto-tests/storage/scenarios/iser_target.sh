#!/usr/bin/env bash
# iSER target over rocex: Debian's tgtd under `rocex run` on the host side of the rxe lab's
# bridge (host_tgtd.sh), a file-backed LUN; in a QEMU guest the kernel's initiator (rdma_rxe,
# ib_iser, iscsiadm with the iser iface) discovers and logs in over iSER, runs fio random
# writes and reads them back with crc32c verification (4 KiB and 128 KiB; iodepth 1 and 16
# without --quick), then makes an ext4 filesystem, writes files, logs out and in again and
# checks every file's sha256. The capture must pass `rocex dump --check`.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
need qemu-system-x86_64 tcpdump tgtd tgtadm gcc python3
fio=full
((quick)) && fio=quick
storage_lab '^\[host\] (initiator says|rocexd:)|IOPS=|filesystem after|PASS|FAIL' \
    iser --guest-role client --timeout 500 --set "FIO=$fio" \
    --host-cmd "bash $storage_dir/host_tgtd.sh"
storage_capture_checks
