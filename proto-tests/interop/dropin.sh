#!/usr/bin/env bash
# Interop of the drop-in libibverbs and librdmacm: Debian's own ibv_rc_pingpong, perftest
# (also ib_send_bw -R), rping, ucmatose and udaddy binaries under `rocex run` on the host side of
# the lab's bridge (a rocexd there, started per case by dropin_host.sh) against the same
# programs on kernel rxe in the guest (the rxe lab), in both roles, with and without 5% loss
# on the guest's egress, through rocexd and on the direct path (rocexd --direct, rdma_cm
# programs included). Each run's capture must pass
# `rocex dump --check` and `rocex conform replay`. Prints one line per case and
# "dropin-interop: N passed, N failed"; exits non-zero on any failure. Needs root.
#
# Usage: dropin.sh [--quick] [--role server|client] [--only REGEX]
#   --quick     the CI subset: ib_write_bw 64 KiB, in both roles, through rocexd and direct
#   --role R    only the cases where rxe plays R
#   --only RE   only cases whose name matches RE
# ROCEX=/path/to/rocex uses that binary (rocexd and the libraries beside it) instead of
# building target/release.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/proto-tests/interop/lib.sh"
interop_start interop-dropin '^dropin-rxe_[a-z]+-write_bw-64k(-direct)?$' "-p rocex-cli -p rocex-daemon -p rocex-ibverbs -p rocex-rdmacm -p rocex-dv-mlx5 -p rocex-dv-efa" "$@"

host="bash $root/proto-tests/interop/dropin_host.sh $rocex"

# tos_case NAME "HOST COMMAND": rxe's ucmatose serves, the drop-in's connects with
# RDMA_OPTION_ID_TOS 184 (-t). As run_case, and tshark must find traffic class 0xb8 in the
# REQ's primary path and IP TOS 0xb8 on every packet of the connection's QPs from both
# ends: the kernel's rdma_cm takes the REQ's path for the passive side, as rocexd does.
tos_case() {
    local name=$1 cmd=$2 pcap=$out/$1.pcap ok=0 tclass others senders
    if [[ -n $only && ! $name =~ $only ]]; then return 0; fi
    if ! command -v tshark >/dev/null; then
        tally "$name" 0 "tshark reads its capture: install it (Debian: tshark)"
        return 0
    fi
    if lab "$name" ucmatose server "" "$cmd" \
        && "$rocex" dump --check "$pcap" >"$out/$name.check" \
        && "$rocex" conform replay "$pcap" >"$out/$name.conform"; then
        tclass=$(tshark -r "$pcap" -Y infiniband.cm.req -T fields -e infiniband.cm.req.prim_tfcclass | sort -u)
        others=$(tshark -r "$pcap" -Y 'infiniband.bth.destqp != 1 && ip.dsfield != 0xb8' | wc -l)
        senders=$(tshark -r "$pcap" -Y 'infiniband.bth.destqp != 1' -T fields -e ip.src | sort -u | wc -l)
        [[ $tclass == 0xb8 && $others == 0 && $senders == 2 ]] && ok=1
    fi
    tally "$name" "$ok" "REQ traffic class ${tclass:-?}, ${others:-?} QP packets without TOS 0xb8, from ${senders:-?} ends"
}
for role in "${roles[@]}"; do
    # rxe plays $role; the drop-in the other side. The host program's path MTU is the lab's.
    while IFS='|' read -r name scenario lab args; do
        [[ -z $name ]] && continue
        peer_case "dropin-rxe_$role-$name" "$scenario" "$role" "$lab" \
            "ROCEXD_ARGS=--no-direct $host $args {peer}"
    done <<EOF_CASES
write_bw-64k|write_bw|--set SIZE=65536 --set ITERS=200|ib_write_bw -d rocex0 -m \$RXE_LAB_MTU -s 65536 -n 200 -F
rc_pingpong-4k|rc_pingpong|--set SIZE=4096 --set ITERS=100|ibv_rc_pingpong -d rocex0 -g 1 -m \$RXE_LAB_MTU -s 4096 -n 100
rc_pingpong-64k-mtu4096-events|rc_pingpong|--mtu 4096 --set SIZE=65536 --set ITERS=20 --set EVENTS=1|ibv_rc_pingpong -d rocex0 -g 1 -m \$RXE_LAB_MTU -s 65536 -n 20 -e
read_bw-64k|read_bw|--set SIZE=65536 --set ITERS=200|ib_read_bw -d rocex0 -m \$RXE_LAB_MTU -s 65536 -n 200 -F
send_lat-64|send_lat|--set SIZE=64 --set ITERS=100|ib_send_lat -d rocex0 -m \$RXE_LAB_MTU -s 64 -n 100 -F
atomic_bw-faa|atomic_bw_faa|--set ITERS=200|ib_atomic_bw -d rocex0 -m \$RXE_LAB_MTU -A FETCH_AND_ADD -n 200 -F
atomic_bw-cas|atomic_bw_cas|--set ITERS=200|ib_atomic_bw -d rocex0 -m \$RXE_LAB_MTU -A CMP_AND_SWAP -n 200 -F
rc_pingpong-16k-loss5|rc_pingpong|--loss 5 --set SIZE=16384 --set ITERS=50|ibv_rc_pingpong -d rocex0 -g 1 -m \$RXE_LAB_MTU -s 16384 -n 50
write_bw-16k-loss5|write_bw|--loss 5 --set SIZE=16384 --set ITERS=100|ib_write_bw -d rocex0 -m \$RXE_LAB_MTU -s 16384 -n 100 -F
read_bw-16k-loss5|read_bw|--loss 5 --set SIZE=16384 --set ITERS=50|ib_read_bw -d rocex0 -m \$RXE_LAB_MTU -s 16384 -n 50 -F
send_lat-4k-loss5|send_lat|--loss 5 --set SIZE=4096 --set ITERS=50|ib_send_lat -d rocex0 -m \$RXE_LAB_MTU -s 4096 -n 50 -F
atomic_bw-faa-loss5|atomic_bw_faa|--loss 5 --set ITERS=200|ib_atomic_bw -d rocex0 -m \$RXE_LAB_MTU -A FETCH_AND_ADD -n 200 -F
EOF_CASES
    # rocexd --direct (its default; the cases above take --no-direct): the program's engine
    # runs in its own process on the slot's steered socket (docs/architecture.md, "The
    # direct data path"); the wire is the same.
    while IFS='|' read -r name scenario lab args; do
        [[ -z $name ]] && continue
        peer_case "dropin-rxe_$role-$name-direct" "$scenario" "$role" "$lab" \
            "ROCEXD_ARGS=--direct $host $args {peer}"
    done <<EOF_DIRECT
write_bw-64k|write_bw|--set SIZE=65536 --set ITERS=200|ib_write_bw -d rocex0 -m \$RXE_LAB_MTU -s 65536 -n 200 -F
read_bw-64k|read_bw|--set SIZE=65536 --set ITERS=200|ib_read_bw -d rocex0 -m \$RXE_LAB_MTU -s 65536 -n 200 -F
rc_pingpong-64k-mtu4096-events|rc_pingpong|--mtu 4096 --set SIZE=65536 --set ITERS=20 --set EVENTS=1|ibv_rc_pingpong -d rocex0 -g 1 -m \$RXE_LAB_MTU -s 65536 -n 20 -e
send_lat-64|send_lat|--set SIZE=64 --set ITERS=100|ib_send_lat -d rocex0 -m \$RXE_LAB_MTU -s 64 -n 100 -F
atomic_bw-faa|atomic_bw_faa|--set ITERS=200|ib_atomic_bw -d rocex0 -m \$RXE_LAB_MTU -A FETCH_AND_ADD -n 200 -F
write_bw-16k-loss5|write_bw|--loss 5 --set SIZE=16384 --set ITERS=100|ib_write_bw -d rocex0 -m \$RXE_LAB_MTU -s 16384 -n 100 -F
EOF_DIRECT
    # rocexd --ecn: its packets ECT(0), DCQCN on (docs/congestion.md); rxe ignores both.
    peer_case "dropin-rxe_$role-write_bw-64k-ecn" write_bw "$role" \
        "--set SIZE=65536 --set ITERS=200" \
        "ROCEXD_ARGS='--ecn --no-direct' $host ib_write_bw -d rocex0 -m \$RXE_LAB_MTU -s 65536 -n 200 -F {peer}"
    # rping, ucmatose and ib_send_bw -R: the connection made by CM MADs on QP1 between
    # rocexd's CM and the kernel's, through rocex's librdmacm; udaddy: the UD service
    # resolved by SIDR_REQ and SIDR_REP between them. Where the guest serves, the
    # host starts 3 s late (DROPIN_WAIT in dropin_host.sh). ib_send_bw -R makes two RC
    # connections between the same two addresses; `rocex conform replay` tells them apart
    # by the QPNs of their CM REQ and REP. Only with rxe as the client: against a guest
    # server, the drop-in's client sends its second REQ 13-35 ms after the first RTU (on
    # either path), before the guest's perftest listens again; the guest's CM rejects it
    # (reason 8) and perftest 4.5-0.17 crashes in its retry (docs/verbs.md).
    send_bw_rdma_cm="ib_send_bw -d rocex0 -R -m \$RXE_LAB_MTU -s 4096 -n 20 -F"
    programs=(rping ucmatose udaddy)
    if [[ $role == server ]]; then
        late="DROPIN_WAIT=3 " rping="rping -c -a \$RXE_LAB_GUEST_IP -v -V -C 5 -S 64"
        ucmatose="ucmatose -s \$RXE_LAB_GUEST_IP -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64"
        udaddy="udaddy -s \$RXE_LAB_GUEST_IP -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64"
    else
        late= rping="rping -s -a \$RXE_LAB_HOST_IP -v -C 5 -S 64"
        ucmatose="ucmatose -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64"
        udaddy="udaddy -b \$RXE_LAB_HOST_IP -c 1 -C 5 -S 64"
        programs+=(send_bw_rdma_cm)
    fi
    for p in "${programs[@]}"; do
        peer_case "dropin-rxe_$role-$p" "$p" "$role" "" "ROCEXD_ARGS=--no-direct $late$host ${!p}"
        # On the direct path the program's process moves its QPs with what rocexd's CM
        # settled (docs/abi.md §6.5).
        peer_case "dropin-rxe_$role-$p-direct" "$p" "$role" "" \
            "ROCEXD_ARGS=--direct $late$host ${!p}"
        # UD does not resend: a datagram lost leaves udaddy waiting for it (the SIDR_REQ
        # is resent, the datagrams are not), so udaddy has no loss case.
        [[ $p == udaddy ]] && continue
        peer_case "dropin-rxe_$role-$p-loss5" "$p" "$role" "--loss 5" \
            "ROCEXD_ARGS=--no-direct $late$host ${!p}"
    done
    if [[ $role == server ]]; then
        tos_case "dropin-rxe_server-ucmatose-tos" "ROCEXD_ARGS=--no-direct $late$host $ucmatose -t 184"
    fi
done
interop_end dropin-interop
