# Shared by the interop runners: one lab run with rocex on the host side, and its checks.
# Callers set $root, then start with interop_start (which sets $out, $rocex and the
# tallies pass, fail and failed) and end with interop_end.

# interop_args QUICK_REGEX ARGS...: a runner's options into $roles and $only: --role R (the
# cases where rxe plays R), --only RE (cases whose name matches RE), --quick (QUICK_REGEX).
interop_args() {
    local quick_re=$1
    shift
    roles=(server client) only=
    while (($#)); do
        case $1 in
        --role) roles=("$2"); shift ;;
        --only) only=$2; shift ;;
        --quick) only=$quick_re ;;
        *) echo "usage: $0 [--quick] [--role server|client] [--only REGEX]" >&2; exit 2 ;;
        esac
        shift
    done
}

# interop_start NAME QUICK_REGEX "CARGO PACKAGES" ARGS...: a runner's start. Its output
# goes to $INTEROP_OUT, else target/NAME; ARGS are its options (interop_args); rocex is
# $ROCEX (with what lies beside it), else target/release/rocex built with the packages;
# the lab's guest image is built; the tallies start at zero.
interop_start() {
    local name=$1 quick_re=$2 packages=$3
    shift 3
    out=${INTEROP_OUT:-$root/target/$name}
    mkdir -p "$out"
    interop_args "$quick_re" "$@"
    if [[ -n ${ROCEX:-} ]]; then
        rocex=$ROCEX
    else
        rocex=$root/target/release/rocex
        # shellcheck disable=SC2086
        cargo build -q --release --manifest-path "$root/Cargo.toml" $packages
    fi
    bash "$root/proto-tests/rxe-lab/build.sh" >/dev/null
    pass=0 fail=0 failed=()
}

# interop_end LABEL: the failed cases and "LABEL: N passed, N failed"; fails if any did.
interop_end() {
    ((fail == 0)) || echo "failed: ${failed[*]}"
    echo "$1: $pass passed, $fail failed"
    ((fail == 0))
}

# peer_case NAME SCENARIO GUEST_ROLE "LAB OPTIONS" "ROCEX COMMAND": one case whose rocex
# command names the guest where the guest serves: the word {peer} in it stands for the
# guest's address then, and for nothing where rocex serves. --inject in the command makes
# it a fault case; a case --only leaves out is skipped.
peer_case() {
    local name=$1 scenario=$2 role=$3 lab=$4 cmd=$5 runner=run_case
    if [[ -n $only && ! $name =~ $only ]]; then return 0; fi
    [[ $cmd == *--inject* ]] && runner=run_fault_case
    if [[ $role == server ]]; then
        cmd=${cmd//\{peer\}/\$RXE_LAB_GUEST_IP}
    else
        cmd=${cmd//\{peer\} /}
        cmd=${cmd// \{peer\}/}
    fi
    $runner "$name" "$scenario" "$role" "$lab" "$cmd"
}

# rocex's address on the lab's bridge (RXE_LAB_HOST_IP).
ROCEX_LAB_IP=198.18.0.1

source "$root/proto-tests/rxe-lab/lib.sh"

# lab NAME SCENARIO GUEST_ROLE "LAB OPTIONS" "HOST COMMAND": the lab run (once more if the
# guest's kernel crashed), capture in $out/NAME.pcap, output in $out/NAME.log.
lab() {
    local name=$1 scenario=$2 role=$3 lab=$4 host_cmd=$5
    # shellcheck disable=SC2086
    lab_run "$out/$name.log" "$scenario" --guest-role "$role" $lab \
        --out "$out/$name.pcap" --host-cmd "$host_cmd"
}

# tally NAME OK DETAIL: counts and prints one case's verdict.
tally() {
    local name=$1 ok=$2 detail=$3
    if ((ok)); then
        pass=$((pass + 1))
        printf 'PASS %-40s %s\n' "$name" "$detail"
    else
        fail=$((fail + 1)); failed+=("$name")
        printf 'FAIL %-40s (see %s)\n' "$name" "$out/$name.log"
        [[ -n $detail ]] && echo "     $detail"
        tail -n 15 "$out/$name.log" | sed 's/^/     /'
    fi
}

# run_case NAME SCENARIO GUEST_ROLE "LAB OPTIONS" "HOST COMMAND"
# Boots the scenario's guest in GUEST_ROLE with rocex's HOST COMMAND on the bridge's host
# side; passes when both sides succeed and the capture passes `rocex dump --check` and
# `rocex conform replay`.
run_case() {
    local name=$1 pcap=$out/$1.pcap ok=0
    rm -f "$out/$name".{check,conform}
    if lab "$@" \
        && "$rocex" dump --check "$pcap" >"$out/$name.check" \
        && "$rocex" conform replay "$pcap" >"$out/$name.conform"; then
        ok=1
    fi
    tally "$name" "$ok" "$(tail -n1 "$out/$name.check" 2>/dev/null) | $(tail -n1 "$out/$name.conform" 2>/dev/null)"
}

# run_fault_case NAME SCENARIO GUEST_ROLE "LAB OPTIONS" "HOST COMMAND"
# As run_case, for a HOST COMMAND whose rocex injects faults into what it sends
# (`--inject`, its counters on stderr). The frames that fail `rocex dump --check` must be
# exactly rocex's corrupted packets, dropped by rxe (faults.py keeps the account); the
# capture without them must pass `rocex dump --check`, and its connections where rxe
# answers `rocex conform replay`.
run_fault_case() {
    local name=$1 pcap=$out/$1.pcap clean=$out/$1.clean.pcap replay=$out/$1.replay.pcap
    local ok=0 corrupted rcvd
    rm -f "$out/$name".{check,faults,clean.check,conform} "$clean" "$replay"
    if lab "$@"; then
        "$rocex" dump --check "$pcap" >"$out/$name.check" || true
        corrupted=$(sed -n 's/^\[host\] .*: injected .* corrupted=\([0-9]*\)$/\1/p' "$out/$name.log" | tail -n1)
        rcvd=$(sed -n 's/^  rcvd_pkts \([0-9]*\)$/\1/p' "$out/$name.log" | tail -n1)
        if [[ -z $corrupted ]]; then
            echo "rocex printed no fault counters" >"$out/$name.faults"
        elif python3 "$root/proto-tests/interop/faults.py" "$pcap" "$out/$name.check" \
            "$ROCEX_LAB_IP" "$corrupted" "${rcvd:-0}" "$clean" "$replay" >"$out/$name.faults" \
            && "$rocex" dump --check "$clean" >"$out/$name.clean.check" \
            && "$rocex" conform replay "$replay" >"$out/$name.conform"; then
            ok=1
        fi
    fi
    tally "$name" "$ok" "$(sed -n 's/^\[host\] \(.*: injected .*\)$/\1/p' "$out/$name.log" | tail -n1) | $(cat "$out/$name.faults" 2>/dev/null) | $(tail -n1 "$out/$name.clean.check" 2>/dev/null) | $(tail -n1 "$out/$name.conform" 2>/dev/null)"
}
