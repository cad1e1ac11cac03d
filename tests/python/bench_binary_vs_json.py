"""tritonclient against a running server: one infer on two float32 tensors through `add_float32`,
in JSON and with binary tensor data, timed as the client sees it (encoding, HTTP, the server,
decoding into numpy), side by side in one run. Prints each median and the ratio.

    python tests/python/bench_binary_vs_json.py 127.0.0.1:8080            # 16 MiB tensors
    python tests/python/bench_binary_vs_json.py 127.0.0.1:8080 --mib 4 --rounds 3

The server needs `add_float32` registered (the add example's export of that name); the README's
run command registers it. docs/benchmarks.md has the figures.
"""

import argparse
import statistics
import time

import numpy as np
import tritonclient.http as httpclient


def infer_seconds(client, model, a, b, binary):
    inputs = []
    for name, values in (("a", a), ("b", b)):
        tensor = httpclient.InferInput(name, list(values.shape), "FP32")
        tensor.set_data_from_numpy(values, binary_data=binary)
        inputs.append(tensor)
    outputs = [httpclient.InferRequestedOutput("output", binary_data=binary)]
    started = time.perf_counter()
    result = client.infer(model, inputs, outputs=outputs)
    total = result.as_numpy("output")
    took = time.perf_counter() - started
    assert np.array_equal(total, a + b), "wrong sum"
    return took


def measure(url, mib=16, rounds=5, model="add_float32"):
    """(JSON median seconds, binary median seconds) for two `mib` MiB float32 tensors."""
    client = httpclient.InferenceServerClient(url, network_timeout=600, connection_timeout=600)
    n = (mib << 20) // 4
    rng = np.random.default_rng(7)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    json_times, binary_times = [], []
    for _ in range(rounds):
        json_times.append(infer_seconds(client, model, a, b, binary=False))
        binary_times.append(infer_seconds(client, model, a, b, binary=True))
    return statistics.median(json_times), statistics.median(binary_times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="host:port of the server, without a scheme")
    parser.add_argument("--mib", type=int, default=16, help="size of each tensor (default 16)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, alternating (default 5)")
    args = parser.parse_args()
    json_s, binary_s = measure(args.url, args.mib, args.rounds)
    print(
        f"add_float32 of two {args.mib} MiB float32 tensors, tritonclient, median of "
        f"{args.rounds}: JSON {json_s * 1e3:.0f} ms, binary {binary_s * 1e3:.0f} ms, "
        f"JSON/binary {json_s / binary_s:.1f}x"
    )


if __name__ == "__main__":
    main()
