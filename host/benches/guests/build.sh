#!/usr/bin/env bash
# Builds the bench-only `add` guests of the issue-33 rows (host/benches/run.sh) as a user would:
# `wasmrpc build app.py` / `app.js` (componentize-py, esbuild + componentize-js with its default
# WASI imports; pinned toolchains in target/toolchains) into target/bench-guests/{py_add,js_add}.wasm.
# A guest newer than its source and the binary is not built again. Prints the two paths. ONLY=py or
# ONLY=js builds one of them and prints its path alone. WASMRPC=path/to/wasmrpc picks the binary.
set -euo pipefail
cd "$(dirname "$0")/../../.."
wasmrpc=${WASMRPC:-target/release/wasmrpc}
out=target/bench-guests
mkdir -p "$out"
only=${ONLY:-}
build() { # SOURCE OUT
    if [[ ! $2 -nt $1 || $wasmrpc -nt $2 ]]; then
        "$wasmrpc" build "$1" -o "$2" --toolchains target/toolchains >/dev/null
    fi
}
[[ $only == js ]] || build host/benches/guests/py_add/app.py "$out/py_add.wasm"
[[ $only == py ]] || build host/benches/guests/js_add/app.js "$out/js_add.wasm"
[[ $only == js ]] || echo "$PWD/$out/py_add.wasm"
[[ $only == py ]] || echo "$PWD/$out/js_add.wasm"
