"""Latency of `add` on two 1,000-element float32 tensors at one keep-alive HTTP/1.1 connection, for
each method named, interleaved in rounds so a noisy machine weighs on each alike (issue 33 rows of
host/benches/run.sh). Prints one line per method: p50 and p99 in ms, then each p50 over the first's.

    python3 host/benches/lang_latency.py HOST:PORT CALLS_PER_ROUND ROUNDS METHOD...

A METHOD may also be LABEL=HOST:PORT/METHOD: that method on another server, on its own connection,
reported as LABEL. Two binaries compared side by side in one run (docs/benchmarks.md, issue 33):

    python3 host/benches/lang_latency.py A:1 200 10 rust_add py_add new_py_add=B:2/py_add
"""
import http.client
import json
import statistics
import sys
import time

address, per_round, rounds, methods = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
host, port = address.rsplit(":", 1)
t = {"dtype": "float32", "shape": [1000], "data": [i * 0.5 for i in range(1000)]}
body = json.dumps({"args": [t, t]})
want = [i * 1.0 for i in range(1000)]
conn = http.client.HTTPConnection(host, int(port))
times = {m: [] for m in methods}
# label -> (connection, method name on its server)
targets = {}
for m in methods:
    if "=" in m:
        other, name = m.split("=", 1)[1].split("/", 1)
        other_host, other_port = other.rsplit(":", 1)
        targets[m] = (http.client.HTTPConnection(other_host, int(other_port)), name)
    else:
        targets[m] = (conn, m)


def call(label):
    conn, method = targets[label]
    start = time.perf_counter()
    conn.request("POST", f"/v1/methods/{method}/call", body, {"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        sys.exit(f"{method}: {response.status} {data[:300]!r}")
    return elapsed, data


for m in methods:
    _, data = call(m)
    # The `noop` and `bare` guests (host/benches/guests/*_{noop,bare}) answer 0: only the `add`
    # ones are checked.
    if "add" in m and json.loads(data)["outputs"][0]["data"] != want:
        sys.exit(f"{m}: a wrong answer")
    for _ in range(50):
        call(m)
for _ in range(rounds):
    for m in methods:
        times[m].extend(call(m)[0] for _ in range(per_round))
base = statistics.median(times[methods[0]])
for m in methods:
    ts = sorted(times[m])
    p50 = statistics.median(ts)
    print(f"{m.split('=')[0]} p50 {p50 * 1e3:.3f} ms p99 {ts[int(len(ts) * 0.99)] * 1e3:.3f} ms "
          f"ratio {p50 / base:.2f} n {len(ts)}")
