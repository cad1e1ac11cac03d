#!/usr/bin/env bash
# The cluster's benchmark row: throughput of a CPU-bound method on one worker, then on two, each
# worker pinned to a core of its own (docs/benchmarks.md, "Cluster: 1 worker against 2"). The
# method is the matmul example on two N x N float32 matrices (N=160 by default: 4 M multiply-adds a
# call). Clients send `?worker=any` calls to every worker's address in turn, CLIENTS at a time, for
# SECONDS_PER_PHASE per phase, so parsing and computing are both spread over the workers.
#
#   bash host/benches/cluster.sh                       # release build
#   PROFILE=debug SECONDS_PER_PHASE=10 bash host/benches/cluster.sh
#   WASMRPC_BIN=/tmp/wasmrpc-old bash host/benches/cluster.sh
#       # another build of the `wasmrpc` binary (an older commit's, say), not built here: run it
#       # and this tree's build in turn for a before/after of a change
set -euo pipefail
cd "$(dirname "$0")/../.."

profile=${PROFILE:-release}
seconds=${SECONDS_PER_PHASE:-20}
clients=${CLIENTS:-4}
n=${N:-160}
nats=$(bash tests/nats/setup.sh | tail -n 1)
if [ -n "${WASMRPC_BIN:-}" ]; then
    [ -x "$WASMRPC_BIN" ] || { echo "WASMRPC_BIN=$WASMRPC_BIN is not an executable" >&2; exit 2; }
    wasmrpc=$WASMRPC_BIN
elif [ "$profile" = release ]; then
    cargo build --release -p wasmrpc-host --bin wasmrpc >&2
    wasmrpc=target/release/wasmrpc
else
    cargo build -p wasmrpc-host --bin wasmrpc >&2
    wasmrpc=target/debug/wasmrpc
fi
cargo build -q --profile guest --target wasm32-wasip2 --target-dir target/guests -p example-matmul >&2

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
nats_port=$(port)
"$nats" -a 127.0.0.1 -p "$nats_port" -js -sd "$work/nats" >"$work/nats.log" 2>&1 &
pids+=($!)
until (exec 3<>/dev/tcp/127.0.0.1/"$nats_port") 2>/dev/null; do sleep 0.1; done

# Start worker $1 on core $2, in this shell (so that its pid is kept for the clean-up).
start_worker() {
    WASMRPC_LOG=warn taskset -c "$2" "$wasmrpc" serve --listen 127.0.0.1:0 --data-dir "$work/$1" \
        --cluster "nats://127.0.0.1:$nats_port" --name "$1" >"$work/$1.log" 2>&1 &
    pids+=($!)
}

# The HTTP address of worker $1, once it is ready.
address_of() {
    local log="$work/$1.log" address
    until grep -q "listening on http://" "$log"; do sleep 0.1; done
    address=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$log" | head -1)
    until curl -sf "http://$address/readyz" >/dev/null; do sleep 0.1; done
    echo "$address"
}

# Calls per second of matmul through the addresses given, CLIENTS at a time.
load() {
    python3 - "$seconds" "$clients" "$n" "$@" <<'PY'
import http.client, json, sys, threading, time
seconds, clients, n, addresses = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
m = {"dtype": "float32", "shape": [n, n], "data": [0.5] * (n * n)}
body = json.dumps({"args": [m, m], "timeout_ms": 60000})
done, other = [0], []
def client(i):
    host, port = addresses[i % len(addresses)].split(":")
    c = http.client.HTTPConnection(host, int(port))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.request("POST", "/v1/methods/matmul/call?worker=any", body, {"Content-Type": "application/json"})
        r = c.getresponse(); answer = r.read()
        if r.status == 200: done[0] += 1
        else: other.append(answer[:200])
threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
if other: print("unexpected answers:", other[:3], file=sys.stderr)
print(f"{done[0] / seconds:.2f}")
PY
}

start_worker w0 0
w0=$(address_of w0)
curl -sf -X PUT --data-binary @target/guests/wasm32-wasip2/guest/example_matmul.wasm \
    "http://$w0/v1/methods/matmul" >/dev/null
one=$(load "$w0")
start_worker w1 1
w1=$(address_of w1)
until [ "$(curl -sf "http://$w0/v1/cluster/workers" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["workers"]))')" = 2 ]; do sleep 0.1; done
two=$(load "$w0" "$w1")
ratio=$(python3 -c "print(f'{$two / $one:.2f}')")
echo "profile $profile, matmul ${n}x${n}, $clients clients, ${seconds} s a phase: 1 worker $one calls/s, 2 workers $two calls/s: ${ratio}x (target >= 1.6x)"
