# Shared by the storage scenarios (proto-tests/storage/scenarios/*.sh): sourced, not run.
# docs/storage.md says what each scenario proves and why the workarounds below exist.

storage_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
storage_dir=$storage_root/proto-tests/storage
storage_out=${STORAGE_OUT:-$storage_root/target/storage}
mkdir -p "$storage_out"

# The target's IQN and the initiator's name, the same in every scenario and in the lab's
# guest scenario (proto-tests/rxe-lab/scenarios/iser.sh).
STORAGE_IQN=iqn.2026-12.org.rocex:lun
STORAGE_INITIATOR=iqn.2026-12.org.rocex:initiator
# The TCP port on which the initiator's side tells the target's side it is done.
STORAGE_PORT=18701
# The scenario's name, and whether it runs the CI subset: `--quick` or QUICK=1.
storage_name=storage/$(basename "$0" .sh)
quick=${QUICK:-0}
[[ ${1:-} == --quick ]] && quick=1

# need WHAT...: every named command exists, and we are root. Otherwise the scenario fails
# in CI (CI=true) and elsewhere prints SKIPPED: (also to $ROCEX_SKIP_LOG) and exits 0.
need() {
    local t missing=()
    [[ $EUID -eq 0 ]] || missing+=("root")
    for t in "$@"; do command -v "$t" >/dev/null || missing+=("$t"); done
    ((${#missing[@]} == 0)) && return 0
    if [[ -n ${CI:-} && ${CI:-} != false ]]; then
        echo "FAIL: $storage_name needs ${missing[*]}, which CI must provide" >&2
        exit 1
    fi
    echo "SKIPPED: $storage_name needs ${missing[*]} (Debian: tgt, libiscsi-bin, gcc; the rxe lab's tools)"
    [[ -n ${ROCEX_SKIP_LOG:-} ]] && echo "SKIPPED: $storage_name needs ${missing[*]}" >>"$ROCEX_SKIP_LOG"
    exit 0
}

# The rocex binaries (rocex, rocexd and the drop-in libraries beside them): $ROCEX, or a
# release build of the workspace.
storage_rocex() {
    if [[ -n ${ROCEX:-} ]]; then
        rocex=$ROCEX
    else
        rocex=$storage_root/target/release/rocex
        cargo build -q --release --manifest-path "$storage_root/Cargo.toml" \
            -p rocex-cli -p rocex-daemon -p rocex-ibverbs -p rocex-rdmacm -p rocex-dv-mlx5 \
            -p rocex-dv-efa || return 1
    fi
    rocexd=$(dirname "$rocex")/rocexd
    export ROCEX=$rocex
}

# storage_lab "LOG LINES" LAB_RUN_ARGS...: the scenario's rxe lab run (rocex and the
# guest image built first), its log in $log and its capture in $pcap (both
# $storage_out/NAME.*); prints the log's lines matching the regex LOG LINES, and where the
# run failed the log's tail, and exits 1.
storage_lab() {
    local show=$1 rc=0
    shift
    storage_rocex || exit 1
    bash "$storage_root/proto-tests/rxe-lab/build.sh" >/dev/null || exit 1
    log=$storage_out/${storage_name#storage/}.log pcap=$storage_out/${storage_name#storage/}.pcap
    source "$storage_root/proto-tests/rxe-lab/lib.sh"
    lab_run "$log" "$@" --out "$pcap" || rc=$?
    grep -E "$show" "$log" | sed 's/^/  /'
    ((rc == 0)) || { tail -n 30 "$log"; exit 1; }
}

# storage_capture_checks: the last line of `rocex dump --check` on $pcap; fails unless
# every frame checks.
storage_capture_checks() {
    "$rocex" dump --check "$pcap" | tail -n 1 | sed 's/^/  capture: /'
    test "${PIPESTATUS[0]}" -eq 0
}

# oob_wait PORT SECONDS: the first line a peer sends to TCP PORT, printed; fails after
# SECONDS without one.
oob_wait() {
    python3 - "$1" "$2" <<'EOF'
import socket, sys
s = socket.create_server(("0.0.0.0", int(sys.argv[1])), reuse_port=True)
s.settimeout(float(sys.argv[2]))
c, _ = s.accept()
c.settimeout(30)
data = b""
while not data.endswith(b"\n"):
    b = c.recv(256)
    if not b:
        break
    data += b
print(data.decode(errors="replace").strip())
EOF
}

# oob_send HOST PORT LINE: LINE to HOST:PORT, retried for 20 s while nobody listens.
oob_send() {
    local i
    for i in $(seq 40); do
        if exec 3<>"/dev/tcp/$1/$2"; then
            echo "$3" >&3
            exec 3>&-
            return 0
        fi 2>/dev/null
        sleep 0.5
    done
    echo "nobody listens on $1:$2" >&2
    return 1
}

# The command start_rocexd and start_tgtd run their program through: empty, or
# (ip netns exec NS) to start it in network namespace NS.
in_ns=()

# start_rocexd ADDR SOCKET [ARGS...]: a rocexd on ADDR serving SOCKET, in the background
# ($rocexd_pid), its log in SOCKET.log; waits for the socket.
start_rocexd() {
    local addr=$1 sock=$2
    shift 2
    RUST_LOG=${RUST_LOG:-warn} "${in_ns[@]}" "$rocexd" --addr "$addr" --socket "$sock" "$@" >"$sock.log" 2>&1 &
    rocexd_pid=$!
    for _ in $(seq 100); do
        [[ -S $sock ]] && return 0
        kill -0 "$rocexd_pid" 2>/dev/null || { echo "rocexd exited:"; cat "$sock.log"; return 1; }
        sleep 0.1
    done
    echo "rocexd made no $sock in 10 s"
    return 1
}

# start_tgtd SOCKET PORTAL LUN_FILE: Debian's tgtd under `rocex run` on the rocexd at
# SOCKET, an iSER target $STORAGE_IQN with LUN 1 on LUN_FILE, open to $STORAGE_INITIATOR
# from any address. Sets $tgtd_pid and $tgt_ctl (its tgtadm control port); log in $tgtd_log.
start_tgtd() {
    local sock=$1 portal=$2 lun=$3 t
    tgt_ctl=$((1000 + $$ % 20000))
    tgtd_log=$storage_out/tgtd-$tgt_ctl.log
    rm -f "/var/run/tgtd/socket.$tgt_ctl" "/var/run/tgtd/socket.$tgt_ctl.lock"
    "${in_ns[@]}" "$rocex" run --socket "$sock" -- \
        tgtd -f -C "$tgt_ctl" --iscsi "portal=$portal" >"$tgtd_log" 2>&1 &
    tgtd_pid=$!
    t="tgtadm -C $tgt_ctl --lld iser"
    for _ in $(seq 50); do
        $t --op show --mode target >/dev/null 2>&1 && break
        kill -0 "$tgtd_pid" 2>/dev/null || { echo "tgtd exited:"; cat "$tgtd_log"; return 1; }
        sleep 0.2
    done
    # tgt 1.0.85 lets an iSER login in only when both an address and a name ACL match
    # (iser_login_start); later versions need either.
    $t --op new --mode target --tid 1 -T "$STORAGE_IQN" \
        && $t --op new --mode logicalunit --tid 1 --lun 1 -b "$lun" \
        && $t --op bind --mode target --tid 1 -I ALL \
        && $t --op bind --mode target --tid 1 -Q "$STORAGE_INITIATOR" \
        || { echo "tgtadm failed:"; cat "$tgtd_log"; return 1; }
}

# stop_tgtd: tgtd, which leaves on SIGTERM only when idle, is killed.
stop_tgtd() {
    [[ -n ${tgtd_pid:-} ]] || return 0
    kill -KILL "$tgtd_pid" 2>/dev/null
    wait "$tgtd_pid" 2>/dev/null
    rm -f "/var/run/tgtd/socket.$tgt_ctl" "/var/run/tgtd/socket.$tgt_ctl.lock"
    tgtd_pid=
}
