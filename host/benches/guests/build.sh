#!/usr/bin/env bash
# Builds the bench-only `add` guests of the issue-33 rows (host/benches/run.sh) with the pinned stock
# toolchains (tests/toolchains/{python,js}.sh, installed into target/ when missing) into
# target/bench-guests/{py_add,js_add}.wasm; a guest newer than its source is not built again.
# Prints the two paths. ONLY=py or ONLY=js builds one of them and prints its path alone.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=target/bench-guests
mkdir -p "$out"
only=${ONLY:-}
if [[ $only != js && ! $out/py_add.wasm -nt host/benches/guests/py_add/app.py ]]; then
    componentize_py="$(bash tests/toolchains/python.sh | tail -n 1)"
    "$componentize_py" -d wit/tensor.wit -w tensor-function componentize app \
        -p host/benches/guests/py_add -p guest-sdk/python/src -o "$out/py_add.wasm" >&2
fi
if [[ $only != py && ! $out/js_add.wasm -nt host/benches/guests/js_add/app.js ]]; then
    cjs="$(bash tests/toolchains/js.sh | tail -n 1)"
    # No WASI at all: the host links none of what componentize-js asks for by default.
    "$cjs" host/benches/guests/js_add/app.js --wit wit --world-name tensor-function \
        -d stdio random clocks http fetch-event -o "$out/js_add.wasm" >&2
fi
[[ $only == js ]] || echo "$PWD/$out/py_add.wasm"
[[ $only == py ]] || echo "$PWD/$out/js_add.wasm"
