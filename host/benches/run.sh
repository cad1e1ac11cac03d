#!/usr/bin/env bash
# The performance table of docs/benchmarks.md in one command: builds in release, installs the
# load generators (wrk and h2load, from Debian's packages) when missing, then prints every row
# as measured value, target and pass/fail, each side by side with its baseline in the same run:
#
#   P1, P2   host/benches/wrk.sh: the wasmrpc binary and the native baseline server under wrk
#   P3-P10   host/benches/rows.rs: in process and against the real embedded server
#   G1, G2   host/benches/rows.rs too: the Rust client over gRPC against HTTP binary v2 (issue 34)
#   L1-L4    host/benches/lang.sh: Python and JavaScript guests against their Rust twin, and the
#            18 MB Python component's upload to its first answer (issue 33). LANGS=0 leaves it out.
#   C1       host/benches/cluster.sh: a CPU-bound method on 1 cluster worker, then on 2 (issue 10);
#            NATS from tests/nats/setup.sh. CLUSTER=0 leaves it out.
#
#   bash host/benches/run.sh                       # the whole table: ~6 minutes once built
#   WRK_SECONDS=10 WRK_ROUNDS=5 bash host/benches/run.sh
#   ROWS_METHODS=200 ROWS_MANY=2000 bash host/benches/run.sh   # smaller P6 and P8, quicker
#
# P6 registers 1,000 distinct components first (each compiled once: most of the run).
set -euo pipefail
cd "$(dirname "$0")/../.."

for tool in wrk:wrk h2load:nghttp2-client; do
    if ! command -v "${tool%%:*}" >/dev/null; then
        echo "installing ${tool#*:} from Debian's packages" >&2
        if [ "$(id -u)" = 0 ]; then apt-get install -y "${tool#*:}" >&2; else sudo apt-get install -y "${tool#*:}" >&2; fi
    fi
done
rustup target add wasm32-wasip2 wasm32-unknown-unknown >&2
cargo bench -p wasmrpc-host --bench rows --no-run >&2

echo "== P1, P2: HTTP/1.1 under wrk"
WRK_TRACING=${WRK_TRACING:-1} WRK_SECONDS=${WRK_SECONDS:-5} WRK_ROUNDS=${WRK_ROUNDS:-3} \
    bash host/benches/wrk.sh
echo
echo "== P3-P10; G1, G2: gRPC against HTTP binary v2 (issue 34)"
cargo bench -p wasmrpc-host --bench rows 2>/dev/null

if [ "${LANGS:-1}" != 0 ]; then
    echo
    echo "== L1-L4: Python and JavaScript guests against the Rust twin (issue 33)"
    cargo build --release -p wasmrpc-host --bin wasmrpc >&2
    bash host/benches/lang.sh
fi

if [ "${CLUSTER:-1}" != 0 ]; then
    echo
    echo "== C1: the cluster, 1 worker against 2"
    line=$(SECONDS_PER_PHASE=${SECONDS_PER_PHASE:-15} bash host/benches/cluster.sh 2>/dev/null | tail -n 1)
    echo "$line"
    ratio=$(sed -n 's/.*: \([0-9.]*\)x (target.*/\1/p' <<<"$line")
    verdict=$(python3 -c "print('pass' if float('${ratio:-0}') >= 1.6 else 'FAIL')")
    printf '%-3s %-52s %-44s %-10s %s\n' C1 "matmul calls/s, 2 workers / 1 worker" "${ratio}x" ">= 1.6" "$verdict"
fi
