#!/usr/bin/env bash
# Issue 33 rows L1-L4: Python and JavaScript guests (the stock toolchains, host/benches/guests/)
# against their Rust twin (examples/add's add_float32) in one run of the release server, plus the
# upload of the 18 MB Python component to its first answer. Prints one row per line:
#
#   L1 py add p50 ms   L2 js add p50 ms   L3 rust add p50 ms (and the ratios)   L4 py upload s
#
# The latency lines before the rows also give `py_noop` and `js_noop`, the floor of a call in each
# language (docs/benchmarks.md, "The floor of a call"), and `py_bare` and `js_bare`, the same
# without the SDK (issue 33, "Faster calls").
#
#   bash host/benches/lang.sh          # after `cargo build --release -p wasmrpc-host`
#   LANG_ROUNDS=10 LANG_CALLS=200 bash host/benches/lang.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
wasmrpc=target/release/wasmrpc
mapfile -t built < <(bash host/benches/guests/build.sh)
py=${built[0]} js=${built[1]} py_noop=${built[2]} js_noop=${built[3]}
py_bare=${built[4]} js_bare=${built[5]}
"$wasmrpc" build --profile guest --target-dir target/guests -p example-add >/dev/null
rust=target/guests/wasm32-unknown-unknown/guest/example_add.component.wasm

data=$(mktemp -d)
log="$data/serve.log"
"$wasmrpc" serve --listen 127.0.0.1:0 --data-dir "$data/d" >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data"' EXIT
until grep -q "listening on" "$log"; do sleep 0.1; done
address=$(grep -o "listening on [^ ]*" "$log" | head -1 | sed 's/listening on //; s#http://##')
export WASMRPC_SERVER="http://$address"

"$wasmrpc" deploy rust_add "$rust" --export add_float32 >/dev/null
"$wasmrpc" deploy js_add "$js" >/dev/null
"$wasmrpc" deploy py_noop "$py_noop" >/dev/null 2>&1
"$wasmrpc" deploy js_noop "$js_noop" >/dev/null 2>&1
"$wasmrpc" deploy py_bare "$py_bare" >/dev/null 2>&1
"$wasmrpc" deploy js_bare "$js_bare" >/dev/null 2>&1
start=$(date +%s.%N)
"$wasmrpc" deploy py_add "$py" >/dev/null
"$wasmrpc" call py_add 'float32:[1]' 'float32:[2]' >/dev/null
upload=$(echo "$(date +%s.%N) - $start" | bc)

python3 host/benches/lang_latency.py "$address" "${LANG_CALLS:-200}" "${LANG_ROUNDS:-10}" \
    rust_add py_bare py_noop py_add js_bare js_noop js_add | tee "$data/lat"
p50() { awk -v m="$1" '$1 == m { print $3 }' "$data/lat"; }
ratio() { awk -v m="$1" '$1 == m { print $9 }' "$data/lat"; }
row() { # id, what, value, target, pass
    printf '%-3s %-52s %-44s %-10s %s\n' "$1" "$2" "$3" "$4" "$5"
}
verdict() { python3 -c "print('pass' if $1 else 'FAIL')"; }
row L1 "Python add, 1,000 float32, 1 connection, p50" "$(p50 py_add) ms ($(ratio py_add)x Rust)" "<= 1 ms" "$(verdict "$(p50 py_add) <= 1")"
row L2 "JavaScript add, 1,000 float32, 1 connection, p50" "$(p50 js_add) ms ($(ratio js_add)x Rust)" "<= 1 ms" "$(verdict "$(p50 js_add) <= 1")"
row L3 "Rust add (the twin), same run, p50" "$(p50 rust_add) ms" "-" "-"
row L4 "18 MB Python component: upload to first answer" "${upload%??????} s" "<= 20 s" "$(verdict "$upload <= 20")"
