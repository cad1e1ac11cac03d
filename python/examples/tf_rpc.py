"""TensorFlow's `tf.distribute.experimental.rpc` example with wasmrpc: a server embedded in this
process serves the add example's `add` as `addition`, and a client calls it three ways.

    python python/examples/tf_rpc.py [PATH/TO/example_add.wasm]

Without a path it uses the add example as `bash examples/serve.sh` builds it
(target/guests/wasm32-unknown-unknown/guest/example_add.component.wasm), or the `wasm32-wasip2`
build the tests make (target/guests/wasm32-wasip2/guest/example_add.wasm); with neither there, it
builds the first once, saying so (about a minute). Run it from the repository's root.
python/tests/test_examples.py runs this script.
"""

import os
import shutil
import subprocess
import sys

import numpy as np

import wasmrpc
from wasmrpc import rpc

BUILT_BY_SERVE_SH = "target/guests/wasm32-unknown-unknown/guest/example_add.component.wasm"
BUILT_BY_TESTS = "target/guests/wasm32-wasip2/guest/example_add.wasm"


def add_component():
    """The add example's component: given, found, or built now."""
    if len(sys.argv) > 1:
        return sys.argv[1]
    for path in (BUILT_BY_SERVE_SH, BUILT_BY_TESTS):
        if os.path.exists(path):
            return path
    if not os.path.exists("examples/add/Cargo.toml"):
        sys.exit("run this from the repository's root, or give the component's path")
    steps = [
        ["rustup", "target", "add", "wasm32-wasip2"],
        ["cargo", "build", "--profile", "guest", "--target", "wasm32-wasip2", "-p", "example-add",
         "--target-dir", "target/guests"],
    ]
    print("building the add example once (about a minute):", file=sys.stderr)
    for step in steps:
        print("  " + " ".join(step), file=sys.stderr)
        if shutil.which(step[0]) is None:
            sys.exit(f"{step[0]} is not installed: install the Rust toolchain (https://rustup.rs)")
        subprocess.run(step, check=True)
    return BUILT_BY_TESTS


component = add_component()

server = rpc.Server.create("grpc", "localhost:0")
server.register("addition", component, export="add")
server.start()

client = rpc.Client.create("grpc", address=server.address, name="test_client")
a = np.array(2, dtype=np.int32)
b = np.array(3, dtype=np.int32)

result = client.call(args=[a, b], method_name="addition", output_specs=wasmrpc.TensorSpec((), np.int32))
if result.is_ok():
    print("client.call              ->", result.get_value())

result = client.addition(a, b)
if result.is_ok():
    print("client.addition          ->", result.get_value())

print("client.addition_blocking ->", client.addition_blocking(a, b))

try:
    client.call("addition", [np.float32(2), b]).get_value()
except wasmrpc.InvalidArgumentError as e:
    print("a float32 argument       ->", type(e).__name__, e.code, e.message)

server.shutdown()
