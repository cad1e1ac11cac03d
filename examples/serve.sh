#!/usr/bin/env bash
# The main job: build the server and the example components (Rust; Python and JavaScript twins of
# some), start the server on its embedded default store, and register every example. Ctrl-C stops it.
# The first run installs the Python and JavaScript toolchains (needs python3, and node with npm).
#
#   bash examples/serve.sh                       # http://127.0.0.1:8080
#   WASMRPC_LISTEN=127.0.0.1:9000 bash examples/serve.sh
#
# Extra arguments go to `wasmrpc serve` (see `wasmrpc serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown
cargo build --release -p wasmrpc-host
wasmrpc=target/release/wasmrpc
# The examples as components with no WASI imports (`wasmrpc build`, docs/writing-functions.md):
# the same code as their wasm32-wasip2 builds, cheaper to call.
guests=(example-add example-matmul example-softmax example-strings example-linalg)
"$wasmrpc" build --profile guest --target-dir target/guests \
    $(printf -- '-p %s ' "${guests[@]}") >/dev/null
wasm=target/guests/wasm32-unknown-unknown/guest
# The Python and JavaScript twins, built with componentize-py and componentize-js (installed on
# first use into target/toolchains, pinned); a build is redone only when its source or the binary
# (which carries the SDKs) is newer than the component, so a rerun registers nothing new.
sources=target/examples-src
mkdir -p "$sources"
build_source() { # SOURCE NAME
    local out="$sources/$2.wasm"
    if [[ ! -f $out || $1 -nt $out || $wasmrpc -nt $out ]]; then
        "$wasmrpc" build "$1" -o "$out" --toolchains target/toolchains >/dev/null
    fi
}
build_source examples/python/softmax/app.py softmax_py
build_source examples/python/strings/app.py strings_py
build_source examples/js/matmul/app.js matmul_js
listen=${WASMRPC_LISTEN:-127.0.0.1:8080}
export WASMRPC_SERVER="http://$listen"

started=$(mktemp)
"$wasmrpc" serve --listen "$listen" "$@" > >(tee "$started") &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$started"' INT TERM EXIT

# Wait for this server's own "listening" line (not just any server on the port), then until it
# answers; registering works while it still loads what it has stored.
until grep -q "listening on" "$started"; do
    kill -0 "$server" 2>/dev/null || { echo "the server did not start" >&2; exit 1; }
    sleep 0.1
done
for _ in $(seq 1 300); do
    if "$wasmrpc" list >/dev/null 2>&1; then break; fi
    sleep 0.1
done

deploy() { "$wasmrpc" deploy --if-changed "$@"; }
deploy add "$wasm/example_add.component.wasm" --export add
for dtype in bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64; do
    deploy "add_$dtype" "$wasm/example_add.component.wasm" --export "add_$dtype"
done
deploy matmul "$wasm/example_matmul.component.wasm"
deploy softmax "$wasm/example_softmax.component.wasm"
deploy upper "$wasm/example_strings.component.wasm" --export upper
deploy length "$wasm/example_strings.component.wasm" --export length
for m in transpose sum scale max identity; do
    deploy "$m" "$wasm/example_linalg.component.wasm" --export "$m"
done
deploy softmax_py "$sources/softmax_py.wasm"
deploy upper_py "$sources/strings_py.wasm" --export upper
deploy length_py "$sources/strings_py.wasm" --export length
deploy matmul_js "$sources/matmul_js.wasm"

echo
echo "examples registered. Open the console in a browser:"
echo "  $WASMRPC_SERVER/ui"
echo "or try:"
echo "  curl -s $WASMRPC_SERVER/v1/methods"
echo "  $wasmrpc call add 'int32:[1,2]' 'int32:[10,20]'"
echo "  $wasmrpc call softmax_py 'float32:[1,2,3]'    # the same function in Python"
wait "$server"
