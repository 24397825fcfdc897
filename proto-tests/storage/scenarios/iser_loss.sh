#!/usr/bin/env bash
# iSER target over rocex with 1% of the RoCE frames lost both ways: as iser_target.sh (the
# kernel's initiator in an rxe lab guest, tgtd under `rocex run` on the host), with netem
# dropping 1% of the guest's RoCE frames and rocexd's --inject 1% of its own, during the
# fio verify jobs (4 KiB and 128 KiB at depth 16) and the filesystem round trip. Every
# block must verify and the run must end: no corruption, no hang. Not in --quick.
# storage: full run only
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
need qemu-system-x86_64 tcpdump tgtd tgtadm gcc python3
storage_lab '^\[host\] (initiator says|rocexd:)|IOPS=|filesystem after|netem|dropped|PASS|FAIL' \
    iser --guest-role client --timeout 600 --set FIO=quick --loss 1 \
    --host-cmd "bash $storage_dir/host_tgtd.sh --inject loss=0.01,seed=11"
