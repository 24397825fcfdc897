#!/usr/bin/env bash
# Installs what rocex's tests need on a fresh Debian machine; quick when all is there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg_cmd in tshark:tshark tcpdump:tcpdump perftest:ib_write_bw ibverbs-utils:ibv_rc_pingpong \
    rdmacm-utils:rping libibverbs-dev:/usr/include/infiniband/verbs.h \
    librdmacm-dev:/usr/include/rdma/rdma_cma.h fio:fio systemd:systemd-analyze \
    python3-prometheus-client:/usr/lib/python3/dist-packages/prometheus_client gcc:gcc binutils:objdump iproute2:ip nftables:nft \
    tgt:tgtadm libiscsi-bin:iscsi-test-cu; do
    what=${pkg_cmd#*:}
    if [[ $what == /* ]]; then [ -e "$what" ]; else command -v "$what" >/dev/null; fi ||
        need+=("${pkg_cmd%%:*}")
done
if ((${#need[@]})); then
    echo "installing ${need[*]}"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
command -v just >/dev/null || [ -x "$HOME/.cargo/bin/just" ] || cargo install just --locked
