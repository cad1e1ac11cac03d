#!/usr/bin/env bash
# wasmrpc against a native baseline under the same load generator, side by side in one run: the
# rows P1 and P2 of docs/benchmarks.md ("HTTP/1.1 under wrk"). Builds in release, starts both
# servers on free loopback ports, drives each with wrk (installed from Debian's packages if it is
# missing), and prints each row's value, target and pass/fail.
#
#   bash host/benches/wrk.sh                 # 10 s a measurement, 3 rounds, alternating sides
#   WRK_SECONDS=30 WRK_ROUNDS=5 bash host/benches/wrk.sh
#   WRK_GUEST=wasip2 bash host/benches/wrk.sh   # `add` built for wasm32-wasip2, not with
#                                               # `wasmrpc build` (no WASI imports, the default)
#   WRK_AGAINST=/tmp/wasmrpc-old bash host/benches/wrk.sh
#       # also another build of the `wasmrpc` binary (an older commit's, say), in the same
#       # alternating rounds: a before/after of a change, each side beside the same baseline
#   WRK_TRACING=1 bash host/benches/wrk.sh
#       # also this binary exporting a span tree for every call (OTLP/HTTP to the baseline
#       # server's sink, every call sampled): the row "P1 traced", from its own pairs after the
#       # rounds, untraced and traced measured back to back, the order alternating:
#   WRK_TRACING=1 WRK_TRACE_PAIRS=40 WRK_TRACE_SECONDS=2 bash host/benches/wrk.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${WRK_SECONDS:-10}
rounds=${WRK_ROUNDS:-3}
guest=${WRK_GUEST:-nowasi}
against=${WRK_AGAINST:-}
tracing=${WRK_TRACING:-0}
# The row "P1 traced" compares two sides about 5 % apart on a machine whose speed drifts by more
# than that over a round: many short pairs, each side measured right after the other, hold the
# drift out of each pair (docs/benchmarks.md, "Tracing").
trace_pairs=${WRK_TRACE_PAIRS:-30}
trace_seconds=${WRK_TRACE_SECONDS:-2}
if [ -n "$against" ] && [ ! -x "$against" ]; then
    echo "WRK_AGAINST=$against is not an executable wasmrpc binary" >&2; exit 2
fi

if ! command -v wrk >/dev/null; then
    echo "installing wrk from Debian's packages" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y wrk >&2; else sudo apt-get install -y wrk >&2; fi
fi
cargo build --release -p wasmrpc-host --bin wasmrpc --example baseline_server >&2
case $guest in
    wasip2)
        rustup target add wasm32-wasip2 >&2
        cargo build --profile guest --target wasm32-wasip2 --target-dir target/guests -p example-add >&2
        component=target/guests/wasm32-wasip2/guest/example_add.wasm ;;
    nowasi)
        rustup target add wasm32-unknown-unknown >&2
        component=$(target/release/wasmrpc build --profile guest --target-dir target/guests -p example-add) ;;
    *) echo "WRK_GUEST is wasip2 or nowasi, not $guest" >&2; exit 2 ;;
esac

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

# Start "$@" in the background writing to the log $1 (this shell keeps its pid, for cleanup).
start() {
    local log=$1; shift
    "$@" > "$log" 2>&1 &
    pids+=($!)
}

# The address in the log $1's "listening on http://ADDRESS" line, once it is there.
address_in() {
    for _ in $(seq 1 300); do
        if grep -v "^otlp sink" "$1" | grep -q "listening on http://"; then
            grep -v "^otlp sink" "$1" | sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' | head -1
            return
        fi
        sleep 0.1
    done
    echo "did not start:" >&2; cat "$1" >&2; exit 1
}

start "$work/wasmrpc.log" target/release/wasmrpc serve --listen 127.0.0.1:0 --data-dir "$work/data"
wasmrpc_pid=${pids[-1]}
start "$work/baseline.log" target/release/examples/baseline_server 127.0.0.1:0
baseline_pid=${pids[-1]}
wasmrpc_addr=$(address_in "$work/wasmrpc.log")
baseline_addr=$(address_in "$work/baseline.log")
sink_addr=$(sed -n 's/^otlp sink listening on http:\/\/\([^ ]*\).*/\1/p' "$work/baseline.log")
WASMRPC_SERVER="http://$wasmrpc_addr" target/release/wasmrpc deploy add "$component" --export add >&2
if [ -n "$against" ]; then
    start "$work/against.log" "$against" serve --listen 127.0.0.1:0 --data-dir "$work/against-data"
    against_pid=${pids[-1]}
    against_addr=$(address_in "$work/against.log")
    WASMRPC_SERVER="http://$against_addr" target/release/wasmrpc deploy add "$component" --export add >&2
fi

if [ "$tracing" = 1 ]; then
    # Batches leave every second, as a collector near the server would take them.
    OTEL_BSP_SCHEDULE_DELAY=1000 start "$work/traced.log" target/release/wasmrpc serve \
        --listen 127.0.0.1:0 --data-dir "$work/traced-data" \
        --otlp-endpoint "http://$sink_addr" --traces-sampler always_on
    traced_pid=${pids[-1]}
    traced_addr=$(address_in "$work/traced.log")
    WASMRPC_SERVER="http://$traced_addr" target/release/wasmrpc deploy add "$component" --export add >&2
fi

# The request, host/benches/support/add.lua, carries a caller's sampled trace context (the
# untraced servers ignore it).

# CPU time the process $1 has used, in clock ticks (user + system).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ticks_per_second=$(getconf CLK_TCK)

# "requests/s server-CPU-us-per-request" of one wrk run against the server at $1 (process $2),
# for $3 seconds ($seconds by default); fails if any answer was not 2xx.
throughput() {
    local out before after
    before=$(cpu_ticks "$2")
    out=$(wrk -t2 -c32 -d"${3:-$seconds}s" -s host/benches/support/add.lua "http://$1/v1/methods/add/call")
    after=$(cpu_ticks "$2")
    if grep -q "Non-2xx" <<<"$out"; then echo "errors from $1: $out" >&2; exit 1; fi
    awk -v ticks=$((after - before)) -v hz="$ticks_per_second" '
        /Requests\/sec/ { rps = $2 } / requests in / { n = $1 }
        END { printf "%s %.1f\n", rps, ticks / hz * 1e6 / n }' <<<"$out"
}

# "p50 p99" latency in microseconds at one connection.
latency() {
    wrk -t1 -c1 -d"${seconds}s" --latency -s host/benches/support/add.lua "http://$1/v1/methods/add/call" |
        awk 'function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; return v * 1e6 }
             $1 == "50%" { p50 = us($2) } $1 == "99%" { p99 = us($2) } END { print p50, p99 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
range() { sort -g | awk 'NR == 1 { low = $1 } { high = $1 } END { print low " to " high }'; }

# One short throughput measurement of this binary, untraced or traced, for the row "P1 traced".
measure_untraced() {
    local rps cpu
    read -r rps cpu < <(throughput "$wasmrpc_addr" "$wasmrpc_pid" "$trace_seconds"); u_rps+=("$rps"); u_cpu+=("$cpu")
}
measure_traced() {
    local rps cpu
    read -r rps cpu < <(throughput "$traced_addr" "$traced_pid" "$trace_seconds"); t_rps+=("$rps"); t_cpu+=("$cpu")
}

w_rps=(); b_rps=(); w_cpu=(); b_cpu=(); w_p50=(); b_p50=(); w_p99=(); b_p99=()
a_rps=(); a_cpu=(); a_p50=(); a_p99=()
u_rps=(); u_cpu=(); t_rps=(); t_cpu=(); t_p50=()
for round in $(seq 1 "$rounds"); do
    echo "round $round of $rounds" >&2
    read -r rps cpu < <(throughput "$wasmrpc_addr" "$wasmrpc_pid"); w_rps+=("$rps"); w_cpu+=("$cpu")
    if [ "$tracing" = 1 ]; then
        read -r p50 _ < <(latency "$traced_addr"); t_p50+=("$p50")
    fi
    read -r rps cpu < <(throughput "$baseline_addr" "$baseline_pid"); b_rps+=("$rps"); b_cpu+=("$cpu")
    if [ -n "$against" ]; then
        read -r rps cpu < <(throughput "$against_addr" "$against_pid"); a_rps+=("$rps"); a_cpu+=("$cpu")
    fi
    read -r p50 p99 < <(latency "$wasmrpc_addr"); w_p50+=("$p50"); w_p99+=("$p99")
    read -r p50 p99 < <(latency "$baseline_addr"); b_p50+=("$p50"); b_p99+=("$p99")
    if [ -n "$against" ]; then
        read -r p50 p99 < <(latency "$against_addr"); a_p50+=("$p50"); a_p99+=("$p99")
    fi
done

if [ "$tracing" = 1 ]; then
    for pair in $(seq 1 "$trace_pairs"); do
        [ $((pair % 10)) = 1 ] && echo "P1 traced: pair $pair of $trace_pairs" >&2
        # The traced side right before or after the untraced one, so that the pair shares the
        # machine's state; first in every other pair, so that neither side is always the one
        # measured after the other.
        if [ $((pair % 2)) = 0 ]; then measure_traced; measure_untraced; else measure_untraced; measure_traced; fi
    done
fi

wr=$(printf '%s\n' "${w_rps[@]}" | median); br=$(printf '%s\n' "${b_rps[@]}" | median)
w50=$(printf '%s\n' "${w_p50[@]}" | median); b50=$(printf '%s\n' "${b_p50[@]}" | median)
w99=$(printf '%s\n' "${w_p99[@]}" | median); b99=$(printf '%s\n' "${b_p99[@]}" | median)
wc=$(printf '%s\n' "${w_cpu[@]}" | median); bc=$(printf '%s\n' "${b_cpu[@]}" | median)

echo
echo "wasmrpc $wasmrpc_addr against the native baseline $baseline_addr; wrk, HTTP/1.1 keep-alive,"
echo "scalar int32 add in JSON ($guest build), ${seconds} s a measurement, median of $rounds alternating rounds"
echo "server CPU a request at 32 connections (context for P1): wasmrpc $wc us, baseline $bc us"
echo "the baseline's own p99 / p50 at 1 connection (context for P2's tail): $b99 / $b50 us" \
    "= $(awk -v a="$b99" -v b="$b50" 'BEGIN { printf "%.2f", a / b }')"
awk -v wr="$wr" -v br="$br" -v w50="$w50" -v b50="$b50" -v w99="$w99" 'BEGIN {
    row("P1 throughput, 32 connections: wasmrpc / baseline",
        sprintf("%.0f / %.0f req/s = %.2f", wr, br, wr / br), ">= 0.75", wr / br >= 0.75)
    row("P2 p50 at 1 connection: wasmrpc - baseline",
        sprintf("%.0f - %.0f us = %.0f us", w50, b50, w50 - b50), "<= 30 us", w50 - b50 <= 30)
    row("P2 p99 / p50 at 1 connection (wasmrpc)",
        sprintf("%.0f / %.0f us = %.2f", w99, w50, w99 / w50), "<= 2", w99 / w50 <= 2)
}
function row(name, value, target, ok) { printf "%-52s %-34s %-9s %s\n", name, value, target, ok ? "pass" : "FAIL" }'
if [ -n "$against" ]; then
    ar=$(printf '%s\n' "${a_rps[@]}" | median); ac=$(printf '%s\n' "${a_cpu[@]}" | median)
    a50=$(printf '%s\n' "${a_p50[@]}" | median); a99=$(printf '%s\n' "${a_p99[@]}" | median)
    echo
    echo "the same rounds, each build (medians; per-round values in order):"
    printf '%-10s %8s req/s (%s)  %5s us CPU a request  p50 %4s us (%s)  p99 %4s us\n' \
        "this" "$wr" "${w_rps[*]}" "$wc" "$w50" "${w_p50[*]}" "$w99"
    printf '%-10s %8s req/s (%s)  %5s us CPU a request  p50 %4s us (%s)  p99 %4s us\n' \
        "against" "$ar" "${a_rps[*]}" "$ac" "$a50" "${a_p50[*]}" "$a99"
    printf '%-10s %8s req/s (%s)  %5s us CPU a request  p50 %4s us (%s)  p99 %4s us\n' \
        "baseline" "$br" "${b_rps[*]}" "$bc" "$b50" "${b_p50[*]}" "$b99"
fi
if [ "$tracing" = 1 ]; then
    ur=$(printf '%s\n' "${u_rps[@]}" | median); uc=$(printf '%s\n' "${u_cpu[@]}" | median)
    tr=$(printf '%s\n' "${t_rps[@]}" | median); tc=$(printf '%s\n' "${t_cpu[@]}" | median)
    t50=$(printf '%s\n' "${t_p50[@]}" | median)
    # What became of the traced side's spans: all exported, or dropped (the queue full).
    spans=$(curl -s "http://$traced_addr/metrics" | awk '
        /^wasmrpc_trace_spans_exported_total / { e = $2 }
        /^wasmrpc_trace_spans_dropped_total/ { d += $2 }
        END { printf "%d exported, %d dropped", e, d }')
    # Each pair's traced / untraced: pairs of one side vary by more than the difference measured
    # on this machine, and a pair measured back to back shares the machine's state.
    ratios=$(for i in "${!t_rps[@]}"; do awk -v t="${t_rps[$i]}" -v u="${u_rps[$i]}" 'BEGIN { printf "%.3f\n", t / u }'; done)
    pr=$(median <<<"$ratios")
    echo
    echo "tracing: the same binary exporting every call's spans (always_on) to an OTLP sink; $spans"
    echo "P1 traced: $trace_pairs pairs of ${trace_seconds} s, untraced and traced back to back (medians):"
    printf '%-10s %8s req/s (%s)  %5s us CPU a request  p50 at 1 connection %4s us\n' \
        "untraced" "$ur" "$(printf '%s\n' "${u_rps[@]}" | range)" "$uc" "$w50"
    printf '%-10s %8s req/s (%s)  %5s us CPU a request  p50 at 1 connection %4s us\n' \
        "traced" "$tr" "$(printf '%s\n' "${t_rps[@]}" | range)" "$tc" "$t50"
    echo "traced / untraced, each pair in order: $(tr '\n' ' ' <<<"$ratios")"
    awk -v tr="$tr" -v ur="$ur" -v pr="$pr" 'BEGIN {
        printf "%-52s %-34s %-9s %s\n", "P1 traced: median of the pairs traced / untraced",
            sprintf("%.3f", pr), ">= 0.95", (pr >= 0.95) ? "pass" : "FAIL"
        printf "%-52s %-34s %-9s %s\n", "P1 traced: throughput traced / untraced (medians)",
            sprintf("%.0f / %.0f req/s = %.3f", tr, ur, tr / ur), ">= 0.95", (tr / ur >= 0.95) ? "pass" : "FAIL"
    }'
fi
