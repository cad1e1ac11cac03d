#!/usr/bin/env bash
# Builds the bench-only guests of the issue-33 rows (host/benches/lang.sh) as a user would:
# `wasmrpc build app.py` / `app.js` (componentize-py, esbuild + componentize-js with its default
# WASI imports; pinned toolchains in target/toolchains) into target/bench-guests/NAME.wasm, for
# NAME in py_add, js_add (the rows), py_noop, js_noop (the floor of a call) and py_bare, js_bare
# (the same floor without the SDK). A guest newer than its source and the binary is not built
# again. Prints the six paths in that order.
# WASMRPC=path/to/wasmrpc picks the binary.
set -euo pipefail
cd "$(dirname "$0")/../../.."
wasmrpc=${WASMRPC:-target/release/wasmrpc}
out=target/bench-guests
mkdir -p "$out"
for name in py_add js_add py_noop js_noop py_bare js_bare; do
    source=host/benches/guests/$name/app.${name%%_*}
    wasm=$out/$name.wasm
    if [[ ! $wasm -nt $source || $wasmrpc -nt $wasm ]]; then
        "$wasmrpc" build "$source" -o "$wasm" --toolchains target/toolchains >/dev/null
    fi
    echo "$PWD/$wasm"
done
