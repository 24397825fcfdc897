# rocex tasks. `just` lists them.

set shell := ["bash", "-euo", "pipefail", "-c"]

import 'proto-tests/rxe-lab/lab.just'

# List the recipes.
default:
    @just --list

# The main job: two rocex engines on 127.0.0.1 and 127.0.0.2 (no root, no setup) run a
# ping-pong and a verified RDMA WRITE stream and print what happened
# (`just demo --inject loss=0.05`: `rocex demo`'s options).
demo *ARGS:
    cargo run --release -q -p rocex-cli -- demo {{ARGS}}

# Install rocex, rocexd, the drop-in libraries (PREFIX/lib/rocex), the systemd unit
# rocexd@.service and an example configuration under PREFIX (`just install /usr/local`;
# `--profile debug` installs a debug build; docs/daemon.md, "Running it as a service").
install PREFIX *ARGS:
    packaging/install.sh {{ARGS}} "{{PREFIX}}"

# A test that cannot run here (not root, a tool missing) fails in CI and is listed at the
# end elsewhere. The doctests run on their own (--all-targets leaves them out).
# Every test: unit, property, capture conformance, tshark, doctests and `just loom`.
test:
    #!/usr/bin/env bash
    set -uo pipefail
    export ROCEX_SKIP_LOG="$PWD/target/test-skips.log"
    mkdir -p target && : > "$ROCEX_SKIP_LOG"
    cargo test --workspace --all-targets; status=$?
    # The client suites again with every test daemon granting direct slots, so each
    # program runs its own engine (docs/verbs.md, "Direct mode").
    ROCEX_TEST_DIRECT=1 cargo test -p rocex-ibverbs -p rocex-rdmacm -p rocex-daemon || status=1
    cargo test --workspace --doc || status=1
    "{{just_executable()}}" loom || status=1
    if [ -s "$ROCEX_SKIP_LOG" ]; then
        echo "$(sort -u "$ROCEX_SKIP_LOG" | wc -l) test(s) SKIPPED (\`just deps\` installs the tools; namespace tests need root):"
        sort -u "$ROCEX_SKIP_LOG" | sed 's/^SKIPPED: /  /'
    fi
    exit $status

# --cfg loom builds in a target directory of its own, so that the changed RUSTFLAGS do not
# rebuild the workspace's other artefacts.
# The loom model checks of rocex-shm's ring publish/consume and sleep/wakeup (docs/abi.md).
loom:
    RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p rocex-shm --release --lib loom

# Two rocexd in two network namespaces joined by a veth pair: rocex perf on every backend,
# every verbs operation, concurrent, killed and hostile clients, and every perf test one
# after another on the same daemons. Needs root.
veth:
    cargo test -p rocex-daemon --test veth --test sequence

# One million mixed, checked messages over 16 QPs between two rocexd in network namespaces,
# both injecting 10% loss, duplication, reordering and corruption.
# The soak test: nothing lost, memory flat (`just soak --quick` for CI). Needs root.
soak *ARGS:
    proto-tests/soak/soak.sh {{ARGS}}

# Install what the tests need on Debian (tshark, tcpdump, perftest, ibverbs-utils, rdmacm-utils,
# libibverbs-dev, gcc, binutils, iproute2).
deps:
    .ci/install-deps.sh

# Print a capture like tcpdump (`just dump FILE --json`, `just dump FILE --check`).
dump FILE *ARGS:
    cargo run -q --release -p rocex-cli -- dump "{{FILE}}" {{ARGS}}

# Accept new or changed capture snapshots (decoded captures, both replays' counts) after
# reviewing them.
snapshots:
    INSTA_UPDATE=always cargo test -p rocex-proto-tests --test pcap_conformance --test conform_replay --test conform_requester
    git status --short proto-tests/tests/snapshots

# Criterion benchmarks of the hot paths (wire parse/build + ICRC, the engine's per-packet cost).
bench *ARGS:
    cargo bench -p rocex-wire -p rocex-proto {{ARGS}}

# Fuzz a target (`just fuzz frame -- -max_total_time=60`); the corpus is seeded from pcaps/.
fuzz TARGET *ARGS:
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    proto-tests/fuzz/seed.sh
    cd proto-tests/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run {{TARGET}} corpus/{{TARGET}} {{ARGS}}

# Performance side by side on a veth pair: iperf3, raw UDP, rocex perf, 1 to 4096 QPs, and
# the path through rocexd (--no-direct) and the direct path (rocexd's default), pinned and unpinned
# (writes docs/performance.md and its charts, docs/perf/; `--path-only` runs just the
# data-path table). Needs root.
bench-compare *ARGS:
    cargo build -q --release -p rocex-cli -p rocex-daemon -p rocex-plot
    proto-tests/bench/compare.sh {{ARGS}}

# rocex against kernel rxe in the same rxe lab guests (QEMU): perf write bw/lat vs
# ib_write_bw/lat, ratios into docs/performance.md. Needs root and the lab image; slow.
bench-lab *ARGS:
    cargo build -q --release -p rocex-cli
    proto-tests/bench/lab_compare.sh {{ARGS}}

# Debian's ib_write_bw and ib_write_lat through the drop-in library and rocex perf, on the
# same pair of rocexd (veth), 5 runs each unpinned and pinned, for docs/performance.md:
# the drop-in against rocex perf, medians and ratios, the daemons with `--no-direct`;
# `--direct` runs them with `--direct`. Needs root and perftest.
bench-dropin *ARGS:
    proto-tests/bench/dropin.sh {{ARGS}}

# Goodput of 64 KiB WRITE and 16 KiB READ streams under 0.1-10% random loss (nftables on
# a veth pair), rocex's recovery beside rxe's (`rocexd --rxe-recovery`), into
# docs/performance.md and docs/perf/loss.svg. Needs root and nft.
bench-loss *ARGS:
    cargo build -q --release -p rocex-cli -p rocex-daemon -p rocex-plot
    proto-tests/bench/loss.sh {{ARGS}}

# A short run of every fuzz target (CI).
fuzz-ci:
    for t in frame responder shm_desc control; do just fuzz $t -- -max_total_time=30; done

# Storage over rocex: iSER (tgtd and libiscsi through the drop-in libraries) against the
# kernel's iSER initiator and LIO target in an rxe lab guest and rocex to rocex, and NVMe-oF;
# every scenario in proto-tests/storage/scenarios (`just storage --quick` for CI). Needs root.
storage *ARGS:
    proto-tests/storage/run.sh {{ARGS}}

# Lints: formatting and clippy, warnings as errors.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Interop: ibv_rc_pingpong, ibv_ud_pingpong and perftest in a kernel rxe guest against
# rocex, both roles, with loss, also as Debian's binaries through the drop-in library
# (`just interop --quick` for the CI subset). Needs root.
interop *ARGS:
    proto-tests/interop/run.sh {{ARGS}}
    proto-tests/interop/perftest.sh {{ARGS}}
    proto-tests/interop/probe.sh {{ARGS}}
    proto-tests/interop/rdmacm.sh {{ARGS}}
    proto-tests/interop/dropin.sh {{ARGS}}
