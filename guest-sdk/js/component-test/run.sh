#!/usr/bin/env bash
# Builds examples/js/matmul and examples/js/echo into components with the pinned stock toolchain
# (tests/toolchains/js.sh), without WASI imports, transpiles them with jco and checks their answers
# from node (check.mjs). This tests the SDK inside StarlingMonkey without the server, which does not
# accept WASI-importing components yet. Writes to target/js/. Usage: guest-sdk/js/component-test/run.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root" # componentize-js only sees files below its working directory: build from the root
cjs=$(tests/toolchains/js.sh | tail -1)
jco="$(dirname "$cjs")/jco"
out=target/js
mkdir -p "$out/run"

for app in matmul echo; do
    start=$EPOCHREALTIME
    "$cjs" "examples/js/$app/app.js" --wit wit --world-name tensor-function \
        -d stdio random clocks http fetch-event -o "$out/$app.wasm" >/dev/null
    printf '%s: built in %.1f s, %s bytes\n' "$app" "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "$(stat -c %s "$out/$app.wasm")"
    "$jco" transpile "$out/$app.wasm" -o "$out/run/$app" --quiet \
        --map 'wasmrpc:tensor/log@0.1.0=../log.js' --map 'wasmrpc:tensor/types@0.1.0=../types.js'
done
# The host side of the `log` import (types has no functions, but jco still imports the module).
echo 'export function log(level, message) { console.error(`[guest ${level}] ${message}`); }' >"$out/run/log.js"
echo 'export {};' >"$out/run/types.js"

node guest-sdk/js/component-test/check.mjs "$out/run/matmul/matmul.js" "$out/run/echo/echo.js"
