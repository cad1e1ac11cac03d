"""What the first call after an idle release costs (issue 33, docs/benchmarks.md, "Idle components'
code"): for each method named, 300 warm calls (the first 50 not counted), then 15 calls each made
just after the server handed the component's code back (`wasmrpc_idle_code_releases_total` in
/metrics went up). Run against a server started with `--release-idle-code-s 1`, with the methods
registered, each call on two 1,000-element float32 tensors:

    wasmrpc serve --listen 127.0.0.1:8080 --data-dir /tmp/d --release-idle-code-s 1 &
    wasmrpc deploy py_add target/bench-guests/py_add.wasm     # host/benches/guests/build.sh
    python3 host/benches/idle_refault.py 127.0.0.1:8080 rust_add py_add js_add
"""
import http.client
import json
import statistics
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
methods = sys.argv[2:]
t = {"dtype": "float32", "shape": [1000], "data": [i * 0.5 for i in range(1000)]}
body = json.dumps({"args": [t, t]})
conn = http.client.HTTPConnection(host, int(port))


def call(method):
    start = time.perf_counter()
    conn.request("POST", f"/v1/methods/{method}/call", body, {"content-type": "application/json"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200, response.status
    return (time.perf_counter() - start) * 1000


def releases():
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    return int(next(line.split()[1] for line in text.splitlines()
                    if line.startswith("wasmrpc_idle_code_releases_total ")))


for method in methods:
    warm = [call(method) for _ in range(300)][50:]
    cold = []
    for _ in range(15):
        seen = releases()
        while releases() <= seen:
            time.sleep(0.05)
        cold.append(call(method))
    print(f"{method}: warm p50 {statistics.median(warm):.3f} ms, first call after a release "
          f"p50 {statistics.median(cold):.3f} ms (min {min(cold):.3f}, max {max(cold):.3f})")
