#!/usr/bin/env bash
# Killing the iSER target mid-I/O: as iser_target.sh (the kernel's initiator in an rxe lab
# guest, tgtd under `rocex run` on the host), but once fio's random 128 KiB writes at depth
# 16 have started, tgtd is killed with SIGKILL and started again on the same LUN file. The
# guest's kernel must see the connection fail, reconnect through iscsid, finish the writes
# and read every block back verified. Not in --quick.
# storage: full run only
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
need qemu-system-x86_64 tcpdump tgtd tgtadm gcc python3
storage_lab '^\[host\] (initiator says|tgtd (killed|started)|rocexd:)|IOPS=|kernel:|PASS|FAIL' \
    iser --guest-role client --timeout 600 --set FIO=recovery --set FS=0 \
    --host-cmd "RESTART_AFTER=1 bash $storage_dir/host_tgtd.sh"
