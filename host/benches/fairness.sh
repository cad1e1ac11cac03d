#!/usr/bin/env bash
# The fairness figure with a load generator that is not ours: a release server on its defaults,
# two tenants; wrk measures the quiet tenant's latency calling scalar `add` alone, then again while
# a second wrk keeps the flooding tenant's slow calls (`spin`, 200 ms deadline) running from many
# connections. Prints the quiet tenant's p50 and p99 alone and during the flood, and their ratio
# (issue 7's target: p99 during / p99 alone <= 1.5). Rounds alternate alone / flooded.
#
#   bash host/benches/fairness.sh                     # 5 rounds of 10 s each side
#   FAIR_ROUNDS=9 FAIR_SECONDS=20 FAIR_QUIET_CONNECTIONS=4 FAIR_FLOOD_CONNECTIONS=64 \
#       bash host/benches/fairness.sh
#   WASMRPC_CPU_RESERVE=0 bash host/benches/fairness.sh   # without the CPU reserve
#   FAIR_BIN=/path/to/other/wasmrpc bash host/benches/fairness.sh   # another build, for A/B
#   FAIR_QUIET_CPU=0 bash host/benches/fairness.sh    # the quiet tenant's wrk kept to CPU 0
#   FAIR_FLOOD_CONNECTIONS=0 bash host/benches/fairness.sh   # no flood: the ratio's own noise
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=${FAIR_ROUNDS:-5}
seconds=${FAIR_SECONDS:-10}
quiet_connections=${FAIR_QUIET_CONNECTIONS:-1}
flood_connections=${FAIR_FLOOD_CONNECTIONS:-32}
flood_deadline_ms=${FAIR_FLOOD_DEADLINE_MS:-200}
bin=${FAIR_BIN:-target/release/wasmrpc}
# Where the quiet tenant's client runs decides the outliers on a small machine (docs/benchmarks.md):
# FAIR_QUIET_CPU pins it, to measure each CPU on purpose.
quiet_pin=()
[ -n "${FAIR_QUIET_CPU:-}" ] && quiet_pin=(taskset -c "$FAIR_QUIET_CPU")

if ! command -v wrk >/dev/null; then
    echo "installing wrk from Debian's packages" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi
rustup target add wasm32-wasip2 >&2
cargo build --release -p wasmrpc-host --bin wasmrpc >&2
cargo build --profile guest --target wasm32-wasip2 --target-dir target/guests \
    -p example-add -p guest-hostile >&2
guests=target/guests/wasm32-wasip2/guest

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

"$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
    --admin-key-file "$work/admin.key" > "$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
    grep -q "listening on http://" "$work/server.log" && break
    sleep 0.1
done
addr=$(sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$work/server.log" | head -1)
[ -n "$addr" ] || { echo "the server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
admin=$(cat "$work/admin.key")

# The key of a new tenant $1.
new_tenant() {
    curl -sf -H "Authorization: Bearer $admin" -d "{\"name\":\"$1\"}" "http://$addr/v1/tenants" |
        sed -n 's/.*"key":"\([^"]*\)".*/\1/p'
}
quiet_key=$(new_tenant quiet)
flood_key=$(new_tenant flood)
curl -sf -X PUT -H "Authorization: Bearer $quiet_key" --data-binary "@$guests/example_add.wasm" \
    "http://$addr/v1/methods/add?export=add" >/dev/null
curl -sf -X PUT -H "Authorization: Bearer $flood_key" --data-binary "@$guests/guest_hostile.wasm" \
    "http://$addr/v1/methods/spin?export=spin" >/dev/null

# A wrk script $1 that POSTs the JSON body $3 with the key $2.
post_script() {
    printf '%s\n' 'wrk.method = "POST"' 'wrk.headers["Content-Type"] = "application/json"' \
        "wrk.headers[\"Authorization\"] = \"Bearer $2\"" "wrk.body = '$3'" > "$1"
}
post_script "$work/quiet.lua" "$quiet_key" \
    '{"args":[{"dtype":"int32","shape":[],"data":2},{"dtype":"int32","shape":[],"data":3}]}'
post_script "$work/flood.lua" "$flood_key" \
    "{\"args\":[{\"dtype\":\"float32\",\"shape\":[],\"data\":0}],\"timeout_ms\":$flood_deadline_ms}"

# "p50 p99" in microseconds of one quiet wrk run; fails if any answer was not 2xx.
quiet_run() {
    local out
    out=$("${quiet_pin[@]}" wrk -t1 -c"$quiet_connections" -d"${seconds}s" --latency -s "$work/quiet.lua" "http://$addr/v1/methods/add/call")
    if grep -q "Non-2xx" <<<"$out"; then echo "quiet calls failed:" >&2; echo "$out" >&2; exit 1; fi
    awk '
        function us(v) {
            if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; if (v ~ /s$/) return v * 1e6
        }
        $1 == "50%" { p50 = us($2) } $1 == "99%" { p99 = us($2) }
        END { printf "%.0f %.0f\n", p50, p99 }' <<<"$out"
}

quiet_run >/dev/null # warm up
ratios=()
printf '%-6s %-22s %-22s %-10s %s\n' round "alone p50/p99 (us)" "flooded p50/p99 (us)" "p99 ratio" \
    "flood answers/s"
for round in $(seq 1 "$rounds"); do
    read -r alone50 alone99 < <(quiet_run)
    if [ "$flood_connections" -gt 0 ]; then
        wrk -t1 -c"$flood_connections" -d"$((seconds + 3))s" -s "$work/flood.lua" \
            "http://$addr/v1/methods/spin/call" > "$work/flood.out" 2>&1 &
    else
        # No flood: the same measurement twice, to see how far the ratio moves by noise alone.
        : > "$work/flood.out"
        sleep "$((seconds + 3))" &
    fi
    flood=$!
    sleep 1
    read -r flood50 flood99 < <(quiet_run)
    wait "$flood"
    ratio=$(awk -v a="$alone99" -v b="$flood99" 'BEGIN { printf "%.2f", b / a }')
    ratios+=("$ratio")
    # The flood's answers a second (every one a DEADLINE_EXCEEDED or a quota refusal); - without.
    flood_rate=$(awk '/Requests\/sec/ { printf "%.0f", $2 }' "$work/flood.out")
    printf '%-6s %-22s %-22s %-10s %s\n' "$round" "$alone50 / $alone99" "$flood50 / $flood99" \
        "${ratio}x" "${flood_rate:--}"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "fairness: the quiet tenant's p99 during the flood / alone, median of $rounds: ${median}x (target <= 1.5x)"
