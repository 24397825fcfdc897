# Shared by the interop runners: one lab run with rocex on the host side, and its checks.
# Callers set $root, $rocex and $out, and keep the tallies pass, fail and failed.

# run_case NAME SCENARIO GUEST_ROLE "LAB OPTIONS" "HOST COMMAND"
# Boots the scenario's guest in GUEST_ROLE with rocex's HOST COMMAND on the bridge's host
# side; passes when both sides succeed and the capture passes `rocex dump --check` and
# `rocex conform replay`.
run_case() {
    local name=$1 scenario=$2 role=$3 lab=$4 host_cmd=$5 pcap=$out/$1.pcap
    # shellcheck disable=SC2086
    if timeout 240 bash "$root/proto-tests/rxe-lab/run.sh" "$scenario" --guest-role "$role" $lab \
        --out "$pcap" --host-cmd "$host_cmd" >"$out/$name.log" 2>&1 \
        && "$rocex" dump --check "$pcap" >"$out/$name.check" \
        && "$rocex" conform replay "$pcap" >"$out/$name.conform"; then
        pass=$((pass + 1))
        printf 'PASS %-40s %s | %s\n' "$name" "$(tail -n1 "$out/$name.check")" "$(tail -n1 "$out/$name.conform")"
    else
        fail=$((fail + 1)); failed+=("$name")
        printf 'FAIL %-40s (see %s)\n' "$name" "$out/$name.log"
        tail -n 15 "$out/$name.log" | sed 's/^/     /'
    fi
}
