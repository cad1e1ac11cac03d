#!/usr/bin/env bash
# Where a traced call's CPU goes, by thread and process: a server exporting every call's spans to
# the OTLP sink of the baseline server's process, driven by wrk as row P1 does, and for each round
# the CPU time a request of each of the server's threads (from /proc/PID/task/*/schedstat, in
# nanoseconds) and of the sink's process, with the machine's idle share over the round (P1 keeps
# both vCPUs busy: every microsecond any process spends is throughput lost).
#
# The figures hold still where requests a second do not: a thread's CPU a request moves little
# when the machine's speed drifts (docs/benchmarks.md, "Tracing").
#
#   bash host/benches/trace_threads.sh
#   TRACE_THREADS_ROUNDS=5 TRACE_THREADS_SECONDS=6 bash host/benches/trace_threads.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=${TRACE_THREADS_ROUNDS:-3}
seconds=${TRACE_THREADS_SECONDS:-4}
# Builds, `add`, $work, $pids (the sink's process first), address_in and the OTLP sink at $sink.
source host/benches/support/sink_and_add.sh wrk
sink_pid=${pids[0]}
OTEL_BSP_SCHEDULE_DELAY=1000 target/release/wasmrpc serve --listen 127.0.0.1:0 \
    --data-dir "$work/data" --otlp-endpoint "http://$sink" --traces-sampler always_on \
    > "$work/traced.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
server=$(address_in "$work/traced.log" "listening on http://")
WASMRPC_SERVER="http://$server" target/release/wasmrpc deploy add "$component" --export add >&2
url="http://$server/v1/methods/add/call"

# "name microseconds" for each of the server's threads (summed by name) and the sink's process.
cpu_by_thread() {
    for task in /proc/"$server_pid"/task/*; do
        echo "$(tr ' ' _ < "$task/comm") $(awk '{ print $1 / 1000 }' "$task/schedstat")"
    done | awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }'
    cat /proc/"$sink_pid"/task/*/schedstat | awk '{ s += $1 / 1000 } END { print "sink(process)", s }'
}
# Idle and all jiffies of the machine.
idle_total() { head -1 /proc/stat | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; print $5, t }'; }

wrk -t2 -c32 -d2s -s host/benches/support/add.lua "$url" > /dev/null   # warm: component loaded, pools full
for round in $(seq 1 "$rounds"); do
    cpu_by_thread | sort > "$work/before"
    read -r idle0 total0 < <(idle_total)
    out=$(wrk -t2 -c32 -d"${seconds}s" -s host/benches/support/add.lua "$url")
    read -r idle1 total1 < <(idle_total)
    cpu_by_thread | sort > "$work/after"
    n=$(awk '/ requests in / { print $1 }' <<<"$out")
    echo "round $round: $(awk '/Requests\/sec/ { print $2 }' <<<"$out") req/s, machine idle" \
        "$(awk -v i=$((idle1 - idle0)) -v t=$((total1 - total0)) 'BEGIN { printf "%.1f %%", 100 * i / t }')"
    join "$work/before" "$work/after" | awk -v n="$n" '$3 > $2 { printf "  %-22s %7.3f us a request\n", $1, ($3 - $2) / n }'
done
