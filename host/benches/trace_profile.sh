#!/usr/bin/env bash
# Where a traced server's CPU goes: the share of its samples spent on traces. Builds in release,
# starts the OTLP sink (in the baseline server's process, as `wrk.sh WRK_TRACING=1` does) and a
# server exporting every call's spans to it, drives it with wrk as row P1 does, records the
# server with `perf record --call-graph dwarf` and prints:
#
#   - the share of all samples with a frame of the tracing code on their stack (`otel::`,
#     `service::trace`), by the outermost such frame and, under each, the innermost frames;
#   - the share of the exporter's thread (`wasmrpc-otlp`), sending batches.
#
# A share of samples, unlike requests a second, holds still on a machine whose speed varies
# from second to second (docs/benchmarks.md, "Tracing"): about ±0.2 points at the default
# length. Needs `perf` (Debian's linux-perf) and wrk.
#
#   bash host/benches/trace_profile.sh
#   TRACE_PROFILE_SECONDS=6 bash host/benches/trace_profile.sh
#   TRACE_PROFILE_BINARY=/tmp/wasmrpc-old bash host/benches/trace_profile.sh   # another build
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${TRACE_PROFILE_SECONDS:-3}
binary=${TRACE_PROFILE_BINARY:-target/release/wasmrpc}
# Builds, `add`, $work, $pids, address_in and the OTLP sink at $sink.
source host/benches/support/sink_and_add.sh wrk linux-perf
OTEL_BSP_SCHEDULE_DELAY=1000 "$binary" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
    --otlp-endpoint "http://$sink" --traces-sampler always_on > "$work/traced.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
server=$(address_in "$work/traced.log" "listening on http://")
WASMRPC_SERVER="http://$server" target/release/wasmrpc deploy add "$component" --export add >&2

url="http://$server/v1/methods/add/call"
wrk -t2 -c32 -d2s -s host/benches/support/add.lua "$url" > /dev/null   # warm: components loaded, pools full
wrk -t2 -c32 -d"$((seconds + 2))s" -s host/benches/support/add.lua "$url" > "$work/wrk.txt" &
wrk_pid=$!
sleep 1
perf record -F 2999 --call-graph dwarf,16384 -p "$server_pid" -o "$work/perf.data" \
    -- sleep "$seconds" 2> "$work/perf.log" > /dev/null
wait "$wrk_pid"
echo "wrk: $(grep Requests/sec "$work/wrk.txt")"
perf script --no-inline -F comm,ip,sym -i "$work/perf.data" 2> /dev/null | python3 -c '
import collections, re, sys

samples, current = [], None
for line in sys.stdin:
    if not line.strip():
        if current:
            samples.append(current)
        current = None
    elif not line[0].isspace():
        current = (line.strip(), [])
    elif current:
        parts = line.strip().split(" ", 1)
        current[1].append(parts[1] if len(parts) > 1 else "?")
if current:
    samples.append(current)

tracing = re.compile(r"otel::|service::trace")
total = len(samples)
by_outer = collections.Counter()
inner = collections.defaultdict(collections.Counter)
exporter = 0
for thread, frames in samples:
    marked = [f for f in frames if tracing.search(f)]
    if thread == "wasmrpc-otlp":
        exporter += 1
    elif marked:
        by_outer[marked[-1][:90]] += 1
        inner[marked[-1][:90]][frames[0][:80]] += 1
share = lambda n: f"{100 * n / total:5.2f} %"
traced = sum(by_outer.values())
print(f"{total} samples of the traced server")
print(f"{share(traced + exporter)}  tracing in all: the request threads plus the exporter thread")
print(f"{share(exporter)}  the exporter thread (wasmrpc-otlp)")
print(f"{share(traced)}  tracing code on the request threads, by its outermost frame:")
for outer, n in by_outer.most_common(8):
    print(f"  {share(n)}  {outer}")
    for frame, m in inner[outer].most_common(4):
        print(f"             {share(m)}  {frame}")
'
