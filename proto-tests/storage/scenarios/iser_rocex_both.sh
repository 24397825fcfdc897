#!/usr/bin/env bash
# iSER with rocex at both ends and no kernel RDMA: two network namespaces joined by a veth
# pair, a rocexd in each; Debian's tgtd under `rocex run` in one with a file-backed LUN,
# Debian's libiscsi under `rocex run` (iscsi_verify.py) in the other writing 4 KiB and
# 128 KiB commands in random order and reading every byte back; then the LUN file itself
# must hold exactly what was written (sha256), and a second session reads it all again.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
need tgtd tgtadm iscsi-inq gcc python3
storage_rocex || exit 1
source "$storage_root/proto-tests/veth.sh"
ns_t=rocex-st-t-$$ ns_i=rocex-st-i-$$ ip_t=198.18.7.1 ip_i=198.18.7.2
dir=$(mktemp -d /tmp/rocex-storage.XXXXXX)
pids=()
cleanup() {
    stop_tgtd
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    ip netns del "$ns_t" 2>/dev/null
    ip netns del "$ns_i" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
veth_pair "$ns_t" "$ns_i" st-t-$$ st-i-$$ "$ip_t" "$ip_i"
small=16 large=64
((quick)) && small=4 large=16
truncate -s 128M "$dir/lun.img"

in_ns=(ip netns exec "$ns_i")
start_rocexd "$ip_i" "$dir/i.sock" || exit 1
pids+=("$rocexd_pid")
in_ns=(ip netns exec "$ns_t")
start_rocexd "$ip_t" "$dir/t.sock" || exit 1
pids+=("$rocexd_pid")
start_tgtd "$dir/t.sock" "$ip_t:3260" "$dir/lun.img" || exit 1

url=iser://$ip_t/$STORAGE_IQN/1
verify() {
    ip netns exec "$ns_i" "$rocex" run --socket "$dir/i.sock" -- \
        python3 "$storage_dir/iscsi_verify.py" "$url" --initiator "$STORAGE_INITIATOR" --retries 10 "$@"
}
rc=0
verify --bs 4096 --size $((small << 20)) --seed 4 --random || rc=1
((rc == 0)) && { verify --bs 131072 --size $((large << 20)) --seed 128 --random --sha256 \
    | tee "$dir/large.out" || rc=1; }
if ((rc == 0)); then
    read -r _ bytes want < <(grep '^sha256 ' "$dir/large.out")
    got=$(head -c "$bytes" "$dir/lun.img" | sha256sum | cut -d' ' -f1)
    echo "LUN file: sha256 of the first $bytes bytes $got"
    [[ $got == "$want" ]] || { echo "the LUN file differs from what the initiator wrote"; rc=1; }
fi
((rc == 0)) && { verify --bs 131072 --size $((large << 20)) --seed 128 --read-only || rc=1; }
((rc == 0)) || tail -n 20 "$tgtd_log"
exit $rc
