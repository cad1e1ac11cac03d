#!/usr/bin/env bash
# Row P1 traced for two builds at once: an untraced server and two traced ones (this build and
# another, every call sampled, exporting to the OTLP sink of the baseline server's process),
# driven by wrk as row P1 does, in rounds whose order rotates through all six orders of the
# three, so no side is always measured after another. Prints each round, then the median of
# each traced side's round ratios (traced / untraced, the pair measured in the same round) and
# the medians of throughput and server CPU a request.
#
# `wrk.sh WRK_TRACING=1` measures this build only, beside the native baseline; this one is for
# a before/after of a change to tracing, where a point matters and one round's pair varies by
# ±3 % on a 2-CPU machine (docs/benchmarks.md, "Tracing").
#
#   bash host/benches/trace_ab.sh /tmp/wasmrpc-before     # 18 rounds of 3 s
#   TRACE_AB_ROUNDS=30 TRACE_AB_SECONDS=4 bash host/benches/trace_ab.sh /tmp/wasmrpc-before
#   TRACE_AB_ROUNDS=90 TRACE_AB_SECONDS=1 bash host/benches/trace_ab.sh /tmp/wasmrpc-before   # half a point
set -euo pipefail
cd "$(dirname "$0")/../.."

other=${1:?usage: trace_ab.sh OTHER_WASMRPC_BINARY}
rounds=${TRACE_AB_ROUNDS:-18}
seconds=${TRACE_AB_SECONDS:-3}
if [ ! -x "$other" ]; then echo "$other is not an executable wasmrpc binary" >&2; exit 2; fi
# Builds, `add`, $work, $pids, address_in and the OTLP sink at $sink.
source host/benches/support/sink_and_add.sh wrk

# The sides: 0 untraced (this build), 1 traced (this build), 2 traced (the other build).
names=(untraced "traced" "other")
binaries=(target/release/wasmrpc target/release/wasmrpc "$other")
addresses=(); server_pids=()
for side in 0 1 2; do
    flags=()
    if [ "$side" != 0 ]; then
        flags=(--otlp-endpoint "http://$sink" --traces-sampler always_on)
    fi
    # Batches leave every second, as a collector near the server would take them.
    OTEL_BSP_SCHEDULE_DELAY=1000 "${binaries[$side]}" serve --listen 127.0.0.1:0 \
        --data-dir "$work/data-$side" "${flags[@]}" > "$work/server-$side.log" 2>&1 &
    pids+=($!); server_pids+=($!)
    addresses+=("$(address_in "$work/server-$side.log" "listening on http://")")
    WASMRPC_SERVER="http://${addresses[$side]}" target/release/wasmrpc deploy add "$component" \
        --export add >&2
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks_per_second=$(getconf CLK_TCK)

# "requests/s server-CPU-us-per-request" of one wrk run against side $1.
measure() {
    local before after out
    before=$(cpu_ticks "${server_pids[$1]}")
    out=$(wrk -t2 -c32 -d"${seconds}s" -s host/benches/support/add.lua \
        "http://${addresses[$1]}/v1/methods/add/call")
    after=$(cpu_ticks "${server_pids[$1]}")
    if grep -q "Non-2xx" <<<"$out"; then echo "errors from side ${names[$1]}: $out" >&2; exit 1; fi
    awk -v ticks=$((after - before)) -v hz="$ticks_per_second" '
        /Requests\/sec/ { rps = $2 } / requests in / { n = $1 }
        END { printf "%s %.1f\n", rps, ticks / hz * 1e6 / n }' <<<"$out"
}

for side in 0 1 2; do measure "$side" > /dev/null; done   # warm: components loaded, pools full
orders=("0 1 2" "2 1 0" "1 0 2" "2 0 1" "0 2 1" "1 2 0")
echo "round: requests/s (server CPU us a request) of untraced, traced, other; traced/untraced, other/untraced"
for round in $(seq 1 "$rounds"); do
    declare -A result=()
    for side in ${orders[$(((round - 1) % 6))]}; do result[$side]=$(measure "$side"); done
    echo "${result[0]} ${result[1]} ${result[2]}" | awk -v r="$round" '{
        printf "%2d: %s (%s) %s (%s) %s (%s); %.3f %.3f\n", r, $1, $2, $3, $4, $5, $6, $3 / $1, $5 / $1 }'
done | tee "$work/rounds"

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
column() { awk -v c="$1" '{ gsub(/[();]/, ""); print $c }' "$work/rounds" | median; }
echo
echo "medians of $rounds rounds of ${seconds} s (wrk -t2 -c32, HTTP/1.1, scalar int32 add in JSON):"
printf '%-9s %9s req/s  %5s us CPU a request\n' untraced "$(column 2)" "$(column 3)"
printf '%-9s %9s req/s  %5s us CPU a request  traced / untraced %s\n' traced "$(column 4)" "$(column 5)" "$(column 8)"
printf '%-9s %9s req/s  %5s us CPU a request  traced / untraced %s  (%s)\n' other "$(column 6)" "$(column 7)" "$(column 9)" "$other"
# A difference of half a point is within what the medians resolve in 90 rounds; how often each
# build came out ahead in the same round says which way it leans (docs/benchmarks.md, "Tracing").
awk '{ gsub(/[();]/, ""); d = $8 - $9; n++; sum += d; if (d > 0) ahead++ }
     END { printf "this build ahead of the other in %d of %d rounds; mean of (traced - other) / untraced %+.4f\n", ahead, n, sum / n }' \
    "$work/rounds"
